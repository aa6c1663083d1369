"""The cross-compiler: configs of a space compiled for GPUs this machine does not have (real compiles, on CPU)."""

from __future__ import annotations

import pandas as pd
import pytest

from raytune_attn import validation
from raytune_attn.config import InvalidConfig, validate_config
from raytune_attn.kernels.resources import ARCHS, smem_lower_bound
from raytune_attn.problem import Problem
from raytune_attn.tune.measure import cross_compile as cc
from raytune_attn.tune.search.space import parse_space

SMALL = Problem(batch=2, hq=4, hkv=2, seqlen_q=128, seqlen_k=128, head_dim=64, causal=True)


def _space(vendor: str, arch: str, parameters: dict, constraints=()):
    return parse_space({"schema_version": 1, "vendor": vendor, "arch": arch, "parameters": parameters,
                        "constraints": list(constraints)}, source=f"test-{arch}")


def test_bad_target_space_problems_and_sample_are_one_line_errors(tmp_path, capsys):
    with pytest.raises(cc.CrossCompileError, match="unknown target 'hip:gfx1100'.*hip:gfx942"):
        cc.parse_target("hip:gfx1100")
    bad_problems = tmp_path / "p.yaml"
    bad_problems.write_text("schema_version: 1\nproblems: [{batch: 0}]\n")
    cases = [(("amd/gfx942", "rocm:942"), {}), ((str(tmp_path / "none.yaml"), "cuda:90"), {}),
             (("nvidia/sm80", "hip:gfx90a"), {}), (("nvidia/sm80", "cuda:80"), {"sample": 0}),
             (("nvidia/sm80", "cuda:80"), {"problems": str(bad_problems)}),
             (("nvidia/sm80", "cuda:80"), {"out": str(tmp_path / "no" / "x.parquet")}),
             (("nvidia/sm80", "cuda:80"), {"workers": 0}), (("nvidia/sm80", "cuda:80"), {"timeout_s": 0.0}),
             (("nvidia/sm80", "cuda:80"), {"seed": -1})]
    for args, kw in cases:
        assert cc.space_compile_main(*args, **kw) == 2
        err = capsys.readouterr().err
        assert err.startswith("raytune-attn: error: ") and err.count("\n") == 1, err
        flag = {"sample": "--sample", "out": "--out", "workers": "--workers", "timeout_s": "--timeout",
                "seed": "--seed"}.get(next(iter(kw), ""))
        assert flag is None or flag in err, err


def test_refusals_carry_the_validation_reason_and_compile_nothing():
    """A config the knob rules refuse is a 'refused' row with their reason; one the validation refuses on the
    target's architecture alone (shared memory) is still compiled, its reason beside it."""
    refused = {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 3, "WARP_SPECIALIZE": True}
    too_big = {"BLOCK_M": 256, "BLOCK_N": 256, "num_warps": 8, "num_stages": 4}
    with pytest.raises(InvalidConfig) as knob_rule:
        validate_config(refused, head_dim=SMALL.head_dim, vendor="nvidia")
    with pytest.raises(InvalidConfig) as smem:
        validation.check(too_big, head_dim=SMALL.head_dim, arch="sm90", dtype=SMALL.dtype)
    jobs = cc.plan_jobs([refused, too_big], [SMALL], cc.parse_target("cuda:90"))
    assert [(j.refused, j.prefilter_reason) for j in jobs] == [(str(knob_rule.value), None), (None, str(smem.value))]
    full = validate_config(too_big, head_dim=SMALL.head_dim, vendor="nvidia")
    assert jobs[1].estimate == validation.shared_memory_need(full, "sm90", head_dim=SMALL.head_dim)
    assert jobs[1].full_config == full and jobs[0].full_config is None


def test_sample_is_seeded_and_in_space_order():
    space = _space("amd", "gfx942", {"BLOCK_M": [16, 32, 64, 128], "BLOCK_N": [16, 32], "kpack": [1, 2]})
    every = space.configs()
    a, b = cc.select_configs(space, 5, seed=3), cc.select_configs(space, 5, seed=3)
    assert a == b and len(a) == 5 and a == [c for c in every if c in a]
    assert cc.select_configs(space, 100) == every


@pytest.mark.slow
def test_compiles_for_both_amd_targets():
    """Real compiles for gfx942 and gfx90a: the rows carry the binary's LDS, VGPRs and SGPRs, and the pre-filter's
    estimate never exceeds the LDS the compiler allotted."""
    space = _space("amd", "gfx942", {"BLOCK_M": [32], "BLOCK_N": [16, 32], "num_warps": [2], "num_stages": [1],
                                     "waves_per_eu": [0], "matrix_instr_nonkdim": [16, 32], "kpack": [1, 2]},
                   ["(BLOCK_N, matrix_instr_nonkdim, kpack) in ((16, 16, 1), (32, 32, 2))"])
    for target in ("hip:gfx942", "hip:gfx90a"):
        rows = cc.cross_compile(space, target, [SMALL], workers=2)
        assert [r["status"] for r in rows] == ["compiled"] * 2, [r["message"] for r in rows]
        for r in rows:
            assert r["shared_bytes"] > 0 and r["registers"] > 0 and r["sgprs"] > 0
            assert r["smem_estimate"] <= r["shared_bytes"] and not r["unexpected"]


