"""Runtime config selection from a best-configs artifact. Imports neither Ray nor MLflow (MLflow only when a
`runs:/...` or `models:/...` URI is given).

Loading
    `load_configs(path_or_uri)` loads and validates an artifact (`raytune_attn.artifact`) and makes it the active
    table of the process. Without an explicit call, the first config lookup loads the path or URI in the
    environment variable `RAYTUNE_ATTN_CONFIGS` (read once). A path may be the JSON file or a directory: every
    `best_configs.json` under it is loaded and they are merged by (accelerator type, problem key), the entry of the
    newest `created` winning, equal `created` the path that sorts first (`artifact.merge`). `file://` URIs are
    paths; `runs:/<run_id>/<path>`, `models:/...` and `mlflow-artifacts:/...` URIs are downloaded through MLflow.
    A corrupt, tampered, malformed or wrong-schema artifact raises `ArtifactError` naming the file and the problem.

Which entries apply (decided once, at load)
    The device is detected once at load (`device.detect()` on the current device) and cached. An entry applies when
    it was measured on this GPU model and arch (the model of the device name it recorded, `gpu`, equal to this
    device's: `device.gpu_model`; Ray's accelerator type name, which the entry also carries, differs from torch's
    device name on AMD; an entry without `gpu` compares accelerator types), its Triton version equals the running
    Triton's full version (or the running one is in the entry's declared `triton_compatible` range; an empty version
    matches nothing), and its kernel_source_hash equals this kernel's (`provenance.kernel_source_hash()`): a config
    measured on another GPU, compiler or kernel is not known to be valid or fast here. The dtype is part of the
    lookup key: an entry never serves a call of another dtype. If some entries do not apply, ONE `RuntimeWarning`
    per artifact names it and what differs (how many entries for each reason) and those entries are ignored: the
    default config is used where no other entry serves the call. Entries of other GPUs alone do not warn while some
    entry serves this one (an artifact of a fleet, tuned on each GPU type); an artifact with nothing for this GPU
    does. The torch version is not compared: the kernel is Triton's code, torch only hands it the tensors.

Lookup order for a call (`select_config`)
    1. exact: the entry whose problem key equals the call's (kind, batch, hq, hkv, seqlen_q, seqlen_k, head_dim,
       causal, dtype);
    2. nearest: among entries with the same head_dim, GQA ratio (hq // hkv), causal flag and dtype, the one
       nearest by sequence length: smallest |log2(sq/sq')| + |log2(sk/sk')|, preferring the same kind
       (dense/varlen) first, then the nearest batch * hq, then the problem key (deterministic);
    3. default: `config.default_config(head_dim)`.
    Results are memoised per call shape, so a repeated lookup is one dict access (about a microsecond).
    The returned dict is shared: callers must not mutate it.
"""

from __future__ import annotations

import math
import os
import tempfile
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytune_attn import artifact as _artifact
from raytune_attn.config import InvalidConfig, default_config
from raytune_attn.problem import Problem
from raytune_attn.validation import check

ENV_VAR = "RAYTUNE_ATTN_CONFIGS"
MLFLOW_SCHEMES = ("runs:/", "models:/", "mlflow-artifacts:/")
_CACHE_MAX = 8192


@dataclass
class ConfigTable:
    """An artifact indexed for the device it was loaded on."""

    source: str
    artifact: dict[str, Any]
    device: Any  # device.DeviceInfo
    triton_version: str
    exact: dict[tuple, dict] = field(default_factory=dict)  # shape tuple -> complete config
    buckets: dict[tuple, list[tuple[Problem, dict]]] = field(default_factory=dict)  # (d, ratio, causal, dtype)
    ignored: dict[str, int] = field(default_factory=dict)  # reason -> number of entries ignored
    paged: list[tuple[Problem, dict]] = field(default_factory=list)  # paged_attention's: raytune_attn.paged_runtime

    @property
    def checksum(self) -> str:
        return self.artifact["checksum"]

    @property
    def n_usable(self) -> int:
        return len(self.exact)


