"""Where a measurement came from: the accelerator, the software stack and the exact kernel source.

`collect()` returns a flat dict of strings. The same keys become Parquet columns (`results.PROVENANCE_COLUMNS`),
MLflow tags on a search's parent run, and the `provenance` block of the best-configs artifact.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import platform
import socket
from functools import lru_cache
from pathlib import Path
from typing import Any

# Every kernel module: a launch reads more than one (flash_attn.py calls tile_parts.py's key loop and causal_band.py's
# band launch; paged entries run paged_attn.py), and a config measured with any of them changed is not known to hold.
KERNEL_DIR = Path(__file__).resolve().parent / "kernels"

# Order matters only for display; every value is a string ("" when unknown).
PROVENANCE_KEYS = (
    "gpu",  # product name, "cpu" under the Triton interpreter
    "vendor",  # nvidia | amd | cpu
    "arch",  # sm90, gfx942, interpreter
    "accelerator_type",  # Ray's accelerator type: H100, A100, MI300X, CPU
    "driver",
    "cuda_version",
    "rocm_version",
    "triton_version",
    "torch_version",
    "raytune_attn_version",
    "kernel_source_hash",  # sha256 of the sources of raytune_attn/kernels/
    "python_version",
    "hostname",
    "timestamp",  # ISO-8601 UTC of the collection
)


def kernel_source_hash(kernel_dir: str | Path | None = None) -> str:
    """sha256 (hex) over the kernel modules (`*.py` of `kernel_dir`, default the installed kernels), each file's
    name and bytes in name order; "" if there are none."""
    files = sorted(Path(kernel_dir if kernel_dir is not None else KERNEL_DIR).glob("*.py"))
    if not files:
        return ""
    h = hashlib.sha256()
    for f in files:
        data = f.read_bytes()
        h.update(f"{f.name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


@lru_cache(maxsize=1)
def _packages() -> dict[str, str]:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except Exception:  # triton missing or broken: record that instead of failing the sweep
        triton_version = ""
    import raytune_attn

    return {
        "triton_version": triton_version,
        "torch_version": torch.__version__,
        "raytune_attn_version": getattr(raytune_attn, "__version__", ""),
        "python_version": platform.python_version(),
        "hostname": socket.gethostname(),
    }


def software() -> dict[str, str]:
    """This process's software stack: the provenance keys that do not describe the device (Triton, torch, this
    package and its kernel source, Python, the host)."""
    return {**_packages(), "kernel_source_hash": kernel_source_hash()}


def collect(device_info: Any = None, stack: dict[str, str] | None = None) -> dict[str, str]:
    """Provenance of the current process, or of `device_info` (a `device.DeviceInfo` or its dict) and `stack` (a
    `software()` dict) that another process reported: a sweep's rows take both from the benchmark actor that
    measured them, not from the driver, which may run another Triton or none."""
    if device_info is None:
        from raytune_attn.device import detect

        device_info = detect()
    d = device_info if isinstance(device_info, dict) else device_info.to_dict()
    vendor = d.get("vendor", "")
    runtime = d.get("runtime_version", "") or ""
    out = {
        "gpu": d.get("name", ""),
        "vendor": vendor,
        "arch": d.get("arch", ""),
        "accelerator_type": d.get("accelerator_type", ""),
        "driver": d.get("driver", "") or "",
        "cuda_version": runtime if vendor == "nvidia" else "",
        "rocm_version": runtime if vendor == "amd" else "",
        **(software() if stack is None else stack),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    return {k: str(out.get(k, "")) for k in PROVENANCE_KEYS}
