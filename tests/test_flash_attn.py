"""The kernel against float64 references: shapes, layouts, causal, GQA/MQA, head dims, dtypes and every knob.

On a machine without a GPU these run in the Triton interpreter in float32; on a GPU in float16 and bfloat16.
Every output is poisoned with NaN before the call, so an element the kernel never writes fails the check.

On a GPU nearly all the time goes to compiling (a config, head dim, mask, dtype and layout each make a binary), so
there each parametrized test runs a fast set chosen to hold every pair of its factors' values (every knob value
with each other knob's values, with both masks and both dtypes) and marks the other cases `gpu_slow`: left out of
a plain run, run with `-m gpu_slow` (conftest.py, docs/gpu-tests.md). In the interpreter every case runs in the
full suite; the cases outside the fast set (chosen the same way from the interpreter's configs and dtype) are
marked `slow` there, so `make test-fast` runs the fast set.
"""

import itertools

import pytest
import torch
from conftest import DEVICE, HAS_GPU
from reference import attention_reference, rel_err, tolerance, varlen_reference

from raytune_attn.config import validate_config
from raytune_attn.kernels.flash_attn import _whole_rows, flash_attn_fwd

DTYPES = [torch.float16, torch.bfloat16] if HAS_GPU else [torch.float32]
MASKS = [False, True]


def _pairs(case: tuple) -> set:
    return {(i, a, j, b) for (i, a), (j, b) in itertools.combinations(enumerate(case), 2)}


def pairwise_cover(cases: list[tuple]) -> set[tuple]:
    """A subset of `cases` (tuples of factor values) in which every pair of values that two factors take together
    somewhere in `cases` appears at least once. Greedy: the case adding the most missing pairs first, the earliest
    on a tie, so the subset is the same on every run."""
    pairs = [_pairs(c) for c in cases]
    missing = set().union(*pairs)
    chosen = set()
    while missing:
        best = max(range(len(cases)), key=lambda i: len(pairs[i] & missing))
        chosen.add(cases[best])
        missing -= pairs[best]
    return chosen


def _case(*values, fast: bool, id: str):  # noqa: A002 - named as pytest.param names it
    """A parametrized case; one outside the fast set is marked gpu_slow on a GPU, slow in the interpreter."""
    return pytest.param(*values, id=id, marks=() if fast else pytest.mark.gpu_slow if HAS_GPU else pytest.mark.slow)


def _knob_id(cfg: dict) -> str:
    return "-".join(f"{k}{int(v)}" for k, v in cfg.items()) or "default"


def _mask_id(causal: bool) -> str:
    return "causal" if causal else "full"


# (batch, Hq, Hkv, Sq, Sk, head_dim): odd lengths, Sq != Sk both ways, MHA/GQA/MQA, head dims 32..256
# including the non-powers of two that get padded (80, 96, 112, 160, 192).
SHAPES = [
    (1, 1, 1, 1, 1, 32),
    (2, 2, 2, 7, 7, 64),
    (1, 2, 2, 77, 77, 128),
    (2, 4, 1, 33, 100, 96),
    (1, 4, 2, 100, 33, 112),
    (1, 2, 2, 65, 65, 160),
    (1, 2, 1, 40, 50, 192),
    (1, 1, 1, 48, 48, 256),
    (1, 2, 2, 17, 17, 80),
    (1, 2, 1, 1000, 1000, 64),
]

# Small tiles keep the interpreter fast; every knob value appears at least once across the list.
CPU_CONFIGS = [
    dict(BLOCK_M=bm_bn[0], BLOCK_N=bm_bn[1], PRE_LOAD_V=p, SPLIT_MASK=s, USE_TMA=t, num_warps=w, num_stages=n)
    for bm_bn, (p, s, t, w, n) in zip(
        itertools.product((16, 32, 64, 128), (16, 32, 64)),
        itertools.cycle(itertools.product((False, True), (True, False), (False, True), (4, 8), (1, 3))),
    )
]
# On a GPU: a representative grid, the full product of the algorithmic knobs with Hopper-sized tiles.
GPU_CONFIGS = [
    dict(BLOCK_M=bm, BLOCK_N=bn, PRE_LOAD_V=p, SPLIT_MASK=s, USE_TMA=t, num_warps=w, num_stages=n)
    for (bm, bn), p, s, t, (w, n) in itertools.product(
        ((64, 32), (64, 64), (128, 32), (128, 64), (128, 128)), (False, True), (True, False), (False, True),
        ((4, 2), (8, 3)),
    )
]
CONFIGS = GPU_CONFIGS if HAS_GPU else CPU_CONFIGS
TMA_OK = not HAS_GPU or torch.cuda.get_device_capability()[0] >= 9


