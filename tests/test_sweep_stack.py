"""The software a sweep's rows record comes from the benchmark actors that measured them, one stack per accelerator
type, and a resume refuses rows measured on another Triton or kernel source (sweep/stack.py)."""

import pytest
from conftest import HAS_GPU

from raytune_attn import provenance
from raytune_attn.tune.sweep.config import SweepUsageError
from raytune_attn.tune.sweep.stack import check_resumed, on_host, type_provenance

H100 = {"vendor": "nvidia", "arch": "sm90", "name": "NVIDIA H100 80GB HBM3", "accelerator_type": "H100",
        "runtime_version": "12.8", "driver": "570.1"}
# Versions no test process runs: the provenance can only have come from the actors' reports.
STACK = {"triton_version": "9.9.9", "torch_version": "9.1.0", "raytune_attn_version": "9.0",
         "kernel_source_hash": "ab" * 32, "python_version": "3.99.0", "hostname": "gpu-a"}


def _actor(host: str, **software) -> dict:
    return {**H100, "node_id": f"node-{host}", "software": {**STACK, "hostname": host, **software}}


def test_a_types_provenance_is_its_actors_stack_not_the_drivers():
    prov = type_provenance("H100", [_actor("gpu-b"), _actor("gpu-a"), _actor("gpu-a")])
    assert {k: prov[k] for k in STACK} == {**STACK, "hostname": "gpu-a,gpu-b"}
    assert (prov["gpu"], prov["arch"], prov["cuda_version"], prov["driver"]) == ("NVIDIA H100 80GB HBM3", "sm90",
                                                                                  "12.8", "570.1")
    assert prov["triton_version"] != provenance.software()["triton_version"]
    assert on_host(prov, "gpu-b")["hostname"] == "gpu-b" and on_host(prov, None) == prov


@pytest.mark.parametrize("key, shown", [("triton_version", "Triton 3.6.0"), ("torch_version", "torch 2.11.0"),
                                        ("kernel_source_hash", "kernel source " + "cd" * 6)])
def test_actors_of_one_type_on_different_software_are_refused_naming_each_host(key, shown):
    other = {"kernel_source_hash": "cd" * 32} if key == "kernel_source_hash" else {key: shown.split()[-1]}
    with pytest.raises(SweepUsageError) as e:
        type_provenance("H100", [_actor("gpu-a"), _actor("gpu-b", **other), _actor("gpu-c")])
    msg = str(e.value)
    assert f"{shown} on gpu-b" in msg and "on gpu-a, gpu-c" in msg and "H100 nodes" in msg


def _rows(n: int, accel: str = "H100", **prov) -> list[dict]:
    return [{"trial_id": f"t{i}", "accelerator_type": accel, **{k: STACK[k] for k in STACK}, **prov}
            for i in range(n)]


def test_a_resume_refuses_rows_of_another_triton_or_kernel_source_naming_them(tmp_path):
    now = {"H100": type_provenance("H100", [_actor("gpu-a")])}
    check_resumed({"H100/p1": _rows(3), "H100/p2": _rows(2)}, now, tmp_path)  # the same stack: resumes
    # A type without actors now: its searches do not run, so its rows are not compared.
    check_resumed({"A100/p1": _rows(2, "A100", triton_version="3.0.0")}, now, tmp_path)
    with pytest.raises(SweepUsageError) as e:
        check_resumed({"H100/p1": _rows(3) + _rows(2, triton_version="3.5.0"), "H100/p2": _rows(1, triton_version="")},
                      now, tmp_path)
    msg = str(e.value)
    assert "3 finished H100 trial(s)" in msg and "2 with Triton 3.5.0" in msg and "1 with no recorded Triton" in msg
    assert "now (Triton 9.9.9)" in msg and f"--warm-start {tmp_path}" in msg
    with pytest.raises(SweepUsageError, match=r"1 finished H100 trial\(s\).*kernel source \(1 with kernel source "
                                              "efefefefefef\\)"):
        check_resumed({"H100/p1": _rows(2) + _rows(1, kernel_source_hash="ef" * 32)}, now, tmp_path)


def test_the_benchmark_actor_reports_the_stack_it_runs_and_the_host_of_each_rung():
    from raytune_attn.problem import Problem
    from raytune_attn.tune.sweep.bench_actor import _Bench

    bench = _Bench("CPU")
    assert bench.info()["software"] == provenance.software()
    # float32 runs only in the interpreter; on a GPU the same tiny problem in float16
    p = Problem.from_key(f"dense-b1-hq2-hkv2-sq32-sk32-d16-full-{'float16' if HAS_GPU else 'float32'}")
    cfg = {"BLOCK_M": 16, "BLOCK_N": 16, "PRE_LOAD_V": False, "num_warps": 4, "num_stages": 1, "SPLIT_MASK": True}
    out = bench.run(p.to_dict(), cfg, 1, 1.0, True)
    assert out["status"] == "ok" and out["host"] == provenance.software()["hostname"]
