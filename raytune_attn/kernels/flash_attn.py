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

import subprocess

import torch
import triton
import triton.language as tl

from raytune_attn.config import AMD_ONLY_KNOBS, InvalidConfig

LOG2E = 1.4426950408889634
_PTXAS_ERROR = getattr(triton.runtime.errors, "PTXASError", subprocess.CalledProcessError)


@triton.jit
def _load_kv_tile(base, desc, start_n, offs_n, offs_d, stride_n, seqlen_k,
                  HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, MASK_N: tl.constexpr, USE_TMA: tl.constexpr):
    """A [BLOCK_N, BLOCK_D] tile of K or V starting at key `start_n`; out-of-range rows and padded head-dim
    columns read as zero (zero keys give finite scores that the caller masks; zero value columns are dropped
    at the store)."""
    if USE_TMA:
        # The descriptor's shape is [seqlen_k, HEAD_DIM], so the copy engine zero-fills both edges itself.
        tile = desc.load([start_n, 0])
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
def _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, lo, hi, offs_m, offs_n, offs_d,
                    stride_kn, stride_vn, seqlen_k, diag, qk_scale,
                    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                    MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr, PRE_LOAD_V: tl.constexpr, USE_TMA: tl.constexpr):
    """Fold key blocks [lo, hi) into the running (acc, l, m). MASKED blocks apply the causal and sequence-end
    masks; unmasked blocks are known to be fully visible to every row of the tile, which saves the compare,
    the select and the -inf guards in the hot loop."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = _load_kv_tile(k_base, k_desc, start_n, offs_n, offs_d, stride_kn, seqlen_k,
                          HEAD_DIM, BLOCK_D, MASKED, USE_TMA)
        if PRE_LOAD_V:
            v = _load_kv_tile(v_base, v_desc, start_n, offs_n, offs_d, stride_vn, seqlen_k,
                              HEAD_DIM, BLOCK_D, MASKED, USE_TMA)
        qk = tl.dot(q, tl.trans(k))
        if MASKED:
            cols = start_n + offs_n
            visible = cols[None, :] < seqlen_k
            if IS_CAUSAL:
                visible = visible & (cols[None, :] <= offs_m[:, None] + diag)
            qk = tl.where(visible, qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            # A row that has seen no visible key yet keeps m = -inf; subtracting -inf from -inf would give NaN,
            # so subtract 0 instead: exp2(-inf - 0) = 0 leaves that row's acc and l at zero, as they should be.
            m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.math.exp2(qk - m_sub[:, None])
            alpha = tl.math.exp2(m_i - m_sub)
        else:
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - m_new[:, None])
            alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if not PRE_LOAD_V:
            v = _load_kv_tile(v_base, v_desc, start_n, offs_n, offs_d, stride_vn, seqlen_k,
                              HEAD_DIM, BLOCK_D, MASKED, USE_TMA)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


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
              SPLIT_MASK: tl.constexpr, USE_TMA: tl.constexpr, RETURN_LSE: tl.constexpr):
    start_m = tl.program_id(0)
    off_zh = tl.program_id(1)
    off_z = off_zh // num_heads_q
    off_h = off_zh % num_heads_q
    off_hk = off_h // group_size  # GQA/MQA: group_size query heads share one key/value head

    # int64 offsets: B*H*S*D overflows int32 for large inputs.
    off_z = off_z.to(tl.int64)
    off_h = off_h.to(tl.int64)
    off_hk = off_hk.to(tl.int64)
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
    if start_m * BLOCK_M >= seqlen_q:
        return

    if USE_TMA:
        k_desc = tl.make_tensor_descriptor(k_base, shape=[seqlen_k, HEAD_DIM], strides=[stride_kn, 1],
                                           block_shape=[BLOCK_N, BLOCK_D])
        v_desc = tl.make_tensor_descriptor(v_base, shape=[seqlen_k, HEAD_DIM], strides=[stride_vn, 1],
                                           block_shape=[BLOCK_N, BLOCK_D])
    else:
        k_desc = None
        v_desc = None

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    q_mask = (offs_m[:, None] < seqlen_q) & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :], mask=q_mask, other=0.0)

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
    if SPLIT_MASK:
        # Whole blocks below the diagonal and inside the sequence need no mask; the rest (the diagonal band and
        # a ragged last block) go through the masked loop.
        n_full = tl.maximum(full_end, 0) // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, 0, n_full,
                                        offs_m, offs_n, offs_d, stride_kn, stride_vn, seqlen_k, diag, qk_scale,
                                        HEAD_DIM, BLOCK_N, BLOCK_D, False, IS_CAUSAL, PRE_LOAD_V, USE_TMA)
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, n_full, hi,
                                        offs_m, offs_n, offs_d, stride_kn, stride_vn, seqlen_k, diag, qk_scale,
                                        HEAD_DIM, BLOCK_N, BLOCK_D, True, IS_CAUSAL, PRE_LOAD_V, USE_TMA)
    else:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, 0, hi,
                                        offs_m, offs_n, offs_d, stride_kn, stride_vn, seqlen_k, diag, qk_scale,
                                        HEAD_DIM, BLOCK_N, BLOCK_D, True, IS_CAUSAL, PRE_LOAD_V, USE_TMA)

    # Rows that saw no key have l = 0 and acc = 0: divide by 1 so they output 0 rather than 0/0.
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_safe[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :], out.to(Out.dtype.element_ty), mask=q_mask)
    if RETURN_LSE:
        # Back from log2 units to natural log: lse = ln(sum exp(x * scale)) = (m + log2 l) * ln 2.
        lse = tl.where(l_i == 0.0, float("-inf"), (m_i + tl.math.log2(l_safe)) * 0.6931471805599453)
        l_base = Lse + off_z * stride_lz + off_h * stride_lh + q_start * stride_lm
        tl.store(l_base + offs_m * stride_lm, lse, mask=offs_m < seqlen_q)


def _set_tma_allocator():
    # Device-side tensor descriptors live in a small global scratch buffer that Triton asks the host for.
    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, dtype=torch.int8, device="cuda")

    triton.set_allocator(alloc)


_TMA_ALLOCATOR_SET = False


def flash_attn_fwd(q, k, v, config, *, causal=False, softmax_scale=None, cu_seqlens_q=None, cu_seqlens_k=None,
                   max_seqlen_q=None, max_seqlen_k=None, return_lse=False, out=None, compile_only=False):
    """Launch the kernel with an explicit, already validated config (see `raytune_attn.config.validate_config`).

    Dense: q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D). Varlen: q (total_q, Hq, D), k and v (total_k, Hkv, D) with
    int32 cu_seqlens_q/k of length B+1 and max_seqlen_q/k. The last dimension must be contiguous. Returns `out`
    (and the natural-log lse, float32, (B, Hq, Sq) dense or (Hq, total_q) varlen, when `return_lse`).
    Triton's resource and compile errors come back as InvalidConfig.

    `compile_only` compiles and loads the binary without launching it (a compile pool warms Triton's cache so
    that the GPU never waits on a compile) and returns the compiled kernel (None in the interpreter).
    """
    global _TMA_ALLOCATOR_SET
    varlen = cu_seqlens_q is not None
    head_dim = q.shape[-1]
    block_d = max(16, triton.next_power_of_2(head_dim))
    scale = softmax_scale if softmax_scale is not None else head_dim**-0.5
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)

    if varlen:
        batch = cu_seqlens_q.numel() - 1
        hq = q.shape[1]
        sq, sk = max_seqlen_q, max_seqlen_k
        q_strides = (0, q.stride(1), q.stride(0))
        k_strides = (0, k.stride(1), k.stride(0))
        v_strides = (0, v.stride(1), v.stride(0))
        o_strides = (0, out.stride(1), out.stride(0))
        lse = torch.empty((hq, q.shape[0]), device=q.device, dtype=torch.float32) if return_lse else None
        l_strides = (0, lse.stride(0), lse.stride(1)) if return_lse else (0, 0, 0)
    else:
        batch, hq, sq, _ = q.shape
        sk = k.shape[2]
        q_strides = (q.stride(0), q.stride(1), q.stride(2))
        k_strides = (k.stride(0), k.stride(1), k.stride(2))
        v_strides = (v.stride(0), v.stride(1), v.stride(2))
        o_strides = (out.stride(0), out.stride(1), out.stride(2))
        lse = torch.empty((batch, hq, sq), device=q.device, dtype=torch.float32) if return_lse else None
        l_strides = tuple(lse.stride()) if return_lse else (0, 0, 0)
    hkv = k.shape[-2] if varlen else k.shape[1]

    if config["USE_TMA"] and q.is_cuda and not _TMA_ALLOCATOR_SET:
        _set_tma_allocator()
        _TMA_ALLOCATOR_SET = True
    launch_opts = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    if torch.version.hip:
        launch_opts.update({name: config[name] for name in AMD_ONLY_KNOBS if name in config})

    grid = (triton.cdiv(sq, config["BLOCK_M"]), batch * hq)
    if grid[0] == 0 or grid[1] == 0:
        return (out, lse) if return_lse else out
    args = (q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
            *q_strides, *k_strides, *v_strides, *o_strides, *l_strides,
            sq, sk, hq, hq // hkv, scale * LOG2E)
    kwargs = dict(
        HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
        IS_CAUSAL=bool(causal), IS_VARLEN=varlen, PRE_LOAD_V=config["PRE_LOAD_V"],
        SPLIT_MASK=config["SPLIT_MASK"], USE_TMA=config["USE_TMA"], RETURN_LSE=bool(return_lse),
        **launch_opts,
    )
    interpreting = type(_attn_fwd).__name__ == "InterpretedFunction"
    try:
        if compile_only:
            if interpreting:  # the interpreter compiles nothing
                return None
            kernel = _attn_fwd.warmup(*args, grid=grid, **kwargs)
            kernel._init_handles()  # loading the binary is where shared-memory overflows surface
            return kernel
        _attn_fwd[grid](*args, **kwargs)
    except triton.runtime.errors.OutOfResources as e:
        raise InvalidConfig(f"out of resources: {e}") from e
    except triton.compiler.errors.CompilationError as e:
        raise InvalidConfig(f"compile error: {str(e).strip().splitlines()[-1]}") from e
    except (subprocess.CalledProcessError, _PTXAS_ERROR) as e:  # the assembler failed (or crashed) on this config
        raise InvalidConfig(f"compile error in the assembler: {str(e).strip().splitlines()[0][:300]}") from e
    return (out, lse) if return_lse else out