def _rand(*shape, dtype):
    return torch.randn(*shape, device=DEVICE, dtype=dtype)


def _check_dense(shape, causal, dtype, config, scale=None):
    b, hq, hkv, sq, sk, d = shape
    q, k, v = _rand(b, hq, sq, d, dtype=dtype), _rand(b, hkv, sk, d, dtype=dtype), _rand(b, hkv, sk, d, dtype=dtype)
    cfg = validate_config(config, head_dim=d, vendor="nvidia" if HAS_GPU else "cpu")
    if cfg["USE_TMA"] and not TMA_OK:
        pytest.skip("tensor-descriptor loads need Hopper")
    out = torch.full_like(q, float("nan"))
    out, lse = flash_attn_fwd(q, k, v, cfg, causal=causal, softmax_scale=scale, return_lse=True, out=out)
    ref, ref_lse = attention_reference(q, k, v, causal, scale)
    err = rel_err(out, ref)
    assert err < tolerance(dtype, DEVICE), f"rel err {err:.2e} for {shape} causal={causal} {cfg}"
    # lse is float32 whatever the inputs: compare where finite, and -inf exactly where a row sees no key.
    lse = lse.cpu().double()
    assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))
    fin = torch.isfinite(ref_lse)
    if fin.any():
        assert (lse[fin] - ref_lse[fin]).abs().max().item() < 100 * tolerance(dtype, DEVICE)


# On a GPU the fast set runs every shape causal (the diagonal; rows that see no key where Sq > Sk) and, full too,
# the shapes whose tail blocks the mask alone cuts (Sq != Sk, the 1000-token one); the dtype alternates so that
# each dtype runs both masks.
DENSE_SHAPE_CASES = [
    _case(shape, causal, dtype, id=f"{'x'.join(map(str, shape))}-{_mask_id(causal)}-{dtype}",
          fast=(causal or shape[3] != shape[4] or shape[3] >= 1000) and (i + causal + j) % len(DTYPES) == 0)
    for i, shape in enumerate(SHAPES) for causal in MASKS for j, dtype in enumerate(DTYPES)
]


@pytest.mark.slow
@pytest.mark.parametrize("shape, causal, dtype", DENSE_SHAPE_CASES)
def test_dense_shapes(shape, causal, dtype):
    _check_dense(shape, causal, dtype, {"BLOCK_M": 64, "BLOCK_N": 32})


def _knob_cases():
    """Every config with each mask and dtype; the fast set holds every pair of knob values (tile sizes, V preload,
    split loops, descriptor loads, warps/stages), mask and dtype."""
    cases = list(itertools.product(range(len(CONFIGS)), MASKS, DTYPES))
    factors = {c: (*CONFIGS[c[0]].values(), c[1], str(c[2])) for c in cases}
    fast = pairwise_cover(list(factors.values()))
    return [_case(CONFIGS[i], causal, dtype, id=f"{_knob_id(CONFIGS[i])}-{_mask_id(causal)}-{dtype}",
                  fast=factors[(i, causal, dtype)] in fast) for i, causal, dtype in cases]


@pytest.mark.parametrize("config, causal, dtype", _knob_cases())
def test_every_knob(config, causal, dtype):
    # Sq < Sk, ragged lengths and a padded head dim exercise the diagonal, the tail block and the head mask.
    _check_dense((1, 4, 2, 77, 100, 80), causal, dtype, config)


# The default config of each head dim (its tiles change with it): on a GPU the fast set alternates the dtype.
HEAD_DIMS = (32, 64, 80, 96, 112, 128, 160, 192, 256)


