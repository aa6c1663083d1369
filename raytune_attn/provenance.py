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
def _software() -> dict[str, str]:
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


def collect(device_info: Any = None) -> dict[str, str]:
    """Provenance of the current process (or of `device_info`, a `device.DeviceInfo` or its dict, e.g. the
    one a Ray worker reported back to the driver)."""
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
        **_software(),
        "kernel_source_hash": kernel_source_hash(),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    return {k: str(out.get(k, "")) for k in PROVENANCE_KEYS}
