"""The device functions of one attention tile that both forward launches share (flash_attn.py's main kernels and
causal_band.py's band kernel): where a (sequence, head)'s rows start, the key loop that folds key blocks into the
online softmax, and each row's log-sum-exp. Scores are in the log2 domain (flash_attn.py's docstring says why)."""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def load_kv_tile(base, desc, desc_row, start_n, offs_n, offs_d, stride_n, seqlen_k,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, MASK_N: tl.constexpr, USE_TMA: tl.constexpr):
    """A [BLOCK_N, BLOCK_D] tile of K or V starting at key `start_n` (row `desc_row + start_n` of the descriptor);
    out-of-range rows and padded head-dim columns read as zero (zero keys give finite scores that the caller masks;
    zero value columns are dropped at the store)."""
    if USE_TMA:
        # The copy engine zero-fills rows and columns past the descriptor's shape itself: a per-sequence descriptor
        # ends at the sequence's last key; a whole-tensor one is used only where no block runs past it.
        tile = desc.load([desc_row + start_n, 0])
    else:
        ptrs = base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :]
        if MASK_N:
            if HEAD_DIM == BLOCK_D:
                tile = tl.load(ptrs, mask=(start_n + offs_n)[:, None] < seqlen_k, other=0.0)
            else:
                mask = ((start_n + offs_n)[:, None] < seqlen_k) & (offs_d[None, :] < HEAD_DIM)
                tile = tl.load(ptrs, mask=mask, other=0.0)
        else:
            if HEAD_DIM == BLOCK_D:
                tile = tl.load(ptrs)
            else:
                tile = tl.load(ptrs, mask=offs_d[None, :] < HEAD_DIM, other=0.0)
    return tile


@triton.jit
def attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, kv_row, lo, hi, offs_m, offs_n, offs_d,
                   stride_kn, stride_vn, seqlen_k, diag, qk_scale,
                   HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                   MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr, PRE_LOAD_V: tl.constexpr, USE_TMA: tl.constexpr,
                   WARP_SPECIALIZE: tl.constexpr, EVEN_K: tl.constexpr):
    """Fold key blocks [lo, hi) into the running (acc, l, m). MASKED blocks apply the causal mask and (unless
    EVEN_K: no block runs past the keys) the sequence-end mask; unmasked blocks are known to be fully visible to
    every row of the tile, which saves the compare, the select and the -inf guards in the hot loop.

    WARP_SPECIALIZE asks Triton to split the loop into producer (loads) and consumer (MMA + softmax) warp groups;
    with it off the loop is the plain `range` one (tl.range sets no attribute for a false flag: same IR)."""
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = load_kv_tile(k_base, k_desc, kv_row, start_n, offs_n, offs_d, stride_kn, seqlen_k,
                         HEAD_DIM, BLOCK_D, MASKED, USE_TMA)
        if PRE_LOAD_V:
            v = load_kv_tile(v_base, v_desc, kv_row, start_n, offs_n, offs_d, stride_vn, seqlen_k,
                             HEAD_DIM, BLOCK_D, MASKED, USE_TMA)
        qk = tl.dot(q, tl.trans(k))
        if MASKED:
            cols = start_n + offs_n
            if IS_CAUSAL:
                # The row's horizon is added per row, so each score costs one compare.
                visible = cols[None, :] <= (offs_m + diag)[:, None]
                if not EVEN_K:
                    visible = visible & (cols[None, :] < seqlen_k)
            else:
                visible = cols[None, :] < seqlen_k
            # Masking the raw score, before the scale, leaves the scale to the same fused multiply-add as in the
            # unmasked step: qk_scale > 0 (the launcher checks), so -inf * qk_scale = -inf and the row max of the
            # scaled scores is the scaled row max.
            qk = tl.where(visible, qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            # A row that has seen no visible key yet keeps m = -inf; subtracting -inf from -inf would give NaN,
            # so subtract 0 instead: exp2(-inf - 0) = 0 leaves that row's acc and l at zero, as they should be.
            m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.math.exp2(qk * qk_scale - m_sub[:, None])
            alpha = tl.math.exp2(m_i - m_sub)
        else:
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - m_new[:, None])
            alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if not PRE_LOAD_V:
            v = load_kv_tile(v_base, v_desc, kv_row, start_n, offs_n, offs_d, stride_vn, seqlen_k,
                             HEAD_DIM, BLOCK_D, MASKED, USE_TMA)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def natural_lse(m, total):
    """Each row's log-sum-exp in natural log from its running max `m` and sum `total` in log2 units:
    ln(sum exp(x * scale)) = (m + log2 total) * ln 2; -inf for a row that saw no key (total = 0)."""
    safe = tl.where(total == 0.0, 1.0, total)
    return tl.where(total == 0.0, float("-inf"), (m + tl.math.log2(safe)) * 0.6931471805599453)


@triton.jit
def seq_heads(off_zh, num_heads_q, group_size):
    """(sequence, query head, key/value head) of grid row `off_zh` over batch x Hq, as int64 for the pointer
    arithmetic (B*H*S*D overflows int32 for large inputs); GQA/MQA: group_size query heads share one K/V head."""
    off_h = off_zh % num_heads_q
    return (off_zh // num_heads_q).to(tl.int64), off_h.to(tl.int64), (off_h // group_size).to(tl.int64)


@triton.jit
def seq_bases(Q, K, V, Out, cu_seqlens_q, cu_seqlens_k, off_z, off_h, off_hk, seqlen_q, seqlen_k,
              stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
              stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om, IS_VARLEN: tl.constexpr):
    """Base pointers of one (sequence, query head) and its lengths (varlen: read from the offsets)."""
    if IS_VARLEN:
        # Packed layout: sequence z occupies tokens [cu[z], cu[z+1]); the batch strides are 0.
        q_start = tl.load(cu_seqlens_q + off_z).to(tl.int64)
        seqlen_q = (tl.load(cu_seqlens_q + off_z + 1) - q_start).to(tl.int32)
        k_start = tl.load(cu_seqlens_k + off_z).to(tl.int64)
        seqlen_k = (tl.load(cu_seqlens_k + off_z + 1) - k_start).to(tl.int32)
        q_base = Q + off_h * stride_qh + q_start * stride_qm
        k_base = K + off_hk * stride_kh + k_start * stride_kn
        v_base = V + off_hk * stride_vh + k_start * stride_vn
        o_base = Out + off_h * stride_oh + q_start * stride_om
    else:
        q_start = 0
        q_base = Q + off_z * stride_qz + off_h * stride_qh
        k_base = K + off_z * stride_kz + off_hk * stride_kh
        v_base = V + off_z * stride_vz + off_hk * stride_vh
        o_base = Out + off_z * stride_oz + off_h * stride_oh
    return q_base, k_base, v_base, o_base, q_start, seqlen_q, seqlen_k