@pytest.mark.parametrize("d, dtype", [_case(d, dtype, id=f"d{d}-{dtype}", fast=(i + j) % len(DTYPES) == 0)
                                      for i, d in enumerate(HEAD_DIMS) for j, dtype in enumerate(DTYPES)])
def test_default_config_each_head_dim(d, dtype):
    _check_dense((1, 2, 2, 33, 33, d), True, dtype, {})


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("scale", [0.05, 1.0, 3.0])
def test_softmax_scale(scale, causal):
    _check_dense((1, 2, 2, 33, 47, 64), causal, DTYPES[0], {"BLOCK_M": 32, "BLOCK_N": 16}, scale=scale)


@pytest.mark.parametrize("scale", [0.0, -0.125, float("inf"), float("nan"), "0.1"])
def test_softmax_scale_must_be_positive(scale):
    q = _rand(1, 1, 16, 32, dtype=DTYPES[0])
    with pytest.raises(ValueError, match="softmax_scale must be a positive finite number"):
        flash_attn_fwd(q, q, q, validate_config({"BLOCK_M": 16, "BLOCK_N": 16}, head_dim=32), softmax_scale=scale)


def test_amd_knobs_pass_through():
    # In the interpreter and on HIP these launch options are accepted; on NVIDIA validate_config refuses them.
    if HAS_GPU and not torch.version.hip:
        pytest.skip("AMD-only knobs")
    cfg = {"BLOCK_M": 32, "BLOCK_N": 16, "waves_per_eu": 2, "matrix_instr_nonkdim": 16, "kpack": 2}
    _check_dense((1, 2, 2, 33, 33, 64), True, DTYPES[0], cfg)


# Varlen batches: per-sequence q and k lengths, including empty sequences and Sq != Sk within a sequence.
VARLEN = [
    ([1, 7, 77], [1, 7, 77]),
    ([0, 5, 33], [3, 0, 40]),
    ([100], [100]),
    ([16, 16, 16, 16], [16, 20, 8, 16]),
    ([50, 1, 13], [20, 30, 13]),
]


VARLEN_HEADS = [(4, 2, 64), (2, 2, 96), (4, 1, 128)]  # (Hq, Hkv, head dim)
VARLEN_CONFIGS = {"split": {"BLOCK_M": 32, "BLOCK_N": 16},
                  "masked": {"BLOCK_M": 16, "BLOCK_N": 32, "SPLIT_MASK": False, "PRE_LOAD_V": True}}


def _varlen_cases():
    """Every batch of lengths with each head layout, mask, dtype and config. The lengths don't change the binary:
    the fast set runs all of them on the binaries (head layout, mask, dtype, config) of a pairwise cover."""
    binaries = list(itertools.product(range(len(VARLEN_HEADS)), MASKS, [str(d) for d in DTYPES], VARLEN_CONFIGS))
    fast = pairwise_cover(binaries)
    return [_case(lens, VARLEN_HEADS[h], causal, dtype, VARLEN_CONFIGS[name],
                  id="{}-hq{}-hkv{}-d{}-{}-{}-{}".format(name, *VARLEN_HEADS[h], "-".join(map(str, lens[0])),
                                                          _mask_id(causal), dtype),
                  fast=(h, causal, str(dtype), name) in fast)
            for name in VARLEN_CONFIGS for h in range(len(VARLEN_HEADS)) for lens in VARLEN for causal in MASKS
            for dtype in DTYPES]


@pytest.mark.parametrize("lens, heads_dim, causal, dtype, config", _varlen_cases())
def test_varlen(lens, heads_dim, causal, dtype, config):
    hq, hkv, d = heads_dim
    lq, lk = lens
    cu_q = torch.tensor([0] + list(itertools.accumulate(lq)), device=DEVICE, dtype=torch.int32)
    cu_k = torch.tensor([0] + list(itertools.accumulate(lk)), device=DEVICE, dtype=torch.int32)
    q, k, v = _rand(sum(lq), hq, d, dtype=dtype), _rand(sum(lk), hkv, d, dtype=dtype), _rand(sum(lk), hkv, d,
                                                                                                 dtype=dtype)
    cfg = validate_config(config, head_dim=d, vendor="nvidia" if HAS_GPU else "cpu")
    out = torch.full_like(q, float("nan"))
    out, lse = flash_attn_fwd(q, k, v, cfg, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                              max_seqlen_q=max(lq), max_seqlen_k=max(lk), return_lse=True, out=out)
    ref, ref_lse = varlen_reference(q, k, v, cu_q, cu_k, causal)
    err = rel_err(out, ref)
    assert err < tolerance(dtype, DEVICE), f"rel err {err:.2e}"
    lse = lse.cpu().double()
    assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))
    fin = torch.isfinite(ref_lse)
    assert (lse[fin] - ref_lse[fin]).abs().max().item() < 100 * tolerance(dtype, DEVICE)


