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


def test_kernel_source_hash_is_sha256_of_every_kernel_module_by_name():
    want = hashlib.sha256()
    for f in sorted(provenance.KERNEL_DIR.glob("*.py")):
        want.update(f"{f.name}\0{f.stat().st_size}\0".encode() + f.read_bytes())
    assert {"flash_attn.py", "tile_parts.py", "causal_band.py", "paged_attn.py"} <= {
        f.name for f in provenance.KERNEL_DIR.glob("*.py")}
    assert provenance.kernel_source_hash() == want.hexdigest()
    assert provenance.collect()["kernel_source_hash"] == want.hexdigest()


def test_kernel_source_hash_changes_with_any_kernel_module_and_its_name(tmp_path):
    """The band kernel or the key loop edited, or code moved between modules, is another kernel source."""
    for f in provenance.KERNEL_DIR.glob("*.py"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    here = provenance.kernel_source_hash(tmp_path)
    assert here == provenance.kernel_source_hash()
    band = tmp_path / "causal_band.py"
    band.write_text(band.read_text() + "\n")
    edited = provenance.kernel_source_hash(tmp_path)
    assert edited != here
    band.rename(tmp_path / "causal_band2.py")
    assert provenance.kernel_source_hash(tmp_path) not in (here, edited)


def test_kernel_source_hash_of_a_folder_without_kernels_is_empty(tmp_path):
    assert provenance.kernel_source_hash(tmp_path) == ""
    assert provenance.kernel_source_hash(tmp_path / "nope") == ""


def test_collect_from_a_reported_device_info():
    nv = DeviceInfo("nvidia", "sm90", "NVIDIA H100 80GB HBM3", "H100", "12.4", "550.54")
    p = provenance.collect(nv)
    assert (p["gpu"], p["arch"], p["accelerator_type"], p["driver"]) == ("NVIDIA H100 80GB HBM3", "sm90", "H100",
                                                                         "550.54")
    assert (p["cuda_version"], p["rocm_version"]) == ("12.4", "")
    amd = DeviceInfo("amd", "gfx942", "AMD Instinct MI300X", "MI300X", "6.2.41133", "")
    p = provenance.collect(amd.to_dict())  # a dict, as a Ray worker sends it back
    assert (p["cuda_version"], p["rocm_version"], p["vendor"]) == ("", "6.2.41133", "amd")
