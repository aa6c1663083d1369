"""Triton flash-attention forward (FA2 style), dense and varlen, launched with an explicit config.

One program computes a [BLOCK_M, HEAD_DIM] tile of the output for one (sequence, query head): it streams the
keys and values of that sequence in [BLOCK_N, HEAD_DIM] tiles and keeps an online softmax (running row max `m`
and row sum `l`), so the [Sq, Sk] score matrix never exists in memory.

Scores are kept in the log2 domain: s = q.k * softmax_scale * log2(e), so exp(x * scale) = exp2(s) and the
scale costs one multiply folded into the exponent's argument.

Causal masks are aligned to the bottom-right corner (flash-attn >= 2.1): query row i of a sequence may attend
key j iff j <= i + (Sk - Sq). A row with no key to attend (i + Sk - Sq < 0) outputs zeros and lse = -inf.
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
import subprocess

import torch
import triton
import triton.language as tl

from raytune_attn.config import AMD_ONLY_KNOBS, InvalidConfig
from raytune_attn.kernels import causal_band
from raytune_attn.kernels.tile_parts import LOG2E, attn_fwd_inner, natural_lse, seq_bases, seq_heads
from raytune_attn.validation import check_backend

_PTXAS_ERROR = getattr(triton.runtime.errors, "PTXASError", subprocess.CalledProcessError)


@triton.jit
def _attn_fwd_tile(q_base, k_base, v_base, o_base, Lse, off_z, off_h, q_start, start_m, seqlen_q, seqlen_k,
                   stride_qm, stride_kn, stride_vn, stride_om, stride_lz, stride_lh, stride_lm, qk_scale,
                   q_all, k_all, v_all, q_row, kv_row,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   IS_CAUSAL: tl.constexpr, PRE_LOAD_V: tl.constexpr, SPLIT_MASK: tl.constexpr,
                   USE_TMA: tl.constexpr, RETURN_LSE: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
                   EVEN_K: tl.constexpr, WHOLE_DESC: tl.constexpr, BELOW_BAND: tl.constexpr):
    """One [BLOCK_M, HEAD_DIM] output tile: query block `start_m` of one (sequence, query head), which the caller
    has checked starts inside the sequence (unless WARP_SPECIALIZE: see `hi`). EVEN_K: the key count is a multiple
    of BLOCK_N (dense inputs, known at launch), so no key block is ragged and, without a causal mask, none is
    masked. WHOLE_DESC: the TMA loads go through the caller's descriptors over whole tensors (q_all under
    WARP_SPECIALIZE, k_all, v_all), this head's rows starting at q_row and kv_row; otherwise the tile builds
    descriptors over its own sequence and head. BELOW_BAND (causal): only the whole key blocks that every row of
    the tile sees, unmasked; the diagonal band is a second launch's (causal_band.py), which merges it in."""
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    q_mask = (offs_m[:, None] < seqlen_q) & (offs_d[None, :] < HEAD_DIM)
    if WARP_SPECIALIZE:
        # Hopper's warp-specialization pass hands every load of the function to its producer warp group, and that
        # group issues only tensor-descriptor (TMA) copies: Q comes through a descriptor too. An empty sequence
        # (varlen) still loads its block (see `hi` below) and a descriptor needs a row: it gets this head's row 0 of
        # the batch, which exists, and what it reads is never stored.
        if WHOLE_DESC:
            q_desc = q_all
        else:
            q_row = 0
            q_desc = tl.make_tensor_descriptor(q_base - tl.where(seqlen_q == 0, q_start, 0) * stride_qm,
                                               shape=[tl.maximum(seqlen_q, 1), HEAD_DIM], strides=[stride_qm, 1],
                                               block_shape=[BLOCK_M, BLOCK_D])
        # The pass splits the tile's rows over two consumer warp groups by adding each half's offset to the
        # load's row and to `offs_m`'s range; when the row is the very value `offs_m` is built from (start_m *
        # BLOCK_M), Triton 3.6-3.9 add the offset twice to the second half's rows, which then mask and store
        # the wrong rows. The same row computed another way, (start_m * 2 * BLOCK_M) // 2, keeps them apart.
        q = q_desc.load([q_row + (start_m * (2 * BLOCK_M)) // 2, 0])
    else:
        q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :], mask=q_mask, other=0.0)
    # K and V descriptors are built after the Q load is issued, so that writing and fencing them overlaps its latency
    # (each costs a release and an acquire fence; under WARP_SPECIALIZE the producer warp group does it).
    if WHOLE_DESC:
        k_desc = k_all
        v_desc = v_all
    elif USE_TMA:
        kv_row = 0
        k_desc = tl.make_tensor_descriptor(k_base, shape=[seqlen_k, HEAD_DIM], strides=[stride_kn, 1],
                                           block_shape=[BLOCK_N, BLOCK_D])
        v_desc = tl.make_tensor_descriptor(v_base, shape=[seqlen_k, HEAD_DIM], strides=[stride_vn, 1],
                                           block_shape=[BLOCK_N, BLOCK_D])
    else:
        k_desc = None
        v_desc = None

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    # Bottom-right causal alignment: row i sees keys j <= i + diag.
    diag = seqlen_k - seqlen_q
    if IS_CAUSAL:
        # Keys past the tile's last row's horizon are invisible to every row: stop there.
        hi = tl.minimum(seqlen_k, (start_m + 1) * BLOCK_M + diag)
        # Keys [0, first_row + diag] are visible to every row of the tile.
        full_end = tl.minimum(seqlen_k, start_m * BLOCK_M + diag + 1)
    else:
        hi = seqlen_k
        full_end = seqlen_k
    hi = tl.maximum(hi, 0)
    if BELOW_BAND:
        hi = tl.maximum(full_end, 0) // BLOCK_N * BLOCK_N
    if WARP_SPECIALIZE:
        # That pass also takes no early return, so the callers do not skip a query block past the sequence's end
        # (varlen): it runs an empty key range here and its masked stores write nothing.
        hi = tl.where(start_m * BLOCK_M < seqlen_q, hi, 0)
    # A block needs a mask if it crosses the causal diagonal or the sequence's end (below the band none does: the
    # band starts at or before the keys' end).
    ANY_MASKED: tl.constexpr = (IS_CAUSAL or not EVEN_K) and not BELOW_BAND
    if SPLIT_MASK:
        # Whole blocks below the diagonal and inside the sequence need no mask; the rest (the diagonal band and
        # a ragged last block) go through the masked loop.
        n_full = tl.maximum(full_end, 0) // BLOCK_N * BLOCK_N
        acc, l_i, m_i = attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, kv_row, 0, n_full,
                                       offs_m, offs_n, offs_d, stride_kn, stride_vn, seqlen_k, diag, qk_scale,
                                       HEAD_DIM, BLOCK_N, BLOCK_D, False, IS_CAUSAL, PRE_LOAD_V, USE_TMA,
                                       WARP_SPECIALIZE, EVEN_K)
        if ANY_MASKED:
            acc, l_i, m_i = attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, kv_row, n_full, hi,
                                           offs_m, offs_n, offs_d, stride_kn, stride_vn, seqlen_k, diag, qk_scale,
                                           HEAD_DIM, BLOCK_N, BLOCK_D, True, IS_CAUSAL, PRE_LOAD_V, USE_TMA,
                                           WARP_SPECIALIZE, EVEN_K)
    else:
        # One loop over every block (warp specialization takes no second loop), masking each one if any needs it.
        # (Masking only the blocks that cross the diagonal, behind a scalar branch in the loop, ran 2-3x slower
        # under warp specialization on an H100: benchmarks/causal_order_ab.py, docs/benchmarks/h100.)
        acc, l_i, m_i = attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, kv_row, 0, hi,
                                       offs_m, offs_n, offs_d, stride_kn, stride_vn, seqlen_k, diag, qk_scale,
                                       HEAD_DIM, BLOCK_N, BLOCK_D, ANY_MASKED, IS_CAUSAL, PRE_LOAD_V, USE_TMA,
                                       WARP_SPECIALIZE, EVEN_K)

    # Rows that saw no key have l = 0 and acc = 0: divide by 1 so they output 0 rather than 0/0.
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_safe[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :], out.to(o_base.dtype.element_ty), mask=q_mask)
    if RETURN_LSE:
        lse = natural_lse(m_i, l_i)
        l_base = Lse + off_z * stride_lz + off_h * stride_lh + q_start * stride_lm
        tl.store(l_base + offs_m * stride_lm, lse, mask=offs_m < seqlen_q)


