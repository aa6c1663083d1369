"""Triton attention over a paged KV cache: one kernel family for decode rows, small query groups and prefill
chunks over a cached prefix, in any mix.

Layout (vLLM's and flash-attn's paged KV): k_cache, v_cache (num_blocks, block_size, Hkv, D); sequence z's key
j lives in block `block_table[z, j // block_size]` at slot `j % block_size`.

Programs. The grid is (query tiles, Hkv, NUM_SEGMENTS), all sized from upper bounds known on the host, so the
launch reads nothing back from the device:
- Query tiles are numbered across the batch: sequence z's tiles start at cu_seqlens_q[z] // BLOCK_Q + z, so
  total_q // BLOCK_Q + num_seqs numbers are enough whatever the mix; a program finds its sequence by a binary
  search over cu_seqlens_q, and numbers that fall between two sequences' tiles exit.
- GQA packing: a tile's BLOCK_M rows are (query token, query head) pairs, the `GROUP` query heads of one KV
  head side by side, so each K/V tile is read once for all of them (decode is bound by reading the cache).
- Split-KV: the keys a query tile needs are cut into NUM_SEGMENTS ranges of whole key tiles, each a program of
  its own; with more than one, each writes its unnormalised accumulator, row max and row sum, and
  `_paged_reduce` combines them. Empty segments still write (max -inf, sum 0), so the reduce reads only
  what was written.

Scores are kept in the log2 domain (the scale folds log2(e)), as in `flash_attn.py`. The causal mask is aligned
bottom-right: query i of a sequence with q_len queries and n = seqused_k keys sees keys j <= i + n - q_len.

Reads. Block ids are loaded only for keys below the sequence's horizon (its seqused_k, capped at the table's
capacity), and K/V rows only for those keys, so unused blocks and slots are never touched. A block id outside
[0, num_blocks) is never dereferenced: its keys are dropped, and `tl.device_assert` reports it when Triton's
debug mode is on (TRITON_DEBUG=1); the launcher checks ids on the host where that costs no sync.
"""

from __future__ import annotations

import subprocess

import torch
import triton
import triton.language as tl

from raytune_attn.config import InvalidConfig
from raytune_attn.device import interpreter_enabled

LOG2E = 1.4426950408889634
_PTXAS_ERROR = getattr(triton.runtime.errors, "PTXASError", subprocess.CalledProcessError)


@triton.jit
def _find_seq(cu_seqlens_q, tile, num_seqs, BLOCK_Q: tl.constexpr):
    """The sequence whose query tiles include global tile number `tile`: the last z with
    cu_seqlens_q[z] // BLOCK_Q + z <= tile (binary search; a few loads of a small, cached array)."""
    lo = tl.full((), 0, dtype=tl.int32)
    hi = tl.full((), 0, dtype=tl.int32) + num_seqs
    while lo < hi:
        mid = (lo + hi) // 2
        first = tl.load(cu_seqlens_q + mid) // BLOCK_Q + mid
        lo = tl.where(first <= tile, mid + 1, lo)
        hi = tl.where(first <= tile, hi, mid)
    return lo - 1


@triton.jit
def _key_range(seq_len, q_len, kv_lo, first_q, last_q, IS_CAUSAL: tl.constexpr):
    """[lo, hi): the keys some row of queries [first_q, last_q] may see."""
    if IS_CAUSAL:
        hi = tl.minimum(seq_len, last_q + seq_len - q_len + 1)
    else:
        hi = seq_len
    return kv_lo, tl.maximum(hi, kv_lo)


@triton.jit
def _segment_tiles(lo, hi, seg, BLOCK_N: tl.constexpr, NUM_SEGMENTS: tl.constexpr):
    """The key tiles [t_lo, t_hi) of segment `seg` of the key range [lo, hi)."""
    first = lo // BLOCK_N
    n_tiles = (hi + BLOCK_N - 1) // BLOCK_N - first
    per_seg = (n_tiles + NUM_SEGMENTS - 1) // NUM_SEGMENTS
    t_lo = first + seg * per_seg
    return t_lo, tl.minimum(t_lo + per_seg, first + n_tiles)


