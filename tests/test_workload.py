"""Workloads, the float32 reference every measured config is checked against, and its acceptance rule."""

import pytest
import torch
from conftest import DEVICE
from reference import attention_reference, varlen_reference

from raytune_attn.config import InvalidConfig
from raytune_attn.problem import Problem
from raytune_attn.tune.measure.workload import accept, make_workload, reference

# float32 on the CPU (the interpreter); on a GPU the kernel's float32 matmuls run in TF32, so there the kernel's
# outputs are checked in bfloat16, the dtype sweeps run, against the acceptance rule alone.
DTYPE = "float32" if DEVICE == "cpu" else "bfloat16"
CLOSE = 1e-4 if DEVICE == "cpu" else 2e-2
DENSE = Problem(batch=2, hq=4, hkv=2, seqlen_q=40, seqlen_k=56, head_dim=32, causal=True, dtype=DTYPE)
VARLEN = Problem(batch=3, hq=4, hkv=1, seqlen_q=30, seqlen_k=30, head_dim=64, causal=True, dtype=DTYPE, varlen=True)


def test_inputs_are_deterministic_and_not_zero():
    a, b = make_workload(DENSE, DEVICE, seed=1), make_workload(DENSE, DEVICE, seed=1)
    assert torch.equal(a.q, b.q)
    assert a.q.abs().mean() > 0.5  # standard normal: E|x| = 0.8; zeros would hide unwritten outputs
    assert not torch.equal(a.q, make_workload(DENSE, DEVICE, seed=2).q)


def test_reference_matches_float64_dense_and_varlen():
    w = make_workload(DENSE, DEVICE)
    ref64, _ = attention_reference(w.q, w.k, w.v, causal=True)
    assert (reference(w).cpu().double() - ref64).abs().max() < 1e-4
    wv = make_workload(VARLEN, DEVICE)
    assert wv.cu_seqlens[-1].item() == wv.q.shape[0] == sum(VARLEN.seqlens(0))
    ref64, _ = varlen_reference(wv.q, wv.k, wv.v, wv.cu_seqlens, wv.cu_seqlens, causal=True)
    assert (reference(wv).cpu().double() - ref64).abs().max() < 1e-4


def test_kernel_output_accepted_and_wrong_outputs_rejected():
    for problem in (DENSE, VARLEN):
        w = make_workload(problem, DEVICE)
        ref = reference(w)
        out = w.run({"BLOCK_M": 16, "BLOCK_N": 16})
        ok, err = accept(out, ref)
        assert ok and err < CLOSE
        bad = out.clone()
        bad.view(-1)[: bad.numel() // 4] = 0  # a skipped block
        assert not accept(bad, ref)[0]
        bad = out.clone()
        bad.view(-1)[7] = float("nan")
        assert not accept(bad, ref)[0]


def test_run_checks_inputs_once_and_matches_the_public_entry_point(monkeypatch):
    """Timed calls must measure the kernel launch, not the varlen entry point's host read of the offsets."""
    import raytune_attn.tune.measure.workload as workload
    from raytune_attn.api import varlen_attention
    from raytune_attn.config import InvalidConfig

    calls = []
    real = workload.check_varlen
    monkeypatch.setattr(workload, "check_varlen", lambda *a: calls.append(1) or real(*a))
    w = make_workload(VARLEN, DEVICE)
    cfg = {"BLOCK_M": 16, "BLOCK_N": 16}
    outs = [w.run(cfg) for _ in range(3)]
    assert len(calls) == 1
    p = VARLEN
    public = varlen_attention(w.q, w.k, w.v, w.cu_seqlens, w.cu_seqlens, p.seqlen_q, p.seqlen_k, causal=True,
                              config=cfg)
    assert all(torch.equal(o, public) for o in outs)
    try:
        w.run({"BLOCK_M": 24})
    except InvalidConfig as e:
        assert "BLOCK_M" in str(e)
    else:
        raise AssertionError("a bad config must raise InvalidConfig")


def test_unfilled_workload_compiles_the_same_binary_without_random_inputs():
    w = make_workload(VARLEN, device=DEVICE, random=False)
    p = VARLEN
    full = make_workload(p, device=DEVICE)
    assert w.q.shape == full.q.shape and w.q.dtype == full.q.dtype and torch.equal(w.cu_seqlens, full.cu_seqlens)
    cfg = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 2, "num_stages": 1}
    w.compile(cfg)  # a compile needs shapes, dtypes and alignment only
    ok, _ = accept(full.run(cfg), reference(full))
    assert ok


