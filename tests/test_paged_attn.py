"""paged_attention against a float64 reference over the gathered pages, on odd shapes and mixed batches."""

import pytest
import torch
from conftest import DEVICE, HAS_GPU
from reference import attention_reference, rel_err, tolerance

from raytune_attn import validation
from raytune_attn.config import InvalidConfig, validate_config
from raytune_attn.kernels.paged_config import default_paged_config
from raytune_attn.paged import paged_attention
from raytune_attn.validation import check_paged

DTYPES = [torch.float16, torch.bfloat16] if HAS_GPU else [torch.float32]
_FAR = 10**6  # table entries past a sequence's pages: a block id no cache has, so reading one would fault


def make_batch(q_lens, k_lens, hq, hkv, d, page, dtype, seed=0):
    """Random queries and per-sequence K/V scattered over shuffled cache blocks; every unused block and slot
    holds NaN. Returns (q, k_cache, v_cache, metadata kwargs, per-sequence K and V)."""
    g = torch.Generator().manual_seed(seed)
    pages = [-(-n // page) for n in k_lens]
    num_blocks = sum(pages) + 2
    k_cache = torch.full((num_blocks, page, hkv, d), float("nan"), dtype=dtype)
    v_cache = torch.full_like(k_cache, float("nan"))
    free = torch.randperm(num_blocks, generator=g).tolist()
    table = torch.full((len(k_lens), max(pages) + 1), _FAR, dtype=torch.int32)
    ks, vs = [], []
    for z, n in enumerate(k_lens):
        k, v = (torch.randn(n, hkv, d, generator=g).to(dtype) for _ in range(2))
        ks.append(k)
        vs.append(v)
        for j in range(pages[z]):
            table[z, j] = blk = free.pop()
            k_cache[blk, : min(page, n - j * page)] = k[j * page:(j + 1) * page]
            v_cache[blk, : min(page, n - j * page)] = v[j * page:(j + 1) * page]
    q = torch.randn(sum(q_lens), hq, d, generator=g).to(dtype)
    cu = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32)
    meta = dict(block_table=table, seqused_k=torch.tensor(k_lens, dtype=torch.int32), cu_seqlens_q=cu,
                max_seqlen_q=max(max(q_lens), 1), max_seqlen_k=max(max(k_lens), 1))
    moved = [t.to(DEVICE) for t in (q, k_cache, v_cache)]
    return (*moved, {k: (v.to(DEVICE) if isinstance(v, torch.Tensor) else v) for k, v in meta.items()}, ks, vs)


def reference(q, meta, ks, vs, causal, scale=None):
    cu = meta["cu_seqlens_q"].tolist()
    outs = []
    for z in range(len(ks)):
        qs = q[cu[z]:cu[z + 1]].cpu().transpose(0, 1)[None]
        out, _ = attention_reference(qs, ks[z].transpose(0, 1)[None], vs[z].transpose(0, 1)[None], causal, scale)
        outs.append(out[0].transpose(0, 1))
    return torch.cat(outs)


CASES = {
    # name: (q_lens, k_lens, hq, hkv, d, page, config); key counts never a multiple of the page
    "mixed-gqa": ([1, 3, 17], [37, 20, 50], 4, 2, 64, 16, None),
    "mqa-decode": ([1, 1, 1], [37, 20, 50], 4, 1, 64, 16, None),
    "split4-tile-in-page": ([1, 3, 9], [37, 20, 45], 4, 2, 64, 16, {"NUM_SEGMENTS": 4, "BLOCK_N": 16, "BLOCK_M": 32}),
    "split2-tile-over-pages": ([1, 3, 9], [37, 20, 45], 4, 2, 64, 16,
                               {"NUM_SEGMENTS": 2, "BLOCK_N": 32, "BLOCK_M": 16}),
    "d80-group3": ([1, 3, 12], [37, 20, 45], 6, 2, 80, 32, {"NUM_SEGMENTS": 2, "BLOCK_N": 16, "BLOCK_M": 32}),
    # an empty query run, a run longer than its keys (its first row sees nothing), a sequence with no keys
    "edges": ([0, 3, 1, 2], [5, 2, 0, 19], 2, 2, 16, 16, {"NUM_SEGMENTS": 2, "BLOCK_N": 16}),
}
RUNS = [(name, True) for name in CASES] + [("mixed-gqa", False), ("split2-tile-over-pages", False)]


@pytest.mark.parametrize("case, causal", RUNS, ids=[f"{n}-{'causal' if c else 'full'}" for n, c in RUNS])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_reference(case, causal, dtype):
    q_lens, k_lens, hq, hkv, d, page, config = CASES[case]
    q, k_cache, v_cache, meta, ks, vs = make_batch(q_lens, k_lens, hq, hkv, d, page, dtype)
    out = paged_attention(q, k_cache, v_cache, causal=causal, config=config, **meta)
    assert out.shape == q.shape and out.dtype == dtype
    assert torch.isfinite(out).all(), "a NaN from an unused block or slot reached the output"
    assert rel_err(out, reference(q, meta, ks, vs, causal)) < tolerance(dtype, DEVICE)


def test_default_decode_config_splits_and_matches():
    q_lens, k_lens = [1, 1], [100, 77]
    dtype = DTYPES[0]
    q, k_cache, v_cache, meta, ks, vs = make_batch(q_lens, k_lens, 4, 1, 32, 16, dtype, seed=1)
    cfg = default_paged_config(head_dim=32, group=4, max_seqlen_q=1, max_seqlen_k=100, num_seqs=2, num_kv_heads=1)
    assert cfg["NUM_SEGMENTS"] > 1  # a decode batch of two sequences must spread its keys over programs
    out = paged_attention(q, k_cache, v_cache, **meta)
    assert rel_err(out, reference(q, meta, ks, vs, True)) < tolerance(dtype, DEVICE)


def test_prefill_default_takes_one_segment():
    cfg = default_paged_config(head_dim=128, group=4, max_seqlen_q=512, max_seqlen_k=4096, num_seqs=2,
                               num_kv_heads=8)
    assert cfg["NUM_SEGMENTS"] == 1
    assert check_paged(cfg, head_dim=128, group=4) == cfg


def test_out_and_scale():
    q, k_cache, v_cache, meta, ks, vs = make_batch([2, 5], [21, 9], 2, 1, 32, 16, DTYPES[0], seed=2)
    out = torch.full_like(q, float("nan"))
    got = paged_attention(q, k_cache, v_cache, out=out, softmax_scale=0.3, config={"NUM_SEGMENTS": 2}, **meta)
    assert got is out
    assert rel_err(out, reference(q, meta, ks, vs, True, 0.3)) < tolerance(DTYPES[0], DEVICE)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_dtypes_match_reference(dtype):
    """fp16 and bf16 on any device (on the CPU the interpreter has no bfloat16: the call computes it in float32)."""
    q, k_cache, v_cache, meta, ks, vs = make_batch([1, 3, 9], [37, 20, 45], 4, 2, 32, 16, dtype, seed=3)
    out = paged_attention(q, k_cache, v_cache, config={"NUM_SEGMENTS": 2}, **meta)
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert rel_err(out, reference(q, meta, ks, vs, True)) < tolerance(dtype, DEVICE)


def test_strided_offsets_read_as_their_values():
    """seqused_k and cu_seqlens_q given as columns of wider tensors (stride 2) give the contiguous result."""
    q, k_cache, v_cache, meta, ks, vs = make_batch([1, 3, 9], [37, 20, 45], 4, 2, 32, 16, DTYPES[0], seed=4)
    strided = {name: torch.stack([meta[name], torch.full_like(meta[name], 10**6)], 1)[:, 0]
               for name in ("seqused_k", "cu_seqlens_q")}
    assert all(t.stride(0) == 2 for t in strided.values())
    out = paged_attention(q, k_cache, v_cache, config={"NUM_SEGMENTS": 2}, **{**meta, **strided})
    assert rel_err(out, reference(q, meta, ks, vs, True)) < tolerance(DTYPES[0], DEVICE)


def test_inputs_needing_a_gradient_are_refused():
    from raytune_attn.inputs import ForwardOnlyError

    q, k_cache, v_cache, meta, _, _ = make_batch([1, 2], [20, 9], 2, 1, 16, 16, DTYPES[0])
    with pytest.raises(ForwardOnlyError, match="q requires grad"):
        paged_attention(q.requires_grad_(), k_cache, v_cache, **meta)
    with torch.no_grad():
        assert paged_attention(q, k_cache, v_cache, **meta).grad_fn is None


def test_block_id_outside_cache_names_the_table():
    q, k_cache, v_cache, meta, _, _ = make_batch([1, 2], [20, 9], 2, 1, 16, 16, DTYPES[0])
    if meta["block_table"].is_cuda:
        pytest.skip("ids are checked on the host only where the table is on the CPU")
    meta["block_table"][0, 1] = k_cache.shape[0]
    with pytest.raises(ValueError, match=r"block_table\[0, 1\]"):
        paged_attention(q, k_cache, v_cache, **meta)


@pytest.mark.parametrize("change, match", [
    (lambda a: a.update(block_table=a["block_table"].long()), "block_table must be int32"),
    (lambda a: a.update(k_cache=a["k_cache"][:, :8], v_cache=a["v_cache"][:, :8]), "block_size"),
    pytest.param(lambda a: a.update(max_seqlen_q=1), "max_seqlen_q", id="max_seqlen_q-below-a-run",
                 marks=pytest.mark.skipif(HAS_GPU, reason="values are checked only where they are on the CPU")),
    (lambda a: a.update(q=a["q"][:, :3]), "multiple"),
    (lambda a: a.update(seqused_k=a["seqused_k"][:1]), "seqused_k"),
    (lambda a: a.update(softmax_scale=-1.0), "softmax_scale"),
    (lambda a: a.update(out=torch.empty(1)), "out must be"),
    (lambda a: a.update(q=a["q"][:, :0]), r"query heads \(0\)"),
    # no sequence, yet queries: nothing would write their rows
    (lambda a: a.update(block_table=a["block_table"][:0], seqused_k=a["seqused_k"][:0],
                        cu_seqlens_q=a["cu_seqlens_q"][:1]), "no sequence"),
])
def test_bad_input_raises(change, match):
    q, k_cache, v_cache, meta, _, _ = make_batch([1, 2], [20, 9], 4, 2, 16, 16, DTYPES[0])
    args = dict(q=q, k_cache=k_cache, v_cache=v_cache, **meta)
    change(args)
    with pytest.raises(ValueError, match=match):
        paged_attention(args.pop("q"), args.pop("k_cache"), args.pop("v_cache"), **args)


@pytest.mark.parametrize("config, match", [
    ({"BLOCK_M": 16}, "GQA group"),
    ({"NUM_SEGMENTS": 3}, "NUM_SEGMENTS"),
    ({"BLOCK_N": 8}, "BLOCK_N"),
    ({"PRE_LOAD_V": True}, "unknown paged knob"),
])
def test_bad_config_raises(config, match):
    with pytest.raises(InvalidConfig, match=match):
        check_paged(config, head_dim=64, group=32)


def test_one_validation_judges_paged_configs_everywhere():
    """A config setting NUM_SEGMENTS is the paged kernel's: check (artifact, runtime, search screens, space files)
    applies its rules; the dense kernel's knob rules (validate_config) and prepare refuse it."""
    cfg = {"BLOCK_M": 32, "BLOCK_N": 64, "NUM_SEGMENTS": 8, "num_warps": 4, "num_stages": 2}
    assert validation.check(cfg, head_dim=128, arch="sm90", group=4) == check_paged(cfg, head_dim=128, group=4)
    assert validation.check(cfg, vendor="amd") == check_paged(cfg)
    with pytest.raises(InvalidConfig, match="NUM_SEGMENTS is the paged kernel's knob"):
        validate_config(cfg)
    assert validation.Screen.for_problem("sm90", 128, "bfloat16", 64).reason(cfg).startswith("BLOCK_M=32")
    with pytest.raises(InvalidConfig, match="GQA group"):
        validation.check(cfg, head_dim=128, group=64)
    with pytest.raises(InvalidConfig, match="shared memory"):
        validation.check({**cfg, "BLOCK_N": 256}, head_dim=256, arch="gfx942", dtype="float32")
    q = torch.zeros(1, 4, 8, 16)
    with pytest.raises(InvalidConfig, match="paged kernel"):
        validation.prepare(cfg, q, q, q)


@pytest.mark.skipif(not HAS_GPU, reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("config", [{"NUM_SEGMENTS": 4}, None], ids=["given", "looked-up"])
def test_cuda_graph_capture_and_replay(config):
    q, k_cache, v_cache, meta, ks, vs = make_batch([1, 1, 1], [300, 41, 129], 8, 2, 128, 16, torch.float16)
    out = torch.empty_like(q)
    paged_attention(q, k_cache, v_cache, out=out, config=config, **meta)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        paged_attention(q, k_cache, v_cache, out=out, config=config, **meta)
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert rel_err(out, reference(q, meta, ks, vs, True)) < tolerance(torch.float16, DEVICE)


def test_example_decode_loop_runs():
    from examples.paged_decode import main

    assert main(["--steps", "2"]) == 0  # it compares every step with a float64 reference over the gathered keys


@pytest.mark.parametrize("argv, words", [(["--block-size", "8"], "--block-size must be"),
                                         (["--block-size", "0"], "--block-size must be"),
                                         (["--steps", "-3"], "--steps must be >= 0")])
def test_example_decode_loop_refuses_bad_flags(argv, words, capsys):
    from examples.paged_decode import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and words in capsys.readouterr().err
