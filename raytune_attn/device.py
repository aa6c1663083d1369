"""Which accelerator a process runs on: vendor, architecture and name, read from torch on the worker itself."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class DeviceInfo:
    vendor: str  # "nvidia", "amd" or "cpu" (Triton interpreter)
    arch: str  # "sm90", "gfx942", ... or "interpreter"
    name: str  # "NVIDIA H100 80GB HBM3", ...
    accelerator_type: str  # the model token of `name` (gpu_model): "H100", "MI300X", "CPU" for the interpreter
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
        return DeviceInfo("amd", arch, props.name, gpu_model(props.name), torch.version.hip, _driver())
    arch = f"sm{props.major}{props.minor}"
    accel = gpu_model(props.name)
    return DeviceInfo("nvidia", arch, props.name, accel, torch.version.cuda or "", _driver())


def gpu_model(name: str) -> str:
    """The model token of a device name as torch reports it: "NVIDIA H100 80GB HBM3" -> "H100", "AMD Instinct
    MI300X" -> "MI300X", "NVIDIA GeForce RTX 4090" -> "GeForce-RTX-4090", "cpu" -> "cpu".

    For NVIDIA datacenter GPUs this is Ray's `accelerator_type` name too; Ray names AMD GPUs by PCI id
    ("AMD-Instinct-MI300X-OAM") and some other GPUs differently by version, so the runtime matches an artifact's
    entries by the model of the device name each one recorded (`gpu`), never by Ray's name.
    """
    tokens = name.replace("NVIDIA", "").replace("AMD", "").replace("Instinct", "").split()
    for t in tokens:
        if any(c.isdigit() for c in t) and t[0].isalpha():
            return re.split(r"[-/]", t)[0]  # "A100-SXM4-80GB", "MI250X/MI250"
    for i, t in enumerate(tokens):  # a bare model number ("GeForce RTX 4090"): the words up to it, as Ray does
        if t[0].isdigit():
            return "-".join(tokens[: i + 1])
    return tokens[0] if tokens else "unknown"


def _driver() -> str:
    try:
        import pynvml  # optional: present with nvidia-ml-py

        pynvml.nvmlInit()
        return pynvml.nvmlSystemGetDriverVersion()
    except Exception:  # no NVML (AMD, CPU, or package absent): the driver is simply unknown
        return ""