_lock = threading.Lock()
_table: ConfigTable | None = None
_env_checked = False
_cache: dict[tuple, dict] = {}
_warned: set[tuple[str, str]] = set()


def _shape_key(p: Problem) -> tuple:
    return (p.batch, p.hq, p.hkv, p.seqlen_q, p.seqlen_k, p.head_dim, p.causal, p.dtype, p.varlen)


def _warn_once(table_id: str, reason: str, message: str) -> None:
    if (table_id, reason) in _warned:
        return
    _warned.add((table_id, reason))
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _resolve(path_or_uri: str | os.PathLike, scratch: str) -> list[Path]:
    """The artifact files a path or URI names: the file, or every best_configs.json under a directory (an MLflow
    URI's download goes to the folder `scratch`)."""
    s = os.fspath(path_or_uri)
    if not s.strip():  # Path("") is the working directory: every artifact under it would be merged
        raise ValueError("load_configs: the path is empty")
    if s.startswith(MLFLOW_SCHEMES):
        try:
            from raytune_attn.tune.tracking import download_artifact  # the one module that imports mlflow
        except ImportError as e:
            raise ImportError(f"{s}: an MLflow URI needs MLflow, which the tune extra installs "
                              f"(pip install 'raytune-attn[tune]'): {e}") from None
        local = Path(download_artifact(s, dst=scratch))
    elif s.startswith("file://"):
        local = _file_uri_path(s)
    elif "://" in s:
        raise ValueError(f"load_configs: {s}: scheme {s.split('://', 1)[0]!r} is not read here; give a local path, "
                         f"file://, or an MLflow URI ({', '.join(MLFLOW_SCHEMES)}), or download the artifact first")
    else:
        local = Path(s)
    if not local.is_dir():
        return [local]
    found = sorted(local.rglob(_artifact.ARTIFACT_FILENAME))
    if not found:
        raise FileNotFoundError(f"no {_artifact.ARTIFACT_FILENAME} in {s}")
    return found


def _shown(given: str, path: Path, scratch: str) -> str:
    """How messages name an artifact file: its path, or for one downloaded into `scratch` (removed once read) the
    URI it came from, with the file's place under it where the URI named a folder (runs:/ID/, models:/NAME/1)."""
    if not str(path).startswith(scratch):
        return str(path)
    rel = path.relative_to(scratch).as_posix()
    return given if given.rstrip("/").endswith(rel) else f"{given.rstrip('/')}/{rel}"


def _file_uri_path(uri: str) -> Path:
    """The local path of a file:// URI (RFC 8089): percent-escapes decoded (`Path.as_uri()` writes a space as %20),
    the host empty or localhost; another host's file is not read here."""
    from urllib.parse import urlsplit
    from urllib.request import url2pathname

    parts = urlsplit(uri)
    if parts.netloc not in ("", "localhost"):
        raise ValueError(f"load_configs: {uri}: a file on host {parts.netloc!r}; give a local path or file:///path")
    return Path(url2pathname(parts.path))


def _same_gpu(e: dict, device: Any) -> bool:
    """The entry was measured on this device's GPU model and arch."""
    from raytune_attn.device import gpu_model

    if e["arch"] != device.arch:
        return False
    if e.get("gpu"):
        return gpu_model(e["gpu"]) == gpu_model(device.name)
    return e["accelerator_type"] == device.accelerator_type


def _why_not(e: dict, device: Any, triton_version: str, kernel_hash: str) -> str | None:
    """Why an entry does not apply here ("device", "triton", "kernel"), or None when it does."""
    if not _same_gpu(e, device):
        return "device"
    if not _artifact.triton_matches(e, triton_version):
        return "triton"
    if not e.get("kernel_source_hash") or e["kernel_source_hash"] != kernel_hash:
        return "kernel"
    return None