# Sequence lengths are not specialized: one binary serves every length, and a length of 1 baked in as a
# constant crashed ptxas (Triton 3.6, CUDA 13, sm_90a).
@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _attn_fwd(Q, K, V, Out, Lse, cu_seqlens_q, cu_seqlens_k,
              stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
              stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om,
              stride_lz, stride_lh, stride_lm,
              seqlen_q, seqlen_k, num_heads_q, group_size, qk_scale,
              HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              IS_CAUSAL: tl.constexpr, IS_VARLEN: tl.constexpr, PRE_LOAD_V: tl.constexpr,
              SPLIT_MASK: tl.constexpr, USE_TMA: tl.constexpr, RETURN_LSE: tl.constexpr,
              WARP_SPECIALIZE: tl.constexpr, REVERSE_M: tl.constexpr, EVEN_K: tl.constexpr,
              BELOW_BAND: tl.constexpr = False):
    """Grid (cdiv(max Sq, BLOCK_M), batch * Hq): one program per output tile."""
    if REVERSE_M:
        # Heavy tiles first: the hardware hands out blocks in launch order, and under a causal mask the last query
        # blocks have the most keys, so starting them first leaves the light ones to fill the tail of the grid.
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        start_m = tl.program_id(0)
    off_z, off_h, off_hk = seq_heads(tl.program_id(1), num_heads_q, group_size)
    q_base, k_base, v_base, o_base, q_start, seqlen_q, seqlen_k = seq_bases(
        Q, K, V, Out, cu_seqlens_q, cu_seqlens_k, off_z, off_h, off_hk, seqlen_q, seqlen_k,
        stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
        stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om, IS_VARLEN)
    if not WARP_SPECIALIZE:
        if start_m * BLOCK_M >= seqlen_q:
            return
    _attn_fwd_tile(q_base, k_base, v_base, o_base, Lse, off_z, off_h, q_start, start_m, seqlen_q, seqlen_k,
                   stride_qm, stride_kn, stride_vn, stride_om, stride_lz, stride_lh, stride_lm, qk_scale,
                   None, None, None, 0, 0,
                   HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, IS_CAUSAL, PRE_LOAD_V, SPLIT_MASK, USE_TMA, RETURN_LSE,
                   WARP_SPECIALIZE, EVEN_K, False, BELOW_BAND)


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "num_m_blocks", "num_tiles"])
def _attn_fwd_persistent(Q, K, V, Out, Lse, cu_seqlens_q, cu_seqlens_k,
                         stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
                         stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om,
                         stride_lz, stride_lh, stride_lm,
                         seqlen_q, seqlen_k, num_heads_q, group_size, qk_scale, num_m_blocks, num_tiles,
                         HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr, IS_VARLEN: tl.constexpr,
                         PRE_LOAD_V: tl.constexpr, SPLIT_MASK: tl.constexpr, USE_TMA: tl.constexpr,
                         RETURN_LSE: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, REVERSE_M: tl.constexpr,
                         EVEN_K: tl.constexpr, WHOLE_DESC: tl.constexpr, ONE_Q_BUFFER: tl.constexpr,
                         LPT_GROUP: tl.constexpr = 0, BELOW_BAND: tl.constexpr = False):
    """Persistent grid: as many programs as can be resident at once, program p computing tiles p, p + G, p + 2G...
    of the num_m_blocks * batch * Hq tiles (G = number of programs). The tile order is the plain grid's launch
    order (query blocks of one head, then the next head: K and V of a head stay in L2); REVERSE_M makes it
    longest-first: query blocks from the last to the first, each across every (sequence, head), dealt to the
    programs in a snake, so that every program gets its heavy causal tiles first, its light ones last, and about
    the same work in all.

    WHOLE_DESC (dense inputs, each tensor contiguous, keys in whole blocks): the TMA descriptors are built once, over
    Q, K and V seen as [rows, HEAD_DIM] matrices, rather than for every tile. Building one writes it to global memory
    behind a release fence and an acquire fence, and the warp-specialized layout's producer does that for three
    descriptors a tile between its last K/V copy of one tile and its first of the next.

    ONE_Q_BUFFER (with WARP_SPECIALIZE): the tile loop is not software-pipelined (num_stages=1). Triton's
    warp-specialization pass otherwise gives Q, which the producer loads once a tile, as many shared-memory buffers
    as the kernel's num_stages (2), so the next tile's Q can land while this one computes; with one, the producer
    loads it once the consumers are done with this tile's Q. That frees BLOCK_M * HEAD_DIM * 2 bytes: 64 KB at
    D=256, where the two-buffer 128x64 form needs 295 KB of the 227 KB there are.

    LPT_GROUP (with REVERSE_M; 0 = off): the longest-first order runs over groups of LPT_GROUP (sequence, head)
    pairs, one group after the other, instead of over every pair at once. Across all pairs, a round of the loop
    touches the K and V of as many heads as it has programs (132 heads of 1 MB each at S=2048, D=128: more than
    the L2 holds); within a group, only LPT_GROUP heads are live, as in the launch order."""
    num_zh = num_tiles // num_m_blocks
    num_programs = tl.num_programs(0)
    if WHOLE_DESC:
        # Contiguous: rows are HEAD_DIM apart (whatever stride a dimension of size 1 reports), and the rows of
        # (sequence z, head h) start at (z * heads + h) * length. The grid's heads are the query heads, and query head h
        # reads key head h // group_size, so its key rows start at (z * Hq + h) // group_size * Sk.
        k_all = tl.make_tensor_descriptor(K, shape=[num_zh // group_size * seqlen_k, HEAD_DIM], strides=[HEAD_DIM, 1],
                                          block_shape=[BLOCK_N, BLOCK_D])
        v_all = tl.make_tensor_descriptor(V, shape=[num_zh // group_size * seqlen_k, HEAD_DIM], strides=[HEAD_DIM, 1],
                                          block_shape=[BLOCK_N, BLOCK_D])
        if WARP_SPECIALIZE:
            q_all = tl.make_tensor_descriptor(Q, shape=[num_zh * seqlen_q, HEAD_DIM], strides=[HEAD_DIM, 1],
                                              block_shape=[BLOCK_M, BLOCK_D])
        else:
            q_all = None
    else:
        q_all = None
        k_all = None
        v_all = None
    for tile in tl.range(tl.program_id(0), num_tiles, num_programs, num_stages=1 if ONE_Q_BUFFER else None):
        if REVERSE_M:
            # Round r of the loop runs tiles [r G, r G + G) of the longest-first order, one a program. Dealt
            # straight, every round gives program 0 its heaviest tile and program G-1 its lightest, and that skew
            # adds up over the rounds: with 128-row causal tiles on the H200's 132 programs, the busiest program
            # has 6-12% more than the mean from S=4096 on (benchmarks/persistent_order_model.py), and the snake
            # measured 1.05-1.10x there (docs/history.md). Odd rounds deal backwards (a snake), so each pair of rounds
            # evens out; the last round, short when G does not divide the tiles, deals its few backwards too.
            first = tile - tl.program_id(0)
            in_round = tl.minimum(num_programs, num_tiles - first)
            dealt = tl.where((first // num_programs) % 2 == 1, first + in_round - 1 - tl.program_id(0), tile)
            if LPT_GROUP > 0:
                per_group = LPT_GROUP * num_m_blocks
                group = dealt // per_group
                heads = tl.minimum(LPT_GROUP, num_zh - group * LPT_GROUP)  # the last group may be short
                rank = dealt - group * per_group
                start_m = num_m_blocks - 1 - rank // heads
                off_zh = group * LPT_GROUP + rank % heads
            else:
                start_m = num_m_blocks - 1 - dealt // num_zh
                off_zh = dealt % num_zh
        else:
            start_m = tile % num_m_blocks
            off_zh = tile // num_m_blocks
        off_z, off_h, off_hk = seq_heads(off_zh, num_heads_q, group_size)
        q_base, k_base, v_base, o_base, q_start, sq, sk = seq_bases(
            Q, K, V, Out, cu_seqlens_q, cu_seqlens_k, off_z, off_h, off_hk, seqlen_q, seqlen_k,
            stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
            stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om, IS_VARLEN)
        if WARP_SPECIALIZE or start_m * BLOCK_M < sq:  # varlen: blocks past this sequence's end have nothing to do
            # Whole-tensor rows (int32: the launcher keeps those descriptors below 2^31 rows, as TMA counts them).
            _attn_fwd_tile(q_base, k_base, v_base, o_base, Lse, off_z, off_h, q_start, start_m, sq, sk,
                           stride_qm, stride_kn, stride_vn, stride_om, stride_lz, stride_lh, stride_lm, qk_scale,
                           q_all, k_all, v_all, off_zh * seqlen_q, off_zh // group_size * seqlen_k,
                           HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, IS_CAUSAL, PRE_LOAD_V, SPLIT_MASK, USE_TMA,
                           RETURN_LSE, WARP_SPECIALIZE, EVEN_K, WHOLE_DESC, BELOW_BAND)


def _set_tma_allocator():
    # Device-side tensor descriptors live in a small global scratch buffer that Triton asks the host for.
    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, dtype=torch.int8, device="cuda")

    triton.set_allocator(alloc)


_TMA_ALLOCATOR_SET = False


def _launch_options() -> frozenset:
    """Launch options the active NVIDIA backend accepts (empty when it cannot be told)."""
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return frozenset()
    return frozenset(CUDAOptions.__dataclass_fields__)


def _has_warp_specialize() -> bool:
    try:
        return "warp_specialize" in inspect.signature(tl.range.__init__).parameters
    except (TypeError, ValueError):
        return False


_HAS_WARP_SPECIALIZE = _has_warp_specialize()


def _check_support(config, q, interpreting: bool):
    """Refuse, with the reason, the knobs this Triton or this backend cannot honour: `validation.check_backend`
    decides, from what this module knows of its Triton."""
    check_backend(config, q, interpreting=interpreting, has_warp_specialize=_HAS_WARP_SPECIALIZE,
                  launch_options=_launch_options)


def _whole_rows(*tensors) -> bool:
    """Whether each dense tensor can be read as one [rows, D] matrix whose rows are (sequence, head, position) in
    order, with fewer rows than TMA's int32 coordinates reach: so the persistent kernel's whole-tensor descriptors
    see each head's rows where it looks for them."""
    return all(t.is_contiguous() and t.numel() // t.shape[-1] < 2**31 for t in tensors)


# In the interpreter a "persistent" grid of a few programs still makes each one loop over several tiles.
_INTERPRETER_PROGRAMS = 3
_RESIDENT: dict[tuple, int] = {}


def _resident_programs(args, kwargs, q, interpreting: bool) -> int:
    """How many programs of this compiled kernel fit on the GPU at once: SMs x blocks per SM, the latter limited
    by registers, shared memory and threads as the compiled binary uses them (cached per binary)."""
    if interpreting or not q.is_cuda:
        return _INTERPRETER_PROGRAMS
    # What tells binaries apart: dtype, LSE/varlen pointers present, strides' divisibility by 16, the constexprs.
    key = (q.device.index, q.dtype, args[4] is None, args[5] is None, *(s % 16 == 0 for s in args[7:22]),
           *kwargs.values())
    n = _RESIDENT.get(key)
    if n is None:
        compiled = _attn_fwd_persistent.warmup(*args, grid=(1,), **kwargs)
        compiled._init_handles()
        props = torch.cuda.get_device_properties(q.device)
        threads = compiled.metadata.num_warps * 32
        per_sm = [getattr(props, "max_threads_per_multi_processor", 2048) // threads, 32]
        regs = getattr(compiled, "n_regs", 0) or 0
        if regs:  # registers are handed out per warp in units of 256
            per_warp = -(-regs * 32 // 256) * 256
            per_sm.append(getattr(props, "regs_per_multiprocessor", 65536) // (per_warp * compiled.metadata.num_warps))
        smem = getattr(compiled.metadata, "shared", 0) or 0
        if smem:  # the driver reserves 1 KB of shared memory per block
            per_sm.append(getattr(props, "shared_memory_per_multiprocessor", 233472) // (smem + 1024))
        n = _RESIDENT[key] = props.multi_processor_count * max(1, min(per_sm))
    return n


def _scale_of(softmax_scale, head_dim: int) -> float:
    scale = softmax_scale if softmax_scale is not None else head_dim**-0.5
    # The kernel takes each row's max of the raw scores and scales it: that is the max of the scaled scores only
    # for a positive scale (as in flash-attention's kernels).
    if isinstance(scale, bool) or not (isinstance(scale, numbers.Real) and 0 < scale < float("inf")):
        raise ValueError(f"softmax_scale must be a positive finite number, got {softmax_scale!r}")
    return scale


def _layout(q, k, v, out, cu_seqlens_q, max_seqlen_q, max_seqlen_k, need_lse: bool):
    """(batch, hq, hkv, sq, sk, strides, lse): the problem's sizes, the (batch, head, row) strides of q, k, v, out
    and lse in that order (batch strides 0 for varlen: cu_seqlens place each sequence), and the float32 lse
    buffer, (B, Hq, Sq) dense or (Hq, total_q) varlen (None unless `need_lse`)."""
    if cu_seqlens_q is not None:
        hq, hkv = q.shape[1], k.shape[1]
        batch, sq, sk = cu_seqlens_q.numel() - 1, max_seqlen_q, max_seqlen_k
        lse = torch.empty((hq, q.shape[0]), device=q.device, dtype=torch.float32) if need_lse else None
        strides = [(0, t.stride(1), t.stride(0)) for t in (q, k, v, out)]
        strides.append((0, lse.stride(0), lse.stride(1)) if need_lse else (0, 0, 0))
    else:
        (batch, hq, sq, _), hkv, sk = q.shape, k.shape[1], k.shape[2]
        lse = torch.empty((batch, hq, sq), device=q.device, dtype=torch.float32) if need_lse else None
        strides = [(t.stride(0), t.stride(1), t.stride(2)) for t in (q, k, v, out)]
        strides.append(tuple(lse.stride()) if need_lse else (0, 0, 0))
    return batch, hq, hkv, sq, sk, tuple(x for st in strides for x in st), lse


def _launch_options_for(config, q, interpreting: bool) -> dict:
    """num_warps, num_stages and the backend's own options of `config`, after refusing (with the reason) what this
    Triton or backend cannot honour; sets up the TMA allocator on first use."""
    global _TMA_ALLOCATOR_SET
    if config["USE_TMA"] and q.is_cuda and not _TMA_ALLOCATOR_SET:
        _set_tma_allocator()
        _TMA_ALLOCATOR_SET = True
    opts = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    if torch.version.hip:
        opts.update({name: config[name] for name in AMD_ONLY_KNOBS if name in config})
    elif config.get("maxnreg"):
        opts["maxnreg"] = config["maxnreg"]
    if config.get("WARP_SPECIALIZE") or config.get("maxnreg"):  # the knobs validation.check_backend looks at
        _check_support(config, q, interpreting)
    return opts


@contextlib.contextmanager
def _compile_failures_as_invalid_config():
    """Triton's resource and compile errors raised inside the block become InvalidConfig with the reason; any other
    error (a fault on the device) is not the config's to answer for and passes through."""
    try:
        yield
    except triton.runtime.errors.OutOfResources as e:
        raise InvalidConfig(f"out of resources: {e}") from e
    except triton.compiler.errors.CompilationError as e:
        raise InvalidConfig(f"compile error: {str(e).strip().splitlines()[-1]}") from e
    except (subprocess.CalledProcessError, _PTXAS_ERROR) as e:  # the assembler failed (or crashed) on this config
        raise InvalidConfig(f"compile error in the assembler: {str(e).strip().splitlines()[0][:300]}") from e
    except RuntimeError as e:
        # An MLIR pass that gives up on a config (warp specialization is the usual one) fails the whole pass
        # pipeline with a bare RuntimeError; a CUDA launch refused for resources (registers) is one too.
        msg = str(e)
        if "PassManager::run failed" in msg:
            raise InvalidConfig(f"compile error: a compiler pass failed on this config ({msg.strip()[:200]})") from e
        if "too many resources requested for launch" in msg or "CUDA_ERROR_OUT_OF_RESOURCES" in msg:
            raise InvalidConfig(f"out of resources at launch: {msg.strip()[:200]}") from e
        raise


def flash_attn_fwd(q, k, v, config, *, causal=False, softmax_scale=None, cu_seqlens_q=None, cu_seqlens_k=None,
                   max_seqlen_q=None, max_seqlen_k=None, return_lse=False, out=None, compile_only=False):
    """Launch the kernel with an explicit, already validated config (see `raytune_attn.validation.prepare`).

    Dense: q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D). Varlen: q (total_q, Hq, D), k and v (total_k, Hkv, D) with
    int32 cu_seqlens_q/k of length B+1 and max_seqlen_q/k. The last dimension must be contiguous. Returns `out`
    (and the natural-log lse, float32, (B, Hq, Sq) dense or (Hq, total_q) varlen, when `return_lse`).
    Triton's resource and compile errors come back as InvalidConfig.

    `compile_only` compiles and loads the binary without launching it (a compile pool warms Triton's cache so
    that the GPU never waits on a compile) and returns the compiled kernel (None in the interpreter).
    """
    varlen = cu_seqlens_q is not None
    head_dim = q.shape[-1]
    block_d = max(16, triton.next_power_of_2(head_dim))
    scale = _scale_of(softmax_scale, head_dim)
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    # BAND_LAUNCH: the causal diagonal band by a second launch (causal_band.py), which merges it into the main
    # launch's output by the log-sum-exp: the main launch stores one whether or not the caller asked for it.
    band = bool(causal) and config.get("BAND_LAUNCH", False)
    need_lse = return_lse or band
    batch, hq, hkv, sq, sk, strides, lse = _layout(q, k, v, out, cu_seqlens_q, max_seqlen_q, max_seqlen_k, need_lse)
    interpreting = type(_attn_fwd).__name__ == "InterpretedFunction"
    launch_opts = _launch_options_for(config, q, interpreting)

    num_m_blocks = triton.cdiv(sq, config["BLOCK_M"])
    num_tiles = num_m_blocks * batch * hq
    if num_tiles == 0 or q.numel() == 0:  # no tile, or (varlen) no token: nothing to compute
        return (out, lse) if return_lse else out
    even_k = not varlen and sk % config["BLOCK_N"] == 0
    args = (q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, *strides, sq, sk, hq, hq // hkv, scale * LOG2E)
    kwargs = dict(
        HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
        IS_CAUSAL=bool(causal), IS_VARLEN=varlen, PRE_LOAD_V=config["PRE_LOAD_V"],
        SPLIT_MASK=config["SPLIT_MASK"], USE_TMA=config["USE_TMA"], RETURN_LSE=need_lse,
        WARP_SPECIALIZE=config.get("WARP_SPECIALIZE", False), REVERSE_M=config.get("REVERSE_M", False),
        # Dense keys in whole blocks: no block is ragged (one binary more per config, not one per length).
        EVEN_K=even_k,
        **launch_opts,
    )
    if band:
        kwargs["BELOW_BAND"] = True
    base_args = args
    if config.get("PERSISTENT", False):
        kernel, args = _attn_fwd_persistent, (*args, num_m_blocks, num_tiles)
        kwargs["WHOLE_DESC"] = config["USE_TMA"] and even_k and _whole_rows(q, k, v)
        kwargs["ONE_Q_BUFFER"] = config.get("ONE_Q_BUFFER", False)
        kwargs["LPT_GROUP"] = config.get("LPT_GROUP", 0)
    else:
        kernel, grid = _attn_fwd, (num_m_blocks, batch * hq)
    band_kw = dict(head_dim=head_dim, block_d=block_d, config=config, varlen=varlen, return_lse=bool(return_lse))
    with _compile_failures_as_invalid_config():
        if compile_only:
            if interpreting:  # the interpreter compiles nothing
                return None
            compiled = kernel.warmup(*args, grid=(1,), **kwargs)
            compiled._init_handles()  # loading the binary is where shared-memory overflows surface
            if band:
                causal_band.band_launch(base_args, grid=(1, 1), compile_only=True, **band_kw)
            return compiled
        if kernel is _attn_fwd_persistent:
            grid = (min(num_tiles, _resident_programs(args, kwargs, q, interpreting)),)
        kernel[grid](*args, **kwargs)
        if band:
            grid = causal_band.band_grid(sq, batch, hq, config, head_dim)
            causal_band.band_launch(base_args, grid=grid, **band_kw)
    return (out, lse) if return_lse else out
