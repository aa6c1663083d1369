"""`raytune-attn doctor`: what this machine and its cluster offer a sweep, checked without changing anything.

- GPUs: every device torch sees, with vendor (nvidia/amd), architecture and GPU model (`device.gpu_model`); without
  one, the Triton interpreter on the CPU (and whether TRITON_INTERPRET is set). Ray's `accelerator_type` names are
  in the Ray section's node lines.
- Versions: Python, torch (+ CUDA/ROCm), Triton, Ray, MLflow, raytune-attn.
- Ray: the cluster `--address` names (default `auto`: $RAY_ADDRESS, else the one `ray start` on this machine
  recorded). It never starts a cluster: it resolves the address, opens a TCP connection to the GCS (or asks a
  dashboard's `/api/version` for `http://` addresses) and, when that answers, connects as a driver for the list of
  nodes and their GPU / `accelerator_type:*` resources. "not running" is a finding, not an error.
- MLflow: the tracking URI (`--tracking-uri`, $MLFLOW_TRACKING_URI, else `sqlite:///./mlflow.db`) and whether it
  is reachable (server `/health`, or the SQLite file / its folder); "not installed" where MLflow is missing (a
  sweep needs it unless `--no-mlflow`), which doctor reports instead of failing.
"""

from __future__ import annotations

import json
import math
import os
import platform
import socket
import urllib.error
import urllib.parse
import urllib.request
from importlib import metadata
from pathlib import Path
from typing import Any


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def gpus() -> dict[str, Any]:
    """Devices torch sees (vendor, arch, name, accelerator_type, runtime) or the interpreter fallback."""
    import torch

    from raytune_attn.device import detect, interpreter_enabled

    out: dict[str, Any] = {"count": 0, "devices": [], "interpreter": interpreter_enabled()}
    try:
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception as e:  # a broken driver is a finding
        out["error"] = f"{type(e).__name__}: {e}"
        n = 0
    for i in range(n):
        try:
            d = detect(i).to_dict()
        except Exception as e:
            d = {"vendor": "?", "arch": "?", "name": f"device {i}: {e}", "accelerator_type": "?"}
        out["devices"].append({"index": i, **d})
    out["count"] = n
    vendors = sorted({d["vendor"] for d in out["devices"]})
    out["vendor"] = ",".join(vendors) if vendors else "cpu"
    return out