def _differences(ignored: dict[str, list[dict]], device: Any, triton_version: str, kernel_hash: str) -> list[str]:
    """What differs, one phrase per reason, for the warning."""
    out = []
    if ignored.get("device"):
        tuned_on = sorted({f"{e.get('gpu') or e['accelerator_type']} ({e['arch']})" for e in ignored["device"]})
        out.append(f"{len(ignored['device'])} tuned on {', '.join(tuned_on)}, not on this "
                   f"{device.name} ({device.arch})")
    if ignored.get("triton"):
        versions = sorted({e.get("triton_version") or "an unrecorded version" for e in ignored["triton"]})
        out.append(f"{len(ignored['triton'])} tuned with Triton {', '.join(versions)}, this process runs Triton "
                   f"{triton_version}")
    if ignored.get("kernel"):
        hashes = sorted({(e.get("kernel_source_hash") or "none")[:12] for e in ignored["kernel"]})
        out.append(f"{len(ignored['kernel'])} measured with another kernel source (kernel_source_hash "
                   f"{', '.join(hashes)}; this kernel's is {kernel_hash[:12]})")
    return out


def index(art: dict[str, Any], device: Any, triton_version: str, *, source: str = "<artifact>",
          kernel_hash: str | None = None) -> ConfigTable:
    """Index a validated artifact for `device` (a DeviceInfo), Triton `triton_version` and the kernel source of
    `kernel_hash` (default: this installation's); one warning per artifact about the entries that do not apply."""
    from raytune_attn.provenance import kernel_source_hash

    kernel_hash = kernel_source_hash() if kernel_hash is None else kernel_hash
    table = ConfigTable(source=source, artifact=art, device=device, triton_version=triton_version)
    entries = art["entries"]
    ignored: dict[str, list[dict]] = {}
    usable = []
    for i, e in enumerate(entries):
        why = _why_not(e, device, triton_version, kernel_hash)
        if why is None:
            usable.append((i, e))
        else:
            ignored.setdefault(why, []).append(e)
    table.ignored = {why: len(es) for why, es in ignored.items()}
    # Entries of other GPUs beside some for this one are a fleet's artifact (tuned on each GPU type, merged): no
    # warning for them alone. Stale entries (Triton, kernel) or none for this GPU warn.
    if set(ignored) - {"device"} or (ignored and not usable):
        n = sum(table.ignored.values())
        _warn_once(art["checksum"], "ignored", (
            f"raytune-attn: {n} of {len(entries)} config(s) in {source} do not apply here and are ignored (default "
            f"configs where no other entry serves a call): "
            + "; ".join(_differences(ignored, device, triton_version, kernel_hash))
        ))
    vendor = device.vendor
    served: set[str] = set()
    for i, e in usable:
        # Entries of one problem under two of Ray's names for this GPU model (two node types, or a node without the
        # resource): the first serves, which in merged artifacts is the newest artifact's.
        if e["problem_key"] in served:
            continue
        served.add(e["problem_key"])
        p = Problem.from_key(e["problem_key"])
        try:
            cfg = check(e["config"], head_dim=p.head_dim, vendor=vendor, dtype=p.dtype, group=p.gqa_group)
        except InvalidConfig as err:  # valid where it was tuned (artifact.load checks that) but not on this device
            raise _artifact.ArtifactError(f"{source}: entries[{i}] ({e['problem_key']}): its config cannot run on "
                                          f"this {vendor} device: {err}") from None
        if e["problem_key"].startswith("paged-"):  # never a dense or varlen call's: looked up by paged_runtime
            table.paged.append((p, cfg))
            continue
        table.exact[_shape_key(p)] = cfg
        table.buckets.setdefault((p.head_dim, p.gqa_group, p.causal, p.dtype), []).append((p, cfg))
    return table