# Sizes are not specialized on: one binary serves every batch, cache and table size (the block table's row stride
# is its width, 16-divisible or not), so a compile process can build it from a small twin of the problem.
@triton.jit(do_not_specialize=["num_seqs", "num_blocks", "page", "max_pages", "stride_bt"])
def _paged_fwd(Q, K, V, Out, Part, PartM, PartL, block_table, seqused_k, cu_seqlens_q, kv_start,
               num_seqs, num_blocks, page, max_pages, qk_scale,
               stride_qt, stride_qh, stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
               stride_ot, stride_oh, stride_bt,
               HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, GROUP: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_Q: tl.constexpr, BLOCK_N: tl.constexpr, NUM_SEGMENTS: tl.constexpr,
               IS_CAUSAL: tl.constexpr, HAS_KV_START: tl.constexpr, TILE_IN_PAGE: tl.constexpr,
               ONE_TILE_PER_SEQ: tl.constexpr):
    tile = tl.program_id(0)
    kvh = tl.program_id(1)
    seg = tl.program_id(2)
    if ONE_TILE_PER_SEQ:  # no sequence has more queries than a tile holds (decode): tile z is sequence z's
        z = tile
    else:
        z = _find_seq(cu_seqlens_q, tile, num_seqs, BLOCK_Q)
    q_start = tl.load(cu_seqlens_q + z)
    q_len = tl.load(cu_seqlens_q + z + 1) - q_start
    if ONE_TILE_PER_SEQ:
        local = 0
    else:
        local = tile - (q_start // BLOCK_Q + z)
    if local * BLOCK_Q < q_len:  # numbers between two sequences' tiles have nothing to do
        # Never past the table's capacity, whatever seqused_k says: no block outside the table is read.
        seq_len = tl.minimum(tl.load(seqused_k + z), max_pages * page)
        kv_lo = tl.maximum(tl.load(kv_start + z), 0) if HAS_KV_START else 0
        offs_m = tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        qpos = local * BLOCK_Q + offs_m // GROUP
        head = kvh * GROUP + offs_m % GROUP
        row_ok = (offs_m < BLOCK_Q * GROUP) & (qpos < q_len)
        tok = (q_start + qpos).to(tl.int64)
        q = tl.load(Q + tok[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :],
                    mask=row_ok[:, None] & (offs_d[None, :] < HEAD_DIM), other=0.0)
        last_q = tl.minimum(local * BLOCK_Q + BLOCK_Q, q_len) - 1
        lo, hi = _key_range(seq_len, q_len, kv_lo, local * BLOCK_Q, last_q, IS_CAUSAL)
        t_lo, t_hi = _segment_tiles(lo, hi, seg, BLOCK_N, NUM_SEGMENTS)
        acc, l_i, m_i = _key_loop(q, K, V, block_table + z.to(tl.int64) * stride_bt, t_lo, t_hi, lo, hi,
                                  qpos + seq_len - q_len, kvh, page, num_blocks, qk_scale,
                                  stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
                                  HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, IS_CAUSAL, TILE_IN_PAGE)
        _store(Out, Part, PartM, PartL, acc, l_i, m_i, tok, head, seg, row_ok, offs_d, stride_ot, stride_oh,
               GROUP * tl.num_programs(1), HEAD_DIM, BLOCK_D, NUM_SEGMENTS)


@triton.jit
def _key_loop(q, K, V, bt_row, t_lo, t_hi, lo, hi, horizon, kvh, page, num_blocks, qk_scale,
              stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
              HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              IS_CAUSAL: tl.constexpr, TILE_IN_PAGE: tl.constexpr):
    """Key tiles [t_lo, t_hi) folded into a fresh online softmax; `horizon` is each row's last visible key.
    Rows that see no visible key stay at (acc 0, l 0, m -inf).

    The loop body calls no other jit function: the interpreter re-patches triton.language on every nested
    call (about a millisecond), which would dominate the tests' run time."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d[None, :] < HEAD_DIM
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    k_head = K + kvh.to(tl.int64) * stride_kh
    v_head = V + kvh.to(tl.int64) * stride_vh
    # Each tile's block ids are loaded one iteration ahead (loop-carried), so a K/V load's address never waits
    # on a load of its own iteration and the pipeliner can issue it stages early.
    keys = t_lo * BLOCK_N + offs_n
    if TILE_IN_PAGE:
        blk = tl.load(bt_row + (t_lo * BLOCK_N) // page, mask=t_lo < t_hi, other=0).to(tl.int64)
    else:
        blk = tl.load(bt_row + keys // page, mask=(keys < hi) & (keys >= lo), other=0).to(tl.int64)
    for t in range(t_lo, t_hi):
        start_n = t * BLOCK_N
        keys = start_n + offs_n
        valid = (keys < hi) & (keys >= lo)
        if TILE_IN_PAGE:
            # The tile lies inside one page (the page size is a multiple of BLOCK_N, or the sequence is one
            # page): one block id for the whole tile, contiguous slots.
            slots = (start_n - (start_n // page) * page + offs_n).to(tl.int64)
            blk_n = blk + tl.full([BLOCK_N], 0, dtype=tl.int64)
        else:
            slots = (keys % page).to(tl.int64)
            blk_n = blk
        in_cache = (blk_n >= 0) & (blk_n < num_blocks)
        tl.device_assert(in_cache | ~valid, "block_table holds a block id outside the cache")
        valid = valid & in_cache
        k = tl.load(k_head + (blk_n * stride_kb + slots * stride_ks)[:, None] + offs_d[None, :],
                    mask=valid[:, None] & d_ok, other=0.0)
        if TILE_IN_PAGE:
            blk = tl.load(bt_row + (start_n + BLOCK_N) // page, mask=t + 1 < t_hi, other=0).to(tl.int64)
        else:
            nxt = keys + BLOCK_N
            blk = tl.load(bt_row + nxt // page, mask=(nxt < hi) & (nxt >= lo), other=0).to(tl.int64)
        qk = tl.dot(q, tl.trans(k))
        visible = valid[None, :]
        if IS_CAUSAL:
            visible = visible & (keys[None, :] <= horizon[:, None])
        qk = tl.where(visible, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)  # -inf - -inf would be NaN
        p = tl.math.exp2(qk * qk_scale - m_sub[:, None])
        alpha = tl.math.exp2(m_i - m_sub)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_head + (blk_n * stride_vb + slots * stride_vs)[:, None] + offs_d[None, :],
                    mask=valid[:, None] & d_ok, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _store(Out, Part, PartM, PartL, acc, l_i, m_i, tok, head, seg, row_ok, offs_d, stride_ot, stride_oh,
           num_heads, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, NUM_SEGMENTS: tl.constexpr):
    """One segment: the normalised output (rows that saw no key output 0). Several: this segment's partials."""
    if NUM_SEGMENTS == 1:
        l_safe = tl.where(l_i == 0.0, 1.0, l_i)
        out = acc / l_safe[:, None]
        ptrs = Out + tok[:, None] * stride_ot + head[:, None] * stride_oh + offs_d[None, :]
        tl.store(ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None] & (offs_d[None, :] < HEAD_DIM))
    else:
        slot = (tok * num_heads + head) * NUM_SEGMENTS + seg
        tl.store(PartM + slot, m_i, mask=row_ok)
        tl.store(PartL + slot, l_i, mask=row_ok)
        tl.store(Part + slot[:, None] * BLOCK_D + offs_d[None, :], acc, mask=row_ok[:, None])


