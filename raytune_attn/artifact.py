"""The best-configs artifact: a versioned, checksummed JSON file (never pickle) that inference code loads.

Layout (schema_version 1)::

    {
      "schema_version": 1,
      "created": "2025-01-01T00:00:00+00:00",
      "generator": {"raytune_attn_version": "0.1.0"},
      "provenance": {...},            # the provenance keys shared by every entry's measurements ("" where they differ)
      "entries": [
        {"accelerator_type": "H100", "arch": "sm90", "vendor": "nvidia", "gpu": "NVIDIA H100 80GB HBM3",
         "triton_version": "3.4.0", "torch_version": "...", "kernel_source_hash": "...",
         "problem_key": "dense-b4-hq16-hkv16-sq4096-sk4096-d128-causal-bfloat16",
         "problem": {"batch": 4, "hq": 16, ...},
         "config": {"BLOCK_M": 128, ...}, "tflops": 612.3, "latency_ms": 0.9,
         "baseline_tflops": 540.1, "baseline_impl": "sdpa_flash", "n_trials": 64, "trial_id": "..."},
        ...
      ],
      "checksum": "sha256:<hex of the canonical JSON of every other top-level key>"
    }

One entry per (accelerator type, problem key): its winner as `raytune_attn.tune.winners` picks it (this core module
only lays the artifact out, checks and reads it; it never imports the tuner). Canonical JSON is
`json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)` in UTF-8.

An entry may declare `"triton_compatible": ">=3.4,<3.6"` (comparisons of release numbers joined by commas): the
Triton versions it may run on besides its own `triton_version` (`triton_matches`). Several artifacts are merged by
`merge`: per (accelerator type, problem key) the entry of the artifact with the newest `created` wins, equal
`created` the file whose path sorts first.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import operator
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from raytune_attn.problem import Problem
from raytune_attn.validation import InvalidConfig, check

SCHEMA_VERSION = 1
ARTIFACT_FILENAME = "best_configs.json"
# Provenance kept on each entry (what the runtime and a reader need to trust it), and summarised at the top.
ENTRY_PROVENANCE = (
    "gpu", "vendor", "arch", "driver", "cuda_version", "rocm_version", "triton_version", "torch_version",
    "raytune_attn_version", "kernel_source_hash",
)
_TOP_KEYS = {"schema_version", "created", "generator", "provenance", "entries", "checksum"}
_ENTRY_REQUIRED = {
    "accelerator_type": str, "arch": str, "problem_key": str, "config": dict, "tflops": (int, float),
    "n_trials": int,
}


class ArtifactError(ValueError):
    """A corrupt, tampered or wrong-schema artifact; the message names the file and the problem."""


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def checksum(artifact: Mapping[str, Any]) -> str:
    """`sha256:<hex>` of the canonical JSON of every top-level key but `checksum`."""
    body = {k: v for k, v in artifact.items() if k != "checksum"}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def float_or_none(v: Any) -> float | None:
    """A finite-or-infinite float, or None for None, NaN and values that are not numbers."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _str(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def assemble(entries: list[dict[str, Any]], *, provenance: Mapping[str, Any] | None = None,
             created: str | None = None) -> dict[str, Any]:
    """The artifact around its entries (picked by the tuner: `raytune_attn.tune.winners.build_artifact`), with its
    checksum. `provenance` defaults to the keys on which every entry agrees ("" where they differ)."""
    from raytune_attn import __version__

    if provenance is None:
        provenance = {}
        for p in ("accelerator_type", *ENTRY_PROVENANCE):
            vals = {e.get(p, "") for e in entries}
            provenance[p] = vals.pop() if len(vals) == 1 else ""
    art = {
        "schema_version": SCHEMA_VERSION,
        "created": created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "generator": {"raytune_attn_version": __version__},
        "provenance": {k: _str(v) for k, v in dict(provenance).items()},
        "entries": list(entries),
    }
    art["checksum"] = checksum(art)
    return art