def load_configs(path_or_uri: str | os.PathLike | None = None, *, device_info: Any = None) -> ConfigTable:
    """Load a best-configs artifact (path, `file://`, `runs:/`, `models:/` URI; default: $RAYTUNE_ATTN_CONFIGS)
    and make it the active table for `attention`/`varlen_attention` calls without an explicit config."""
    global _table, _env_checked
    if path_or_uri is None:
        path_or_uri = os.environ.get(ENV_VAR)
        if not path_or_uri:
            raise ValueError(f"load_configs: no path given and ${ENV_VAR} is not set")
    # An MLflow URI's files are downloaded, read and removed: the table keeps the artifact, the source names the URI.
    with tempfile.TemporaryDirectory(prefix="raytune-attn-configs-") as scratch:
        paths = _resolve(path_or_uri, scratch)
        art = _artifact.merge([(str(p), _artifact.load(p)) for p in paths])
    shown = [_shown(os.fspath(path_or_uri), p, scratch) for p in paths]
    source = shown[0] if len(paths) == 1 else f"{len(paths)} artifacts merged ({', '.join(shown)})"
    if device_info is None:
        from raytune_attn.device import detect

        device_info = detect()
    import triton

    table = index(art, device_info, triton.__version__, source=source)
    with _lock:
        _table = table
        _env_checked = True
        _cache.clear()
    return table


def clear_configs() -> None:
    """Forget the active table (and re-read $RAYTUNE_ATTN_CONFIGS on the next lookup)."""
    global _table, _env_checked
    with _lock:
        _table = None
        _env_checked = False
        _cache.clear()


def active_configs() -> ConfigTable | None:
    return _table


def _nearest(table: ConfigTable, key: tuple) -> tuple[Problem, dict] | None:
    batch, hq, hkv, sq, sk, d, causal, dtype, varlen = key
    cands = table.buckets.get((d, hq // hkv if hkv else 0, causal, dtype))
    if not cands:
        return None

    def dist(item):
        p, _ = item
        seq = abs(math.log2(max(sq, 1) / p.seqlen_q)) + abs(math.log2(max(sk, 1) / p.seqlen_k))
        size = abs(math.log2(max(batch * hq, 1) / (p.batch * p.hq)))
        return (p.varlen != varlen, round(seq, 9), round(size, 9), p.key)

    return min(cands, key=dist)


def lookup(*, batch: int, hq: int, hkv: int, seqlen_q: int, seqlen_k: int, head_dim: int, causal: bool,
           dtype: str, varlen: bool = False) -> tuple[dict, str]:
    """The config for a call and how it was chosen: "exact:<key>", "nearest:<key>" or "default"."""
    global _env_checked
    dtype = str(dtype).removeprefix("torch.")
    if _table is None and not _env_checked:
        _env_checked = True
        if os.environ.get(ENV_VAR):
            try:
                load_configs(os.environ[ENV_VAR])
            except Exception:
                _env_checked = False  # a bad $RAYTUNE_ATTN_CONFIGS keeps raising, call after call
                raise
    key = (batch, hq, hkv, seqlen_q, seqlen_k, head_dim, bool(causal), dtype, bool(varlen))
    table = _table
    if table is not None:
        cfg = table.exact.get(key)
        if cfg is not None:
            return cfg, "exact:" + Problem(*key).key
        near = _nearest(table, key)
        if near is not None:
            return near[1], "nearest:" + near[0].key
    return default_config(head_dim), "default"


def select_config(*, batch: int, hq: int, hkv: int, seqlen_q: int, seqlen_k: int, head_dim: int, causal: bool,
                  dtype: str, varlen: bool = False) -> dict:
    """The complete config for a call (see the module docstring for the order). Memoised per call shape."""
    key = (batch, hq, hkv, seqlen_q, seqlen_k, head_dim, causal, dtype, varlen)
    cfg = _cache.get(key)
    if cfg is not None:
        return cfg
    cfg, _ = lookup(batch=batch, hq=hq, hkv=hkv, seqlen_q=seqlen_q, seqlen_k=seqlen_k, head_dim=head_dim,
                    causal=causal, dtype=dtype, varlen=varlen)
    if len(_cache) >= _CACHE_MAX:
        _cache.clear()
    _cache[key] = cfg
    return cfg
