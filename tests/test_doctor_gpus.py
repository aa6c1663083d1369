"""`raytune-attn doctor`'s GPU lines: each device torch sees, by name, vendor, arch and GPU model, and a device that
cannot be read is a finding, not a failure. The devices are given to it here (no GPU on CI)."""

import torch

from raytune_attn import device
from raytune_attn.tune import doctor


def _gpu_lines(monkeypatch, names):
    def detect(i):
        name = names[i]
        if name is None:
            raise RuntimeError("hipErrorNoDevice")
        return device.DeviceInfo("amd", "gfx942", name, device.gpu_model(name), "6.4.1", "")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(names))
    monkeypatch.setattr(device, "detect", detect)
    info = {"gpus": doctor.gpus(), "versions": doctor.versions(),
            "ray": {"address": "auto", "status": "not checked"},
            "mlflow": {"uri": "sqlite:///m.db", "reachable": True, "status": "SQLite store m.db"}}
    return [ln for ln in doctor.format_table(info).splitlines() if ln.startswith(("GPUs", "  gpu"))]


def test_each_device_is_a_line_with_its_model(monkeypatch):
    lines = _gpu_lines(monkeypatch, ["AMD Instinct MI300X", "AMD Instinct MI325X"])
    assert lines[0].split() == ["GPUs", "2", "(amd)"]
    assert lines[1].split(None, 2)[2] == "AMD Instinct MI300X  vendor=amd arch=gfx942 model=MI300X runtime=6.4.1"
    assert lines[2].endswith("model=MI325X runtime=6.4.1")


def test_a_device_that_cannot_be_read_is_named(monkeypatch):
    lines = _gpu_lines(monkeypatch, ["AMD Instinct MI300X", None])
    assert "device 1: hipErrorNoDevice  vendor=? arch=? model=?" in lines[2]