def write(artifact: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write the artifact as indented JSON, atomically, after re-checking it (checksum filled if missing)."""
    art = dict(artifact)
    if "checksum" not in art:
        art["checksum"] = checksum(art)
    validate(art, source=str(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps(art, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n")
    os.replace(tmp, path)
    return path


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate an artifact; raise ArtifactError naming the file and the problem."""
    path = Path(path)
    if path.is_dir():
        path = path / ARTIFACT_FILENAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"no best-configs artifact at {path}") from None
    try:
        art = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError, MemoryError) as e:  # bad UTF-8 or JSON, a 5000-digit number, deep nesting
        raise ArtifactError(f"{path}: not a JSON best-configs artifact ({type(e).__name__}: {e})") from None
    validate(art, source=str(path))
    for e in art["entries"]:
        e["config"] = _current(e["config"])
    return art


def _current(config: Mapping[str, Any]) -> dict[str, Any]:
    """An entry's config as this raytune-attn reads it. Older sweeps searched WARP_SPECIALIZE with 8 warps, which
    Triton's Hopper pass leaves as it is (the kernel was the config without it); the knob now needs one warp group,
    TMA and one key loop, so such a config loads with it off: the kernel it measured."""
    if config.get("WARP_SPECIALIZE") and config.get("num_warps") == 8:
        return {**config, "WARP_SPECIALIZE": False}
    return dict(config)


def validate(art: Any, *, source: str = "<artifact>") -> None:
    """Check schema and checksum; every entry's config must pass `validation.check` for its problem and vendor."""
    _validate_top(art, source)
    seen = set()
    for i, e in enumerate(art["entries"]):
        where = f"{source}: entries[{i}]"
        _validate_entry(e, where)
        k = (e["accelerator_type"], e["problem_key"])
        if k in seen:
            raise ArtifactError(f"{where}: duplicate entry for {k}")
        seen.add(k)


def _validate_top(art: Any, source: str) -> None:
    """The artifact's object: schema version, its keys, checksum, the types of entries and provenance, created."""
    if not isinstance(art, dict):
        raise ArtifactError(f"{source}: the artifact must be a JSON object, got {type(art).__name__}")
    if "schema_version" not in art:
        raise ArtifactError(f"{source}: no schema_version: not a raytune-attn best-configs artifact")
    if art["schema_version"] != SCHEMA_VERSION:
        raise ArtifactError(
            f"{source}: schema_version {art['schema_version']!r} is not supported (this raytune-attn reads "
            f"{SCHEMA_VERSION})"
        )
    missing = sorted(_TOP_KEYS - set(art))
    if missing:
        raise ArtifactError(f"{source}: missing key(s) {missing}")
    unknown = sorted(set(art) - _TOP_KEYS)
    if unknown:
        raise ArtifactError(f"{source}: unknown key(s) {unknown}")
    try:
        want = checksum(art)
    except (TypeError, ValueError, RecursionError) as e:
        raise ArtifactError(f"{source}: content cannot be canonicalised ({type(e).__name__}: {e})") from None
    if art["checksum"] != want:
        raise ArtifactError(f"{source}: checksum mismatch (file says {art['checksum']}, content is {want}): "
                            "the file was modified or corrupted")
    if not isinstance(art["entries"], list):
        raise ArtifactError(f"{source}: entries must be a list")
    if not isinstance(art["provenance"], dict):
        raise ArtifactError(f"{source}: provenance must be an object")
    created_at(art, source=source)


def _validate_entry(e: Any, where: str) -> None:
    """One entry: its required fields and their types, its provenance strings, its Triton specifiers, its problem
    key, and its config valid for that problem on its vendor."""
    if not isinstance(e, dict):
        raise ArtifactError(f"{where} must be an object")
    for k, t in _ENTRY_REQUIRED.items():
        if k not in e:
            raise ArtifactError(f"{where}: missing {k!r}")
        if not isinstance(e[k], t) or isinstance(e[k], bool):
            raise ArtifactError(f"{where}: {k!r} has the wrong type ({type(e[k]).__name__})")
    for k in (*ENTRY_PROVENANCE, "triton_compatible"):
        if k in e and not isinstance(e[k], str):
            raise ArtifactError(f"{where}: {k!r} must be a string, got {type(e[k]).__name__}")
    if e.get("triton_compatible"):
        try:
            _specifiers(e["triton_compatible"])
        except ValueError as err:
            raise ArtifactError(f"{where}: triton_compatible: {err}") from None
    try:
        problem = Problem.from_key(e["problem_key"])
    except ValueError as err:
        raise ArtifactError(f"{where}: {err}") from None
    try:
        check(_current(e["config"]), head_dim=problem.head_dim, vendor=e.get("vendor") or "cpu", dtype=problem.dtype,
              group=problem.gqa_group)
    except InvalidConfig as err:
        raise ArtifactError(f"{where} ({e['problem_key']}): invalid config: {err}") from None


