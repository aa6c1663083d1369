"""The bytes a problem's benchmark needs, counted before anything is allocated, and the problem-set check."""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICE

from raytune_attn import footprint
from raytune_attn.footprint import ProblemTooLarge
from raytune_attn.problem import Problem
from raytune_attn.tune.measure.bench import expand_kv, padded_inputs
from raytune_attn.tune.measure.workload import make_workload, reference
from raytune_attn.tune.sweep.problems import ProblemSetError, parse_problems

DENSE = Problem(2, 4, 2, 24, 40, 32, True, "bfloat16")
VARLEN = Problem(5, 4, 2, 40, 40, 32, False, "float16", varlen=True)


def _parts(p, **kw):
    return dict(footprint.footprint(p, **kw).parts)


@pytest.mark.parametrize("p", [DENSE, VARLEN])
def test_inputs_outputs_and_reference_match_the_tensors_a_benchmark_builds(p):
    w = make_workload(p, device=DEVICE)  # byte counts: the same on any device
    parts = _parts(p)
    assert parts["q"] == w.q.nbytes
    assert parts["k+v"] == w.k.nbytes + w.v.nbytes
    assert parts["outputs"] == 2 * w.q.nbytes  # the timed output and the NaN-filled check output
    assert parts["lse"] == w.q[..., 0].numel() * 4
    ref = reference(w)
    assert parts["reference"] == sum(t.float().nbytes for t in (w.q, w.k, w.v)) + ref.nbytes
    if p.varlen:
        assert parts["cu_seqlens"] == w.cu_seqlens.nbytes
    else:  # causal with Sq != Sk: the reference's explicit bottom-right mask, and the float32 form SDPA adds
        mask = torch.ones(p.seqlen_q, p.seqlen_k, dtype=torch.bool)
        assert parts["reference mask"] == mask.nbytes + mask.float().nbytes


def test_on_cpu_the_masked_reference_holds_the_score_matrix_and_no_baseline_runs():
    w = make_workload(DENSE, device=DEVICE)  # its tensors' sizes only
    scores = w.q.float() @ w.k.float().repeat_interleave(2, dim=1).transpose(-1, -2)
    parts = _parts(DENSE, device="cpu")
    assert parts["reference scores"] == scores.nbytes and "baseline workspace" not in parts
    gpu = _parts(DENSE)
    assert gpu["baseline workspace"] == 0 and "reference scores" not in gpu  # GPU backends work in tiles
    assert "baseline workspace" not in _parts(DENSE, baselines=False)
    same = Problem(2, 4, 2, 40, 40, 32, True, "bfloat16")  # Sq == Sk: SDPA's is_causal, no mask, no scores held
    assert not {"reference mask", "reference scores"} & set(_parts(same, device="cpu"))


def test_varlen_baseline_workspace_is_the_larger_sdpa_layout():
    w = make_workload(VARLEN, device=DEVICE)
    q, k, v, mask = padded_inputs(w, expand=False)
    padded = sum(t.nbytes for t in (q, k, v, mask))
    njt = 2 * expand_kv(w.k, VARLEN.hq, 1).nbytes
    assert _parts(VARLEN)["baseline workspace"] == max(padded, njt)


def test_total_is_the_sum_and_a_problem_under_the_cap_passes():
    fp = footprint.check(DENSE)
    assert fp.total == sum(b for _, b in fp.parts)
    assert footprint.check(DENSE, limit=fp.total) == fp
    with pytest.raises(ProblemTooLarge, match=rf"{DENSE.key}: needs {fp.total} bytes = .* more than the cap of "
                                              rf"{fp.total - 1} bytes"):
        footprint.check(DENSE, limit=fp.total - 1)


@pytest.mark.parametrize(("p", "words"), [
    (Problem(1, 32, 8, 10**6, 10**6, 128, True), "more than the cap of 68719476736 bytes (64.0 GiB"),
    (Problem(1, 2, 1, 10**7, 10**7, 32, True, "float32"), "= 10000000 tokens, more than 4194304"),
    (Problem(10**5, 32, 8, 10**12, 10**12, 128, True), "100000 x seqlen_q 1000000000000"),
    (Problem(10**6, 32, 8, 4096, 4096, 128, True, varlen=True), "tokens, more than"),  # refused before any draw
])
def test_impossible_problems_are_refused_naming_problem_and_size(p, words):
    with pytest.raises(ProblemTooLarge) as e:
        footprint.check(p)
    assert str(e.value).startswith(f"{p.key}: ") and words in str(e.value)


def test_cap_from_the_environment(monkeypatch):
    need = footprint.footprint(DENSE).total
    monkeypatch.setenv(footprint.ENV_VAR, str(need - 1))
    assert footprint.max_bytes() == need - 1
    with pytest.raises(ProblemTooLarge, match=footprint.ENV_VAR):
        footprint.check(DENSE)
    for bad in ("0", "-5", "64G"):
        monkeypatch.setenv(footprint.ENV_VAR, bad)
        with pytest.raises(ValueError, match=f"must be a positive number of bytes, got '{bad}'"):
            footprint.max_bytes()
    monkeypatch.delenv(footprint.ENV_VAR)
    assert footprint.max_bytes() == footprint.DEFAULT_MAX_BYTES == 64 << 30


def test_problem_sets_refuse_a_problem_too_large_naming_the_entry():
    doc = {"schema_version": 1, "defaults": {"hq": 32, "hkv": 8, "head_dim": 128, "causal": True},
           "problems": [{"batch": 1, "seqlen": 4096}, {"batch": 1, "seqlen": 10**7}]}
    with pytest.raises(ProblemSetError) as e:
        parse_problems(doc, source="big.yaml")
    key = Problem(1, 32, 8, 10**7, 10**7, 128, True).key
    assert str(e.value).startswith(f"big.yaml: problems[1]: {key}: batch 1 x seqlen_q 10000000")
    doc["problems"][1] = {"batch": 64, "seqlen": 65536}
    with pytest.raises(ProblemSetError, match=r"big.yaml: problems\[1\]: .*: needs \d+ bytes"):
        parse_problems(doc, source="big.yaml")
    doc["problems"].pop()
    assert len(parse_problems(doc, source="big.yaml")) == 1