@pytest.mark.slow
def test_space_compile_for_sm90_writes_rows_and_reports_shared_memory_overflow(tmp_path, capsys):
    """cuda:90: a small config compiles (registers from the cubin); a 64x64 tile at 8 stages and head dim 128
    needs more shared memory than the 227 KB an H100 block has: a 'failed' row with Triton's out-of-resource
    message, which the pre-filter rejects too, so the command still succeeds."""
    space = tmp_path / "sm90.yaml"
    space.write_text("schema_version: 1\nvendor: nvidia\narch: sm90\nparameters:\n  BLOCK_M: [32, 64]\n"
                     "  BLOCK_N: [16, 64]\n  num_warps: [2, 4]\n  num_stages: [1, 8]\nconstraints:\n"
                     "  - (BLOCK_M, BLOCK_N, num_warps, num_stages) in ((32, 16, 2, 1), (64, 64, 4, 8))\n")
    problems = tmp_path / "p.yaml"
    problems.write_text("schema_version: 1\nproblems:\n  - {batch: 2, hq: 4, hkv: 4, seqlen: 128, head_dim: 128, "
                        "causal: false, dtype: bfloat16}\n")
    out = tmp_path / "rows.parquet"
    assert cc.space_compile_main(str(space), "cuda:90", problems=str(problems), out=str(out), workers=2) == 0
    table = capsys.readouterr().out
    rows = pd.read_parquet(out)
    small, big = rows.iloc[0], rows.iloc[1]
    assert small["status"] == "compiled" and small["registers"] > 0 and not small["prefilter_rejects"]
    assert big["status"] == "failed" and big["prefilter_rejects"]
    limit = ARCHS["sm90"].smem_bytes
    assert big["message"] == f"out of resource: shared memory, Required: {big['shared_bytes']}, Hardware limit: {limit}"
    for r in (small, big):
        cfg = validate_config(dict(BLOCK_M=int(r["BLOCK_M"]), BLOCK_N=int(r["BLOCK_N"]), num_warps=int(r["num_warps"]),
                                   num_stages=int(r["num_stages"])), head_dim=128, vendor="nvidia")
        assert r["smem_estimate"] == smem_lower_bound(cfg, ARCHS["sm90"], head_dim=128)
        assert r["smem_estimate"] <= r["shared_bytes"]
    assert "failed x1: out of resource: shared memory" in table and "compiled 1" in table


@pytest.mark.slow
def test_the_paged_kernels_spaces_compile_for_every_vendor(tmp_path, capsys):
    """A paged space's configs compile for AMD and NVIDIA targets on their own default problems (a decode and
    prefill-chunk GQA batch per head dim: the split-KV kernel and its reduce), judged by the paged rules; a
    paged space given dense problems is refused before compiling."""
    paged = _space("amd", "gfx942", {"BLOCK_M": [64], "BLOCK_N": [32], "NUM_SEGMENTS": [1, 4], "num_warps": [4],
                                      "num_stages": [1]})  # fmt: skip
    probs = cc.default_problems(paged=True)
    assert {p.head_dim for p in probs} == set(cc.DEFAULT_HEAD_DIMS) and all(p.kind == "paged" for p in probs)
    rows = cc.cross_compile(paged, "hip:gfx942", probs[:1], workers=1, timeout_s=1800)
    assert [r["status"] for r in rows] == ["compiled", "compiled"] and all(r["shared_bytes"] for r in rows)
    nv = _space("nvidia", "sm90", {"BLOCK_M": [16, 32], "BLOCK_N": [64], "NUM_SEGMENTS": [2], "num_warps": [4],
                                   "num_stages": [2]})  # fmt: skip
    rows = cc.cross_compile(nv, "cuda:90", probs[:1], workers=1, timeout_s=1800)
    assert [r["status"] for r in rows] == ["compiled", "compiled"] and all(r["registers"] for r in rows)
    # A config the paged rules refuse for a problem (a tile shorter than its GQA group) compiles nothing.
    [job] = cc.plan_jobs([{"BLOCK_M": 16, "NUM_SEGMENTS": 2}], [probs[0].__class__.from_fields(
        {"num_seqs": 2, "q_len": 1, "context": 40, "block_size": 16, "hq": 64, "hkv": 2, "head_dim": 64})],
        cc.parse_target("cuda:90"))  # fmt: skip
    assert job.full_config is None and "GQA group" in job.refused
    dense = tmp_path / "dense.yaml"
    dense.write_text("schema_version: 1\nproblems:\n"
                     "  - {batch: 1, hq: 2, hkv: 2, seqlen: 64, head_dim: 64, causal: true}\n")
    assert cc.space_compile_main("nvidia/sm90_paged", "cuda:90", problems=str(dense)) == 2
    assert "paged kernel's" in capsys.readouterr().err