# The Hopper knobs of issue #7, alone and together, on small tiles (8 warps unless given). Warp specialization as
# Triton's Hopper pass takes it: 4 warps written (it adds a producer warp group and splits the rows over two
# consumer groups), descriptor loads, one key loop. In the interpreter warp specialization and maxnreg are no-ops
# but their code paths run (Q through a descriptor, no early exit); the persistent grid really loops (3 programs).
WS = {"WARP_SPECIALIZE": True, "num_warps": 4, "USE_TMA": True, "SPLIT_MASK": False, "num_stages": 2}
HOPPER_KNOB_CONFIGS = [
    {"PERSISTENT": True},
    {"PERSISTENT": True, "REVERSE_M": True},
    {"REVERSE_M": True},
    WS,
    {**WS, "PRE_LOAD_V": True},
    {"maxnreg": 128},
    {**WS, "PERSISTENT": True, "REVERSE_M": True},
    {"PERSISTENT": True, "REVERSE_M": True, "maxnreg": 232, "USE_TMA": True},
    {"PERSISTENT": True, "REVERSE_M": True, "SPLIT_MASK": False, "PRE_LOAD_V": True},
    {**WS, "PERSISTENT": True, "REVERSE_M": True, "ONE_Q_BUFFER": True},
]


def _hopper_cfg(knobs):
    if knobs.get("maxnreg") and HAS_GPU and torch.version.hip:
        pytest.skip("maxnreg is an NVIDIA launch option")
    tiles = {"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 2} if HAS_GPU else {"BLOCK_M": 16, "BLOCK_N": 16}
    return {**tiles, "num_warps": 8, **knobs}


# On a GPU the fast set runs every knob set both dense and varlen, one with each mask (a pairwise cover).
_HOPPER_FAST = pairwise_cover(list(itertools.product(range(len(HOPPER_KNOB_CONFIGS)), MASKS, ("dense", "varlen"))))


def _hopper_cases(layout: str):
    return [_case(knobs, causal, id=f"{_knob_id(knobs)}-{_mask_id(causal)}", fast=(i, causal, layout) in _HOPPER_FAST)
            for i, knobs in enumerate(HOPPER_KNOB_CONFIGS) for causal in MASKS]


@pytest.mark.parametrize("knobs, causal", _hopper_cases("dense"))
def test_hopper_knobs_dense(knobs, causal):
    # GQA, Sq < Sk (a diagonal that starts mid-tile), ragged lengths: several m-blocks and tiles per program.
    _check_dense((2, 3, 1, 40, 50, 32), causal, DTYPES[0], _hopper_cfg(knobs))


@pytest.mark.parametrize("knobs, causal", _hopper_cases("varlen"))
def test_hopper_knobs_varlen(knobs, causal):
    # An empty sequence, Sq != Sk per sequence and the longest one in the middle (tiles past a short sequence's
    # end are skipped by the persistent loop, and counted from the end under REVERSE_M).
    test_varlen(([5, 33, 0], [9, 20, 4]), (4, 2, 32), causal, DTYPES[0], _hopper_cfg(knobs))


# Warp specialization on the tiles it is searched with (on Hopper: two consumer warp groups of 64 rows each) and
# many key blocks a tile: the ring of K/V buffers wraps several times, and each consumer group must store its
# own rows (Triton's pass once stored the second group's rows 64 too far down). On the persistent grid with one Q
# buffer too: the producer then reloads the one buffer between tiles, after the consumers are done with it.
# On a GPU the fast set runs each grid dense and varlen, one with each mask (a pairwise cover).
WS_GRIDS = {"grid": (False, False), "persistent": (True, False), "persistent-1q": (True, True)}
_WS_FAST = pairwise_cover(list(itertools.product(WS_GRIDS, MASKS, (False, True))))


@pytest.mark.parametrize("causal, persistent, one_q, varlen", [
    _case(causal, *WS_GRIDS[grid], varlen, id=f"{'varlen' if varlen else 'dense'}-{grid}-{_mask_id(causal)}",
          fast=(grid, causal, varlen) in _WS_FAST)
    for varlen in (False, True) for grid in WS_GRIDS for causal in MASKS])
def test_warp_specialized_tiles_over_many_key_blocks(causal, persistent, one_q, varlen):
    tiles = {"BLOCK_M": 128, "BLOCK_N": 64} if HAS_GPU else {"BLOCK_M": 32, "BLOCK_N": 16}
    cfg = {**WS, **tiles, "PERSISTENT": persistent, "REVERSE_M": persistent, "ONE_Q_BUFFER": one_q}
    # The interpreter has neither the ring nor the warp groups: there a third of the lengths (still several query
    # blocks and up to 7 key blocks a tile) runs the same loops at a ninth of the cost.
    sq, sk = ([300, 0, 77], [333, 5, 200]) if HAS_GPU else ([100, 0, 26], [111, 5, 67])
    if varlen:
        test_varlen((sq, sk), (4, 2, 64), causal, DTYPES[-1], cfg)
    else:
        _check_dense((2, 4, 2, sk[0], sk[0], 64), causal, DTYPES[-1], cfg)


# BAND_LAUNCH: the warp-specialized main launch folds only the whole key blocks every row of its tile sees, a second
# launch the causal band, merged by the log-sum-exp (kernels/causal_band.py). Band tiles nest in the main tiles
# (16 rows in 32 here, as 64 in 128-256 on a GPU); the diagonal starts mid-tile (Sq < Sk) or leaves rows that see
# no key (Sq > Sk); with and without the caller asking for lse (without, the main launch's is scratch); GQA,
# varlen with an empty sequence, the persistent grid heavy-first.
BAND = {**WS, "BAND_LAUNCH": True}


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("sq, sk", [(40, 50), (50, 40), (64, 64)])
def test_band_launch_dense(sq, sk, persistent, monkeypatch):
    from raytune_attn.kernels import causal_band

    if not HAS_GPU:
        monkeypatch.setattr(causal_band, "BAND_ROWS", 16)
    tiles = {"BLOCK_M": 128, "BLOCK_N": 128} if HAS_GPU else {"BLOCK_M": 32, "BLOCK_N": 16}
    cfg = {**BAND, **tiles, "PERSISTENT": persistent, "REVERSE_M": persistent}
    scale = 2 if HAS_GPU else 1
    _check_dense((2, 4, 2, sq * scale, sk * scale, 64), True, DTYPES[0], cfg)
    q, k, v = (_rand(1, h, n, 64, dtype=DTYPES[0]) for h, n in ((2, sq), (1, sk), (1, sk)))
    full = validate_config({**cfg, "PERSISTENT": False, "REVERSE_M": False}, head_dim=64,
                           vendor="nvidia" if HAS_GPU else "cpu")
    if full["USE_TMA"] and not TMA_OK:
        pytest.skip("tensor-descriptor loads need Hopper")
    out = flash_attn_fwd(q, k, v, full, causal=True)  # no lse asked for
    assert rel_err(out, attention_reference(q, k, v, True, None)[0]) < tolerance(q.dtype, DEVICE)


def test_band_launch_main_part_folds_exactly_the_blocks_below_the_band(monkeypatch):
    # The main launch alone (the band launch stood down): each row attends to keys [0, n) of its tile, n the tile's
    # first row's horizon rounded down to whole key blocks, and stores that part's lse; the band launch adds the rest.
    from raytune_attn.kernels import causal_band

    monkeypatch.setattr(causal_band, "band_launch", lambda *a, **k: None)
    bm, bn, sq, sk = 32, 16, 90, 70  # Sq > Sk: the first tile has nothing below its band
    cfg = validate_config({**BAND, "BLOCK_M": bm, "BLOCK_N": bn}, head_dim=32, vendor="nvidia" if HAS_GPU else "cpu")
    if not TMA_OK:
        pytest.skip("tensor-descriptor loads need Hopper")
    q, k, v = (_rand(1, 2, n, 32, dtype=DTYPES[0]) for n in (sq, sk, sk))
    out, lse = flash_attn_fwd(q, k, v, cfg, causal=True, return_lse=True)
    rows = torch.arange(sq)
    n = ((rows // bm * bm + sk - sq + 1) // bn * bn).clamp(min=0)  # keys below the band, per row's tile
    s = (q.double().cpu() @ k.double().cpu().transpose(-1, -2)) * 32**-0.5
    s = s.masked_fill(torch.arange(sk)[None, :] >= n[:, None], float("-inf"))
    ref = torch.softmax(s, -1).nan_to_num(0.0) @ v.double().cpu()
    assert rel_err(out, ref) < tolerance(q.dtype, DEVICE)
    ref_lse = torch.logsumexp(s, -1)
    assert torch.equal(torch.isinf(lse.cpu()), torch.isinf(ref_lse)) and bool((n == 0).any() and (n > 0).any())
    fin = torch.isfinite(ref_lse)
    assert (lse.cpu().double()[fin] - ref_lse[fin]).abs().max().item() < 100 * tolerance(q.dtype, DEVICE)


@pytest.mark.parametrize("causal", MASKS)
def test_band_launch_varlen(causal, monkeypatch):
    from raytune_attn.kernels import causal_band

    if not HAS_GPU:
        monkeypatch.setattr(causal_band, "BAND_ROWS", 16)
    tiles = {"BLOCK_M": 128, "BLOCK_N": 64} if HAS_GPU else {"BLOCK_M": 32, "BLOCK_N": 16}
    lens = ([300, 0, 77], [333, 5, 200]) if HAS_GPU else ([70, 0, 26], [73, 5, 40])
    test_varlen(lens, (4, 2, 64), causal, DTYPES[-1], {**BAND, **tiles, "PERSISTENT": True, "REVERSE_M": True})


# The tall warp-specialized form the Hopper space screens at head dim 64 without a mask: 256 rows, so each consumer
# group holds 128 (two 64-row matmul slices) and spills a few registers, on the persistent grid. Causal too: the
# space does not screen it there, but a search may step to it. On a GPU the fast set is the form as screened.
@pytest.mark.parametrize("causal, varlen", [
    _case(causal, varlen, id=f"{'varlen' if varlen else 'dense'}-{_mask_id(causal)}", fast=not (causal or varlen))
    for varlen in (False, True) for causal in MASKS])
def test_warp_specialized_tall_tiles(causal, varlen):
    tiles = {"BLOCK_M": 256, "BLOCK_N": 128} if HAS_GPU else {"BLOCK_M": 32, "BLOCK_N": 16}
    cfg = {**WS, **tiles, "PERSISTENT": True, "PRE_LOAD_V": True}
    sq, sk = ([700, 0, 77], [733, 5, 300]) if HAS_GPU else ([70, 0, 26], [73, 5, 40])
    if varlen:
        test_varlen((sq, sk), (4, 2, 64), causal, DTYPES[0], cfg)
    else:
        _check_dense((2, 4, 2, sk[0], sk[0], 64), causal, DTYPES[0], cfg)


# The persistent grid's longest-first order deals odd rounds of tiles backwards (a snake), a short last round too:
# every tile must still be computed exactly once (the output starts as NaN). In the interpreter (3 programs) 11
# tiles are three whole rounds and a short odd one of two; 35 tiles (5 heads sharing one key/value head, 7 query
# blocks) are eleven rounds and a short one of two.
@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("heads, m_blocks", [(1, 11), (5, 7)], ids=["11tiles", "35tiles"])
def test_persistent_longest_first_deals_every_tile_once(heads, m_blocks, causal):
    tiles = {"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 2} if HAS_GPU else {"BLOCK_M": 16, "BLOCK_N": 16}
    sq = m_blocks * tiles["BLOCK_M"] - 3
    cfg = {**tiles, "num_warps": 4, "PERSISTENT": True, "REVERSE_M": True}
    _check_dense((1, heads, 1, sq, sq + 5, 32), causal, DTYPES[0], cfg)
    _check_dense((1, heads, 1, sq, sq + 5, 32), causal, DTYPES[0], {**cfg, **WS})


# Dense keys in whole key blocks: the kernel then drops the sequence-end mask (a full mask masks no block at all, a
# causal one only its diagonal band), in the split loops, the one masked loop and under warp specialization; with
# ragged query counts, fewer and more queries than keys.
# On a GPU the fast set runs each knob set with both masks, fewer and more queries than keys alternating (a
# pairwise cover; the query count does not change the binary).
WHOLE_KEY_KNOBS = [{}, {"SPLIT_MASK": False}, {"PERSISTENT": True, "REVERSE_M": True}, WS, {**WS, "PERSISTENT": True}]
_WHOLE_KEY_FAST = pairwise_cover(list(itertools.product(range(len(WHOLE_KEY_KNOBS)), MASKS, (True, False))))


@pytest.mark.parametrize("knobs, causal, fewer_queries", [
    _case(knobs, causal, fewer, id=f"{'sq<sk' if fewer else 'sq>sk'}-{_knob_id(knobs)}-{_mask_id(causal)}",
          fast=(i, causal, fewer) in _WHOLE_KEY_FAST)
    for fewer in (True, False) for i, knobs in enumerate(WHOLE_KEY_KNOBS) for causal in MASKS])
def test_whole_key_blocks(knobs, causal, fewer_queries):
    tiles = {"BLOCK_M": 128, "BLOCK_N": 64} if HAS_GPU else {"BLOCK_M": 32, "BLOCK_N": 16}
    sk = 4 * tiles["BLOCK_N"]
    sq = sk - tiles["BLOCK_N"] - 3 if fewer_queries else sk + tiles["BLOCK_M"] + 5
    cfg = {**tiles, "num_warps": 4, "num_stages": 2, **knobs}
    _check_dense((2, 4, 2, sq, sk, 64), causal, DTYPES[-1], cfg)


# The persistent grid reads dense contiguous inputs with keys in whole blocks through descriptors over the whole
# tensors, built once a program (each head's rows found by their offset; the last query block of a head reads rows of
# the next head and stores none of them), and any other layout through descriptors built per tile: both against the
# reference, with two sequences and two query heads a key/value head.
# On a GPU the fast set runs each layout and each form, one form with each mask (a pairwise cover).
DESC_FORMS = {"split-loop": {"USE_TMA": True}, "warp-specialized": WS,
              "warp-specialized-1q": {**WS, "ONE_Q_BUFFER": True}}
DESC_LAYOUTS = {"bhsd": "contiguous", "bshd": "heads-inside"}
_DESC_FAST = pairwise_cover(list(itertools.product(DESC_LAYOUTS, DESC_FORMS, MASKS)))


@pytest.mark.parametrize("layout, knobs, causal", [
    _case(layout, DESC_FORMS[form], causal, id=f"{DESC_LAYOUTS[layout]}-{form}-{_mask_id(causal)}",
          fast=(layout, form, causal) in _DESC_FAST)
    for layout in DESC_LAYOUTS for form in DESC_FORMS for causal in MASKS])
def test_persistent_grid_whole_tensor_descriptors(layout, knobs, causal):
    tiles = {"BLOCK_M": 128, "BLOCK_N": 64} if HAS_GPU else {"BLOCK_M": 32, "BLOCK_N": 16}
    b, hq, hkv, d = 2, 4, 2, 64
    sk = 3 * tiles["BLOCK_N"]
    sq = sk - 5
    dtype = DTYPES[-1]
    if layout == "bhsd":
        q, k, v = _rand(b, hq, sq, d, dtype=dtype), _rand(b, hkv, sk, d, dtype=dtype), _rand(b, hkv, sk, d, dtype=dtype)
    else:  # (B, S, H, D) storage seen as (B, H, S, D): rows of one head are H * D apart
        q = _rand(b, sq, hq, d, dtype=dtype).transpose(1, 2)
        k, v = (_rand(b, sk, hkv, d, dtype=dtype).transpose(1, 2) for _ in range(2))
    assert _whole_rows(q, k, v) == (layout == "bhsd")
    cfg = validate_config({**tiles, "num_warps": 4, "num_stages": 2, "PERSISTENT": True, "REVERSE_M": True, **knobs},
                          head_dim=d, vendor="nvidia" if HAS_GPU else "cpu")
    if not TMA_OK:
        pytest.skip("tensor-descriptor loads need Hopper")
    out = flash_attn_fwd(q, k, v, cfg, causal=causal, out=torch.full_like(q, float("nan")))
    ref, _ = attention_reference(q, k, v, causal, None)
    assert rel_err(out, ref) < tolerance(dtype, DEVICE), f"{layout} causal={causal} {cfg}"


def test_unsupported_knobs_raise_invalid_config(monkeypatch):
    from raytune_attn.config import InvalidConfig
    from raytune_attn.kernels import flash_attn as fa

    q = _rand(1, 1, 16, 32, dtype=DTYPES[0])
    monkeypatch.setattr(fa, "_HAS_WARP_SPECIALIZE", False)
    with pytest.raises(InvalidConfig, match="WARP_SPECIALIZE needs tl.range"):
        flash_attn_fwd(q, q, q, validate_config({"BLOCK_M": 16, "BLOCK_N": 16, **WS}, head_dim=32))
    monkeypatch.setattr(fa.torch.version, "hip", "6.2")
    with pytest.raises(InvalidConfig, match="maxnreg is an NVIDIA launch option"):
        fa._check_support({"maxnreg": 128}, q, interpreting=False)


@pytest.mark.parametrize(("message", "match"), [("PassManager::run failed", "compiler pass failed"),
                                                ("Triton Error [CUDA]: too many resources requested for launch",
                                                 "out of resources at launch")])  # fmt: skip
def test_compiler_and_launch_failures_become_invalid_config(monkeypatch, message, match):
    from raytune_attn.config import InvalidConfig
    from raytune_attn.kernels import flash_attn as fa

    class Failing:  # a kernel whose compile (or launch) fails the way Triton 3.6 reports it
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                raise RuntimeError(message)

            return launch

    monkeypatch.setattr(fa, "_attn_fwd", Failing())
    q = _rand(1, 1, 16, 32, dtype=DTYPES[0])
    with pytest.raises(InvalidConfig, match=match):
        flash_attn_fwd(q, q, q, validate_config({"BLOCK_M": 16, "BLOCK_N": 16}, head_dim=32))
    monkeypatch.setattr(fa, "_attn_fwd", type("Faulting", (), {"__getitem__": lambda self, g: _device_fault})())
    with pytest.raises(RuntimeError, match="illegal memory access"):  # not the config's fault: re-raised as is
        flash_attn_fwd(q, q, q, validate_config({"BLOCK_M": 16, "BLOCK_N": 16}, head_dim=32))


def _device_fault(*args, **kwargs):
    raise RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered")


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU: Triton's resource limits exist only when compiling for one")
def test_out_of_resources_becomes_invalid_config():
    from raytune_attn.config import InvalidConfig

    # K and V tiles fit once (2 x 128 x 256 x 2 B = 128 KB) but not 3 pipeline stages deep.
    cfg = validate_config({"BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 4, "num_warps": 8}, head_dim=256,
                          vendor="nvidia")
    q = _rand(1, 1, 256, 256, dtype=torch.bfloat16)
    with pytest.raises(InvalidConfig, match="resources"):
        flash_attn_fwd(q, q, q, cfg)


def test_pairwise_cover_keeps_every_pair_and_every_hopper_knob_with_both_masks():
    # The GPU's fast set of test_every_knob, computed the same way on any machine: every pair of values that two
    # factors take together in the full product is still together in some case of the cover.
    full = [(*GPU_CONFIGS[i].values(), causal, dtype)
            for i, causal, dtype in itertools.product(range(len(GPU_CONFIGS)), MASKS, ("float16", "bfloat16"))]
    fast = pairwise_cover(full)
    assert set(fast) <= set(full) and len(fast) < len(full) // 10
    assert set().union(*(_pairs(c) for c in fast)) == set().union(*(_pairs(c) for c in full))
    assert {(i, causal) for i, causal, _ in _HOPPER_FAST} == set(itertools.product(range(len(HOPPER_KNOB_CONFIGS)),
                                                                                    MASKS))