@triton.jit
def _paged_reduce(Out, Part, PartM, PartL, stride_ot, stride_oh, num_heads,
                  HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
                  NUM_SEGMENTS: tl.constexpr):
    """One (token, KV head): for each of its GROUP query heads, rescale every segment's partials to their
    common max and normalise once."""
    tok = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * GROUP + tl.arange(0, GROUP_PAD)
    h_ok = tl.arange(0, GROUP_PAD) < GROUP
    slots = (tok * num_heads + heads[:, None]) * NUM_SEGMENTS + tl.arange(0, NUM_SEGMENTS)[None, :]
    m = tl.load(PartM + slots, mask=h_ok[:, None], other=float("-inf"))
    l_seg = tl.load(PartL + slots, mask=h_ok[:, None], other=0.0)
    m_max = tl.max(m, 1)
    w = tl.math.exp2(m - tl.where(m_max == float("-inf"), 0.0, m_max)[:, None])  # a segment that saw no key: 0
    l_sum = tl.sum(l_seg * w, 1)
    offs_d = tl.arange(0, BLOCK_D)
    acc = tl.load(Part + slots[:, :, None] * BLOCK_D + offs_d[None, None, :], mask=h_ok[:, None, None], other=0.0)
    out = tl.sum(acc * w[:, :, None], 1) / tl.where(l_sum == 0.0, 1.0, l_sum)[:, None]
    ptrs = Out + tok * stride_ot + heads[:, None] * stride_oh + offs_d[None, :]
    tl.store(ptrs, out.to(Out.dtype.element_ty), mask=h_ok[:, None] & (offs_d[None, :] < HEAD_DIM))


