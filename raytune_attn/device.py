"""Which accelerator a process runs on: vendor, architecture and name, read from torch on the worker itself."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class DeviceInfo:
    vendor: str  # "nvidia", "amd" or "cpu" (Triton interpreter)
    arch: str  # "sm90", "gfx942", ... or "interpreter"
    name: str  # "NVIDIA H100 80GB HBM3", ...
    accelerator_type: str  # Ray's accelerator_type resource name, e.g. "H100", "AMD-Instinct-MI300X-OAM"
    runtime_version: str  # CUDA or ROCm version; "" on CPU
    driver: str

    def to_dict(self) -> dict:
        return asdict(self)


def interpreter_enabled() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def detect(device: int | torch.device | None = None) -> DeviceInfo:
    """Describe the given (or current) device; without a GPU, the Triton interpreter on the CPU."""
    if not torch.cuda.is_available():
        return DeviceInfo("cpu", "interpreter", "cpu", "CPU", "", "")
    props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
    if torch.version.hip:
        arch = props.gcnArchName.split(":")[0]
        return DeviceInfo("amd", arch, props.name, _ray_accelerator_type(props.name), torch.version.hip, _driver())
    arch = f"sm{props.major}{props.minor}"
    accel = _ray_accelerator_type(props.name)
    return DeviceInfo("nvidia", arch, props.name, accel, torch.version.cuda or "", _driver())


def _ray_accelerator_type(name: str) -> str:
    """Ray's `accelerator_type:<X>` naming: the model token of the product name (H100, A100, L4, MI300X...).

    Mirrors what Ray's accelerator managers report, without importing Ray into the runtime.
    """
    tokens = name.replace("NVIDIA", "").replace("AMD", "").replace("Instinct", "").split()
    for t in tokens:
        if any(c.isdigit() for c in t) and t[0].isalpha():
            return t.split("-")[0]
    return tokens[0] if tokens else "unknown"


def _driver() -> str:
    try:
        import pynvml  # optional: present with nvidia-ml-py

        pynvml.nvmlInit()
        return pynvml.nvmlSystemGetDriverVersion()
    except Exception:  # no NVML (AMD, CPU, or package absent): the driver is simply unknown
        return ""
