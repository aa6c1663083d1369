"""The benchmark's varlen SDPA baselines on the CPU: the nested-jagged and padded inputs, the outputs packed back,
checked against the package's reference on tiny varlen problems (GQA and causal included, fp32); and the table.

The tests of CPU float32 tensors (the layouts held to float32's tolerance, the CPU backends' refusals, a CPU
`bench_problem` without baselines) are `interpreter_only`: CI's CPU run covers them; a GPU machine's skips them."""

import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE, interpreter_only

from raytune_attn.problem import Problem
from raytune_attn.tune.measure import bench
from raytune_attn.tune.measure.workload import accept, make_workload, reference, rel_err


def _varlen(hq, hkv, causal, batch=4, s=13, d=16):
    return Problem(batch=batch, hq=hq, hkv=hkv, seqlen_q=s, seqlen_k=s, head_dim=d, causal=causal,
                   dtype="float32", varlen=True)


CASES = [(2, 2, False), (2, 2, True), (4, 2, False), (4, 2, True), (4, 1, True)]


@interpreter_only
@pytest.mark.parametrize("hq,hkv,causal", CASES)
def test_padded_layout_matches_reference(hq, hkv, causal):
    w = make_workload(_varlen(hq, hkv, causal), device="cpu")
    ref = reference(w)
    lens = w.problem.seqlens()
    q, k, v, mask = bench.padded_inputs(w)
    b, s = len(lens), 16  # longest 13, rounded up to 16
    assert q.shape == (b, hq, s, 16) and k.shape == (b, hkv, s, 16) and mask.shape == (b, 1, s, s)
    assert mask.dtype == q.dtype
    for i, n in enumerate(lens):  # padded keys are never seen; causal hides the future
        assert torch.isinf(mask[i, 0, :, n:]).all()
        assert (mask[i, 0, n - 1, :n] == 0).all()
        assert bool(torch.isinf(mask[i, 0, 0, 1:n]).all()) == (causal and n > 1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=hq != hkv)
    packed = bench.unpad_output(out, w)
    assert packed.shape == ref.shape
    ok, err = accept(packed, ref)
    assert ok and err < 1e-5
    qe, ke, ve, mask_e = bench.padded_inputs(w, expand=True)  # the fallback for backends without enable_gqa
    assert ke.shape[1] == hq and torch.equal(mask_e, mask)
    assert accept(bench.unpad_output(F.scaled_dot_product_attention(qe, ke, ve, attn_mask=mask_e), w), ref)[0]