def paged_attn_fwd(q, k_cache, v_cache, out, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, config, *,
                   causal, scale, kv_start=None, compile_only=False):
    """Launch with checked inputs and a validated config (`paged.paged_attention` does both). Any page size
    works here; `kv_start` (int32 per sequence, optional) hides each sequence's keys below it (left padding).
    The grid comes from shapes and max_seqlen_q only: no value is read back from the device.
    `compile_only` compiles and loads the binaries without launching them (the tuner's compile pool warms
    Triton's cache beside a GPU that is timing); it returns the main kernel's (None in the interpreter)."""
    total_q, hq, head_dim = q.shape
    num_blocks, page, hkv, _ = k_cache.shape
    num_seqs, max_pages = block_table.shape
    group = hq // hkv
    block_q = config["BLOCK_M"] // group
    # Decode-like batches (every sequence within one tile) take one program per sequence; otherwise the global
    # tile numbering needs total_q // BLOCK_Q + num_seqs numbers (see the module docstring).
    one_tile = max_seqlen_q <= block_q
    tiles = num_seqs if one_tile else total_q // block_q + num_seqs
    segments = config["NUM_SEGMENTS"]
    if tiles == 0 or total_q == 0:
        return out
    block_d = max(16, triton.next_power_of_2(head_dim))
    part = part_m = part_l = out
    if segments > 1:
        part = torch.empty((total_q, hq, segments, block_d), device=q.device, dtype=torch.float32)
        part_m = torch.empty((total_q, hq, segments), device=q.device, dtype=torch.float32)
        part_l = torch.empty((total_q, hq, segments), device=q.device, dtype=torch.float32)
    launch = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    tile_in_page = max_pages == 1 or page % config["BLOCK_N"] == 0
    fwd_args = (q, k_cache, v_cache, out, part, part_m, part_l, block_table, seqused_k, cu_seqlens_q,
                kv_start if kv_start is not None else seqused_k,
                num_seqs, num_blocks, page, max_pages, scale * LOG2E,
                q.stride(0), q.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3],
                out.stride(0), out.stride(1), block_table.stride(0))
    fwd_kw = dict(HEAD_DIM=head_dim, BLOCK_D=block_d, GROUP=group, BLOCK_M=config["BLOCK_M"], BLOCK_Q=block_q,
                  BLOCK_N=config["BLOCK_N"], NUM_SEGMENTS=segments, IS_CAUSAL=bool(causal),
                  HAS_KV_START=kv_start is not None, TILE_IN_PAGE=tile_in_page, ONE_TILE_PER_SEQ=one_tile, **launch)
    red_args = (out, part, part_m, part_l, out.stride(0), out.stride(1), hq)
    red_kw = dict(HEAD_DIM=head_dim, BLOCK_D=block_d, GROUP=group, GROUP_PAD=triton.next_power_of_2(group),
                  NUM_SEGMENTS=segments, num_warps=4)
    try:
        if compile_only:
            return _compile(fwd_args, fwd_kw, red_args, red_kw, segments > 1)
        _paged_fwd[(tiles, hkv, segments)](*fwd_args, **fwd_kw)
        if segments > 1:
            _paged_reduce[(total_q, hkv)](*red_args, **red_kw)
    except triton.runtime.errors.OutOfResources as e:
        raise InvalidConfig(f"out of resources: {e}") from e
    except triton.compiler.errors.CompilationError as e:
        raise InvalidConfig(f"compile error: {str(e).strip().splitlines()[-1]}") from e
    except (subprocess.CalledProcessError, _PTXAS_ERROR) as e:
        raise InvalidConfig(f"compile error in the assembler: {str(e).strip().splitlines()[0][:300]}") from e
    return out


def _compile(fwd_args, fwd_kw, red_args, red_kw, reduce: bool):
    if interpreter_enabled():  # the interpreter compiles nothing
        return None
    compiled = _paged_fwd.warmup(*fwd_args, grid=(1,), **fwd_kw)
    compiled._init_handles()  # loading the binary is where shared-memory overflows surface
    if reduce:
        _paged_reduce.warmup(*red_args, grid=(1,), **red_kw)._init_handles()
    return compiled