def versions() -> dict[str, str]:
    import torch

    v = {
        "python": platform.python_version(),
        "raytune-attn": _version("raytune-attn"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "rocm": getattr(torch.version, "hip", None) or "",
        "triton": _version("triton"),
        "ray": _version("ray"),
        "mlflow": _version("mlflow"),
    }
    if v["triton"] == "not installed":
        v["triton"] = _version("pytorch-triton-rocm")
    return v


def _tcp(host: str, port: int, timeout: float) -> str | None:
    """None if a TCP connection opens, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as e:
        return f"{host}:{port} unreachable ({e.strerror or e})"


def _ray_auth_token() -> str | None:
    """Ray's token (token authentication, on by default for new clusters since Ray 2.5x): $RAY_AUTH_TOKEN, else
    the file $RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token, as the `ray` CLI finds it."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return os.environ["RAY_AUTH_TOKEN"].strip()
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _http_get(url: str, timeout: float, headers: dict[str, str] | None = None) -> tuple[int | None, str]:
    try:
        req = urllib.request.Request(url, headers=headers or {})
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 (user-given cluster URL)
            return r.status, r.read(2000).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, str(e)
    except (urllib.error.URLError, OSError, ValueError) as e:
        return None, str(getattr(e, "reason", e))


def _resolve_ray_address(address: str | None) -> str | None:
    """host:port of the GCS for `auto`/None (None: no cluster found), else the address as given."""
    if address in (None, "", "auto"):
        from raytune_attn.tune.ray_private import auto_address

        return auto_address()
    return address


def ray_cluster(address: str | None = "auto", timeout: float = 5.0, connect: bool = True) -> dict[str, Any]:
    """Is a Ray cluster reachable at `address`? Never starts one."""
    out: dict[str, Any] = {"address": address or "auto", "reachable": False}
    try:
        resolved = _resolve_ray_address(address)
    except Exception as e:  # a malformed $RAY_ADDRESS or session file
        out["status"] = f"cannot resolve address: {e}"
        return out
    if resolved is None:
        out["status"] = "not running (no cluster found: start one with `ray start --head`, or pass --address)"
        return out
    out["resolved"] = resolved
    if resolved.startswith(("http://", "https://")):  # a dashboard: the job-submission address
        url = resolved.rstrip("/") + "/api/version"
        code, body = _http_get(url, timeout)
        token = _ray_auth_token() if code in (401, 403) else None
        if token:
            code, body = _http_get(url, timeout, {"Authorization": f"Bearer {token}"})
        if code in (401, 403):
            out.update(reachable=True, status="reachable (dashboard), but it refused this machine's Ray token: "
                                              "see `ray get-auth-token`")
            return out
        if code != 200:
            out["status"] = f"dashboard not reachable at {resolved} ({code or body})"
            return out
        out.update(reachable=True, status="reachable (dashboard)" + (", token authentication" if token else ""))
        try:
            out["ray_version"] = json.loads(body).get("ray_version", "")
        except ValueError:
            pass
        return out
    hostport = resolved.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        out["status"] = f"not a HOST:PORT address: {resolved}"
        return out
    err = _tcp(host.strip("[]"), int(port), timeout)
    if err:
        out["status"] = f"not running ({err})"
        return out
    out.update(reachable=True, status="reachable")
    if connect and not resolved.startswith("ray://"):
        out.update(_ray_nodes(resolved))
    return out


def _ray_nodes(address: str) -> dict[str, Any]:
    """Connect as a driver (no new cluster: an explicit address) and list alive nodes and their GPU resources."""
    import ray

    saved_mode = os.environ.get("RAY_AUTH_MODE")
    if saved_mode is None and _ray_auth_token():
        # As `ray` CLI commands do: a token on this machine means the cluster most likely wants it (Ray >= 2.5x
        # turns token authentication on for clusters started where a token exists).
        from raytune_attn.tune.ray_private import enable_token_auth

        enable_token_auth()
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, include_dashboard=False)
    except Exception as e:
        return {"reachable": False, "status": f"GCS answered but connecting failed: {type(e).__name__}: {e}"}
    finally:
        if saved_mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
    try:
        nodes = []
        for n in ray.nodes():
            if not n.get("Alive"):
                continue
            res = n.get("Resources", {})
            nodes.append({
                "host": n.get("NodeManagerAddress", ""),
                "cpus": res.get("CPU", 0),
                "gpus": res.get("GPU", 0),
                "accelerator_types": sorted(k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:")),
            })
        return {"nodes": nodes, "ray_version": ray.__version__}
    finally:
        ray.shutdown()


def mlflow_tracking(tracking_uri: str | None = None, timeout: float = 5.0) -> dict[str, Any]:
    """The tracking URI the sweep would use and whether it is reachable."""
    from raytune_attn.tune.tracking_uri import check_tracking_uri, mlflow_installed, resolve_tracking_uri, sqlite_file

    uri = resolve_tracking_uri(tracking_uri)
    out: dict[str, Any] = {"uri": uri, "reachable": False}
    if not mlflow_installed():
        out.update(usable=False, status="MLflow is not installed: a sweep logs to it unless --no-mlflow "
                                        "(pip install 'raytune-attn[tune]')")
        return out
    try:
        check_tracking_uri(uri)  # the words `tune` refuses it with
    except ValueError as e:
        out.update(usable=False, status=str(e))
        return out
    scheme = urllib.parse.urlparse(uri).scheme.lower()
    if scheme in ("http", "https"):
        code, body = _http_get(uri.rstrip("/") + "/health", timeout)
        out["reachable"] = code == 200
        out["status"] = "server healthy" if code == 200 else f"server not reachable ({code or body})"
    elif scheme.split("+", 1)[0] == "sqlite":
        db = sqlite_file(uri)
        if db is None:
            out.update(reachable=True, status="SQLite store in memory (gone when the sweep ends)")
        elif db.exists():
            out.update(reachable=True, status=f"SQLite store {db}")
        elif db.parent.is_dir() and os.access(db.parent, os.W_OK):
            out.update(reachable=True, status=f"SQLite store {db} (created on first sweep)")
        else:
            out["status"] = f"SQLite folder {db.parent} missing or not writable"
    elif scheme in ("", "file"):
        d = Path(urllib.parse.urlparse(uri).path if scheme else uri)
        out["reachable"] = d.is_dir() or (d.parent.is_dir() and os.access(d.parent, os.W_OK))
        out["status"] = f"file store {d}" if out["reachable"] else f"file store folder {d} missing"
    elif scheme in ("postgresql", "mysql", "mssql") or "+" in scheme:
        parsed = urllib.parse.urlparse(uri)
        port = parsed.port or {"postgresql": 5432, "mysql": 3306, "mssql": 1433}.get(scheme.split("+")[0], 0)
        err = _tcp(parsed.hostname or "localhost", port, timeout) if port else "no port"
        out.update(reachable=err is None, status="database port open" if err is None else err)
    else:
        out["status"] = f"scheme {scheme!r} not checked"
    return out


def collect(address: str | None = "auto", tracking_uri: str | None = None, timeout: float = 5.0,
            connect: bool = True) -> dict[str, Any]:
    if not 0 < timeout < math.inf:  # NaN too
        raise ValueError(f"--timeout must be a positive, finite number of seconds, got {timeout}")
    return {
        "gpus": gpus(),
        "versions": versions(),
        "ray": ray_cluster(address, timeout=timeout, connect=connect),
        "mlflow": mlflow_tracking(tracking_uri, timeout=timeout),
        "env": {k: os.environ[k] for k in ("TRITON_INTERPRET", "RAY_ADDRESS", "MLFLOW_TRACKING_URI",
                                           "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
                if k in os.environ},
    }


def to_json(info: dict[str, Any]) -> str:
    return json.dumps(info, indent=2, sort_keys=True, default=str)


def format_table(info: dict[str, Any]) -> str:
    """Two columns, `check` and `finding`, grouped by section."""
    rows: list[tuple[str, str]] = []
    g = info["gpus"]
    if g["count"]:
        rows.append(("GPUs", f"{g['count']} ({g['vendor']})"))
        for d in g["devices"]:
            rt = d.get("runtime_version", "")
            finding = f"{d['name']}  vendor={d['vendor']} arch={d['arch']} model={d['accelerator_type']}"
            rows.append((f"  gpu {d['index']}", finding + (f" runtime={rt}" if rt else "")))
    else:
        mode = "TRITON_INTERPRET=1: kernels run in the Triton interpreter" if g["interpreter"] else \
            "set TRITON_INTERPRET=1 to run kernels in the Triton interpreter"
        rows.append(("GPUs", f"none (CPU only; {mode})"))
    if g.get("error"):
        rows.append(("  error", g["error"]))
    v = info["versions"]
    for k in ("python", "raytune-attn", "torch", "triton", "ray", "mlflow"):
        extra = ""
        if k == "torch":
            extra = f" (CUDA {v['cuda']})" if v["cuda"] else f" (ROCm {v['rocm']})" if v["rocm"] else " (CPU)"
        rows.append((k, v[k] + extra))
    r = info["ray"]
    rows.append(("Ray cluster", f"{r['address']} -> {r.get('resolved', '-')}: {r['status']}"))
    for n in r.get("nodes", []):
        acc = ",".join(n["accelerator_types"]) or "-"
        rows.append((f"  node {n['host']}", f"CPU {n['cpus']:g}  GPU {n['gpus']:g}  accelerator_type {acc}"))
    m = info["mlflow"]
    rows.append(("MLflow URI", m["uri"]))
    verdict = "ok: " if m["reachable"] else "NOT REACHABLE: " if m.get("usable", True) else "NOT USABLE: "
    rows.append(("MLflow", verdict + m["status"]))
    for k, val in info.get("env", {}).items():
        rows.append((f"${k}", val))
    w = max(len(a) for a, _ in rows)
    return "\n".join(f"{a.ljust(w)}  {b}" for a, b in rows)