@interpreter_only
@pytest.mark.parametrize("hq,hkv,causal", CASES)
def test_njt_layout_matches_reference(hq, hkv, causal):
    w = make_workload(_varlen(hq, hkv, causal), device="cpu")
    ref = reference(w)
    q, k, v = bench.njt_inputs(w)
    lens = w.problem.seqlens()
    assert q.is_nested and q.shape[0] == len(lens) and q.shape[1] == hq and k.shape[1] == hq  # K/V expanded
    assert torch.equal(bench.njt_output(q), w.q)  # packing back is exact
    cu = w.cu_seqlens.tolist()
    for i, (qi, ki) in enumerate(zip(q.unbind(), k.unbind(), strict=True)):  # sequence i, heads in GQA order
        assert torch.equal(qi, w.q[cu[i]:cu[i + 1]].transpose(0, 1))
        assert torch.equal(ki, w.k[cu[i]:cu[i + 1]].repeat_interleave(hq // hkv, 1).transpose(0, 1))
    if not causal:  # the CPU's math backend runs non-causal NJT SDPA (the GPU's fused kernels run both)
        out = F.scaled_dot_product_attention(q, k, v)
        assert out.is_nested
    else:  # the math backend refuses causal NJTs: attend per sequence and nest the outputs the same way
        outs = [F.scaled_dot_product_attention(qi, ki, vi, is_causal=True).transpose(0, 1)
                for qi, ki, vi in zip(q.unbind(), k.unbind(), v.unbind(), strict=True)]
        out = torch.nested.nested_tensor_from_jagged(torch.cat(outs), w.cu_seqlens.long()).transpose(1, 2)
    packed = bench.njt_output(out)
    assert packed.shape == ref.shape
    ok, err = accept(packed, ref)
    assert ok and err < 1e-5


@interpreter_only
def test_varlen_candidates_names_and_notes():
    w = make_workload(_varlen(4, 2, True), device="cpu")
    ref = reference(w)
    cands = list(bench._varlen_candidates(w, bench.SDPA_BACKENDS))
    names = [c[0] for c in cands]
    assert names == ["sdpa-flash-njt", "sdpa-cudnn-njt", "sdpa-efficient-njt", "sdpa-cudnn-padded",
                     "sdpa-efficient-padded"]
    assert all("repeated 2x" in note for name, _, _, note in cands if name.endswith("-njt"))
    for _name, fn, to_packed, _note in cands:  # on the CPU these backends refuse; a refusal is a RuntimeError
        try:
            out = fn()
        except RuntimeError:
            continue
        assert rel_err(to_packed(out), ref) < 1e-5
    assert [c[0] for c in bench._varlen_candidates(w, ("flash",))] == ["sdpa-flash-njt"]  # flash takes no mask


@interpreter_only
def test_bench_problem_varlen_on_cpu_times_the_kernel_only():
    p = Problem(batch=2, hq=2, hkv=1, seqlen_q=20, seqlen_k=20, head_dim=32, causal=True, dtype="float32",
                varlen=True)
    rows = bench.bench_problem(p, [{"BLOCK_M": 16, "BLOCK_N": 16}], rep_ms=1)
    assert [r["impl"] for r in rows] == ["raytune-attn"]  # baselines run on a GPU only
    assert rows[0]["error"] == "" and rows[0]["tflops"] > 0
    assert math.isclose(p.flops(), 4 * 2 * sum(s * s for s in p.seqlens()) * 32 / 2)


def _row(key, impl, tf, **kw):
    p = Problem.from_key(key)
    return {"B": p.batch, "H": p.hq, "S": p.seqlen_q, "D": p.head_dim, "causal": p.causal, "problem_key": key,
            "impl": impl, "tflops": tf, **kw}


def test_markdown_table_names_the_fastest_varlen_layout():
    dense = "dense-b4-hq16-hkv16-sq4096-sk4096-d128-causal-bfloat16"
    varlen = "varlen-b8-hq32-hkv8-sq1024-sk1024-d128-causal-bfloat16"
    df = pd.DataFrame([
        _row(dense, "sdpa-flash", 400.0), _row(dense, "sdpa-cudnn", 500.0), _row(dense, "sdpa-efficient", 200.0),
        _row(dense, "raytune-attn", 450.0), _row(dense, "raytune-attn", 300.0),
        _row(varlen, "sdpa-flash-njt", 300.0), _row(varlen, "sdpa-cudnn-njt", float("nan")),
        _row(varlen, "sdpa-efficient-njt", 100.0), _row(varlen, "sdpa-cudnn-padded", 150.0),
        _row(varlen, "sdpa-efficient-padded", 120.0), _row(varlen, "raytune-attn", 330.0),
    ])
    lines = bench.markdown_table(df).splitlines()
    assert lines[0] == ("| D | S | B | H | causal | raytune-attn | sdpa-flash | sdpa-cudnn | sdpa-efficient "
                        "| x sdpa-flash | x sdpa-cudnn | x sdpa-efficient |")
    assert lines[2] == "| 128 | 4096 | 4 | 16 | True | 450.0 | 400.0 | 500.0 | 200.0 | 1.12 | 0.90 | 2.25 |"
    assert lines[3] == ("| 128 | 1024 | 8 | 32 | True | 330.0 | 300.0 (njt) | 150.0 (padded) | 120.0 (padded) "
                        "| 1.10 | 2.20 | 2.75 |")
    assert any("faster of its layouts" in line for line in lines)
    dense_only = bench.markdown_table(df[df.problem_key == dense])  # dense tables as before: no varlen note
    assert "layouts" not in dense_only and dense_only.splitlines()[2] == lines[2]
    stacked = pd.concat([df.iloc[:5], df.iloc[5:].set_axis(range(6))])  # frames concatenated: repeated labels
    assert bench.markdown_table(stacked) == bench.markdown_table(df)


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter is the fallback of a machine without a GPU")
def test_bench_command_runs_the_interpreter_without_a_gpu_by_itself(tmp_path):
    """`raytune-attn bench` with no TRITON_INTERPRET in its environment, as a user types it on a CPU machine: it turns
    the interpreter on as the sweep's actors do, and times the tiny grid."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = tmp_path / "bench.parquet"
    p = subprocess.run([sys.executable, "-m", "raytune_attn", "bench", "--causal", "causal", "--rep-ms", "1",
                        "--out", str(tmp_path)], env=env, capture_output=True, text=True, timeout=300)  # a directory
    assert p.returncode == 0, p.stderr[-2000:]
    assert out.with_suffix(".md").read_text().startswith("|")
    df = pd.read_parquet(out)
    want = [q for q in bench.tiny_grid() if q.causal]
    assert sorted(df["S"]) == sorted(q.seqlen_q for q in want) and (df["tflops"] > 0).all()
    assert "Triton interpreter" in p.stdout


def test_bench_cells_are_the_standard_grids_or_a_refusal_naming_the_flag():
    from raytune_attn.tune.cli import UsageError, _bench_cells

    cells = _bench_cells("auto", [128], [4096, 8192], "float16", (True,), interpreting=False)
    assert [(c.batch, c.hq, c.seqlen_q, c.head_dim, c.causal, c.dtype) for c in cells] == [
        (4, 16, 4096, 128, True, "float16"), (2, 16, 8192, 128, True, "float16")]
    whole = _bench_cells("standard", None, None, None, (False, True), interpreting=False)
    assert all(c.batch * c.seqlen_q == bench.GRID_TOKENS and c.hq * c.head_dim == bench.GRID_WIDTH for c in whole)
    assert whole == bench.standard_grid() and len(whole) == 24  # no flag: the grid's own defaults
    assert _bench_cells("auto", None, None, None, (False,), interpreting=True) == [
        q for q in bench.tiny_grid() if not q.causal]
    refused = [
        (("standard", [96], None, None), "--head-dim 96: the standard grid keeps H\\*D = 2048"),
        (("standard", None, [3000], None), "--seqlen 3000: the standard grid keeps B\\*S = 16384"),
        (("standard", None, [0], None), "--seqlen 0"),
        (("standard", None, None, "float32"), "--dtype must be float16 or bfloat16"),
        (("tiny", [64], None, "bfloat16"), "--head-dim, --dtype: only with --grid standard"),
    ]
    for (grid, dims, lens, dtype), match in refused:
        with pytest.raises(UsageError, match=match):
            _bench_cells(grid, dims, lens, dtype, (False,), interpreting=False)
    with pytest.raises(UsageError, match="--grid standard needs a GPU"):
        _bench_cells("standard", None, None, None, (False,), interpreting=True)


@interpreter_only
def test_bench_problem_paged_on_cpu_times_the_paged_kernel():
    from raytune_attn.problem import Problem as P

    p = P.from_key("paged-n1q5k30+n2q1k17~40-bs16-hq2-hkv1-d16-float32-seed0")
    rows = bench.bench_problem(p, [{"NUM_SEGMENTS": 2, "BLOCK_N": 16}], rep_ms=1)
    assert [r["impl"] for r in rows] == ["raytune-attn"]  # sdpa-gathered runs on a GPU only
    assert rows[0]["error"] == "" and rows[0]["tflops"] > 0 and rows[0]["problem_key"] == p.key
    pairs = sum(q * k - q * (q - 1) // 2 for q, k in p.lengths())  # visible (query, key) pairs, bottom-right
    assert math.isclose(p.flops(), 4 * 2 * 16 * pairs)


def test_sdpa_over_gathered_kv_matches_the_reference():
    from raytune_attn.problem import Problem as P
    from raytune_attn.tune.measure.paged_workload import sdpa_gathered
    from raytune_attn.tune.measure.workload import accept, make_workload, reference

    dtype = "float32" if DEVICE == "cpu" else "bfloat16"  # float32 is the interpreter's; a GPU's sweeps run bf16
    w = make_workload(P.from_key(f"paged-n1q5k30+n2q1k17~40-bs16-hq4-hkv2-d16-{dtype}-seed0"), device=DEVICE)
    fn, packed = sdpa_gathered(w)
    assert accept(packed(fn()), reference(w))[0]
