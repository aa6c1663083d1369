import hashlib

import torch
import triton

from raytune_attn import provenance
from raytune_attn.device import DeviceInfo


def test_collect_on_this_machine_has_every_key_as_strings():
    p = provenance.collect()
    assert tuple(p) == provenance.PROVENANCE_KEYS
    assert all(isinstance(v, str) for v in p.values())
    assert p["triton_version"] == triton.__version__
    assert p["torch_version"] == torch.__version__
    assert p["raytune_attn_version"]
    assert p["hostname"] and p["timestamp"]
    if not torch.cuda.is_available():
        assert (p["vendor"], p["arch"], p["accelerator_type"], p["gpu"]) == ("cpu", "interpreter", "CPU", "cpu")


def test_kernel_source_hash_is_sha256_of_the_kernel_file():
    want = hashlib.sha256(provenance.KERNEL_SOURCE.read_bytes()).hexdigest()
    assert provenance.kernel_source_hash() == want
    assert provenance.collect()["kernel_source_hash"] == want


def test_kernel_source_hash_of_missing_file_is_empty(tmp_path):
    assert provenance.kernel_source_hash(tmp_path / "nope.py") == ""


def test_collect_from_a_reported_device_info():
    nv = DeviceInfo("nvidia", "sm90", "NVIDIA H100 80GB HBM3", "H100", "12.4", "550.54")
    p = provenance.collect(nv)
    assert (p["gpu"], p["arch"], p["accelerator_type"], p["driver"]) == ("NVIDIA H100 80GB HBM3", "sm90", "H100",
                                                                         "550.54")
    assert (p["cuda_version"], p["rocm_version"]) == ("12.4", "")
    amd = DeviceInfo("amd", "gfx942", "AMD Instinct MI300X", "MI300X", "6.2.41133", "")
    p = provenance.collect(amd.to_dict())  # a dict, as a Ray worker sends it back
    assert (p["cuda_version"], p["rocm_version"], p["vendor"]) == ("", "6.2.41133", "amd")