def test_check_run_fails_rows_a_config_leaves_unwritten(monkeypatch):
    # A kernel that skips half the query rows: its output buffer is NaN-filled for the check, so the skipped rows
    # fail it (from torch.empty they could hold the previous launch's correct rows).
    import raytune_attn.tune.measure.workload as workload

    real = workload.flash_attn_fwd

    def half_rows(q, k, v, config, *, out=None, **kw):
        full = real(q, k, v, config, **kw)
        rows = q.shape[2] // 2
        out[:, :, :rows] = full[:, :, :rows]
        return out

    w = make_workload(DENSE, DEVICE)
    ref = reference(w)
    cfg = {"BLOCK_M": 16, "BLOCK_N": 16}
    ok, err = accept(w.check_run(cfg), ref)
    assert ok and err < CLOSE
    monkeypatch.setattr(workload, "flash_attn_fwd", half_rows)
    got = w.check_run(cfg)
    assert torch.isnan(got[:, :, DENSE.seqlen_q // 2:]).all()
    assert not accept(got, ref)[0]


def test_workload_validates_through_the_public_validation_only():
    import ast
    import inspect

    from raytune_attn.tune.measure import workload

    tree = ast.parse(inspect.getsource(workload))
    private = [(node.module, a.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
               for a in node.names if a.name.startswith("_") and (node.module or "").startswith("raytune_attn")]
    assert private == []
    w = make_workload(Problem(1, 2, 2, 16, 16, 32, False, "float16"), device=DEVICE)
    with pytest.raises(InvalidConfig, match="BLOCK_M=48"):
        w.compile({"BLOCK_M": 48})


PAGED = "paged-n1q9k40+n2q1k17~33-bs16-hq4-hkv2-d16-{}-seed2"


def test_paged_workload_scatters_pages_and_poisons_what_no_sequence_owns():
    from raytune_attn.problem import Problem as P

    p = P.from_key(PAGED.format(DTYPE))
    w = make_workload(p, device=DEVICE)
    lens = p.lengths()
    assert w.seqused_k.tolist() == [k for _, k in lens] and w.cu_seqlens_q.tolist() == [0, 9, 10, 11]
    owned = {int(b) for z, (_, k) in enumerate(lens) for b in w.block_table[z, : -(-k // 16)]}
    assert len(owned) == sum(-(-k // 16) for _, k in lens) == w.k.shape[0] - 1  # one spare block
    assert owned != set(range(len(owned)))  # scattered, not in sequence order
    for t in (w.k, w.v):
        spare = (set(range(t.shape[0])) - owned).pop()
        assert t[spare].isnan().all()
        for z, (_, k) in enumerate(lens):
            last = int(w.block_table[z, (k - 1) // 16])
            assert t[last, k % 16 or 16:].isnan().all() and not t[last, : k % 16 or 16].isnan().any()


def test_paged_reference_matches_float64_and_the_kernel_is_accepted():
    from raytune_attn.problem import Problem as P
    from raytune_attn.tune.measure.paged_workload import gathered

    w = make_workload(P.from_key(PAGED.format(DTYPE)), device=DEVICE)
    ref = reference(w)
    want = torch.cat([attention_reference(q[None], k[None], v[None], causal=True)[0][0].transpose(0, 1)
                      for q, k, v in gathered(w)])
    assert (ref.cpu().double() - want).abs().max() < 1e-4
    for cfg in ({"NUM_SEGMENTS": 1, "BLOCK_M": 32}, {"NUM_SEGMENTS": 4, "BLOCK_N": 16}):
        assert accept(w.check_run(cfg), ref)[0]
    with pytest.raises(InvalidConfig, match="unknown paged knob"):
        w.compile({"PRE_LOAD_V": True, "NUM_SEGMENTS": 1})  # a dense-kernel knob: refused before any compile


def test_paged_compile_twin_is_a_smaller_problem_of_the_same_kind():
    from raytune_attn.problem import Problem as P
    from raytune_attn.tune.measure.paged_workload import compile_paged, compile_twin

    p = P.from_key("paged-n4q512~2048k2048~8192+n32q1k1025~8192-bs16-hq32-hkv8-d128-bfloat16-seed0")
    twin = compile_twin(p)
    assert (twin.kind, twin.batch, twin.seqlen_q, twin.block_size) == ("paged", 36, 2048, 16)
    assert max(k for q, k in twin.lengths() if q == 1) == 32  # decode rows span two pages, as the real ones do
    w = make_workload(twin, device=DEVICE, random=False)  # shapes only: what a compile process builds
    assert w.k.shape == (sum(-(-k // 16) for _, k in twin.lengths()) + 1, 16, 8, 128)
    with pytest.raises(InvalidConfig, match="NUM_SEGMENTS=3"):
        compile_paged(p, {"NUM_SEGMENTS": 3}, device=DEVICE)  # the interpreter takes CPU tensors; a GPU run not