def created_at(art: Mapping[str, Any], *, source: str = "<artifact>") -> _dt.datetime:
    """The artifact's `created` time (ISO 8601; without a zone: UTC); ArtifactError if it is not one."""
    try:
        t = _dt.datetime.fromisoformat(art["created"])
    except (TypeError, ValueError):
        raise ArtifactError(f"{source}: created must be an ISO 8601 time, got {art['created']!r}") from None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def merge(loaded: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One artifact of several validated ones, given as (path, artifact): per (accelerator type, problem key) the
    entry of the newest `created` wins, equal `created` the path that sorts first. The result is assembled afresh
    (its own checksum; `created` the newest)."""
    if len(loaded) == 1:
        return loaded[0][1]
    order = sorted(loaded, key=lambda item: (-created_at(item[1], source=item[0]).timestamp(), item[0]))
    entries: dict[tuple, dict] = {}
    for _, art in order:
        for e in art["entries"]:
            entries.setdefault((e["accelerator_type"], e["problem_key"]), e)
    return assemble(list(entries.values()), created=order[0][1]["created"])


_SPEC = re.compile(r"\s*(>=|<=|==|!=|<|>)\s*(\d+(?:\.\d+)*)\s*")
_COMPARE = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, "<": operator.lt,
            ">": operator.gt}


def _release(version: str) -> tuple[int, ...] | None:
    """(3, 4, 0) of "3.4.0", "3.4.0+git1234" or "3.4.0rc1"; None for "" and strings that start with no number."""
    m = re.match(r"\d+(?:\.\d+)*", version.strip())
    return tuple(int(x) for x in m.group().split(".")) if m else None


def _specifiers(spec: str) -> list[tuple[str, tuple[int, ...]]]:
    out = []
    for part in spec.split(","):
        m = _SPEC.fullmatch(part)
        if not m:
            raise ValueError(f"{part.strip()!r} in {spec!r} is not a comparison such as '>=3.4' or '<3.6.1'")
        out.append((m.group(1), tuple(int(x) for x in m.group(2).split("."))))
    return out


def _pad(a: tuple[int, ...], n: int) -> tuple[int, ...]:
    return a + (0,) * (n - len(a))


def triton_matches(entry: Mapping[str, Any], running: str) -> bool:
    """Whether the entry may run on Triton `running`: its `triton_version` is the same full version, or its
    `triton_compatible` range holds `running`. An empty version matches nothing."""
    own = (entry.get("triton_version") or "").strip()
    if own and own == running.strip():
        return True
    here, spec = _release(running), entry.get("triton_compatible") or ""
    if here is None or not spec:
        return False
    return all(_COMPARE[op](_pad(here, len(here) + len(v)), _pad(v, len(here) + len(v))) for op, v in _specifiers(spec))


def tflops_text(v: float) -> str:
    """TFLOP/s as the tables print it: one decimal, or two significant digits below 0.1 (interpreter timings on a
    CPU are some 1e-5 TFLOP/s, which one decimal prints as 0.0)."""
    return f"{v:.1f}" if abs(v) >= 0.1 or v == 0 else f"{v:.2g}"


def summary(art: Mapping[str, Any]) -> str:
    """A short table of the entries, for the CLI."""
    lines = [f"{len(art['entries'])} entr{'y' if len(art['entries']) == 1 else 'ies'}, {art['checksum'][:19]}..."]
    for e in art["entries"]:
        base = e.get("baseline_tflops")
        speed = f"  x{e['tflops'] / base:.2f} vs {e.get('baseline_impl')}" if base else ""
        lines.append(f"  {e['accelerator_type']:<8} {e['problem_key']:<58} {tflops_text(e['tflops']):>9} TFLOP/s "
                     f"({e['n_trials']} trials){speed}")
    return "\n".join(lines)
