"""The causal diagonal band as a second launch (the `BAND_LAUNCH` knob, docs/kernel.md).

Triton's Hopper warp-specialization pass takes one key loop a tile, so a warp-specialized causal tile masks every
key block, though only the blocks that cross the diagonal need it; at D=64, where the softmax bounds the step, the
per-score compare and select cost those forms 10-54% against split-loop tiles (docs/benchmarks/h100/d64_ws/). With
the knob the main launch (flash_attn.py, `BELOW_BAND`) folds only the whole key blocks that every row of its tile
sees, unmasked, and stores each row's output and log-sum-exp; this kernel then computes the rest of each row's keys
(the band: from the first key block the main tile left out to the row's diagonal) with small split-loop tiles,
and merges the two softmax partials into the output:

    out = (o_main * 2^(lse_main - m) + acc_band * 2^(m_band - m)) / (2^(lse_main - m) + l_band * 2^(m_band - m))

with every exponent in log2 units and m the larger of lse_main and m_band (a row with neither writes 0 and lse
-inf, as the one-launch kernel does). The main output passes through the output tensor in its dtype: one rounding
more than the one-launch kernel, within the dtype's tolerance.
"""

from __future__ import annotations

import triton
import triton.language as tl

from raytune_attn.kernels import tile_parts
from raytune_attn.kernels.tile_parts import attn_fwd_inner, natural_lse, seq_bases, seq_heads

LOG2E = tl.constexpr(tile_parts.LOG2E)  # a global a kernel reads must be a constexpr
# The band's tiles: 64 rows with 4 warps (16 query rows a warp) and 2 stages, 64 keys up to head dim 128 and 32
# above (as the kernel's default tiles there: 64 x 64 at D=256 spills, 255 registers), never taller or wider than
# the main launch's, whose key blocks they must nest in (the band of a tile starts at a multiple of its BLOCK_N).
BAND_ROWS = 64
BAND_WARPS = 4
BAND_STAGES = 2


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _attn_band(Q, K, V, Out, Lse, cu_seqlens_q, cu_seqlens_k,
               stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
               stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om,
               stride_lz, stride_lh, stride_lm,
               seqlen_q, seqlen_k, num_heads_q, group_size, qk_scale,
               HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               MAIN_M: tl.constexpr, MAIN_N: tl.constexpr, IS_VARLEN: tl.constexpr, RETURN_LSE: tl.constexpr):
    """Grid (cdiv(max Sq, BLOCK_M), batch * Hq). Rows [start_m * BLOCK_M, + BLOCK_M) of one (sequence, query head):
    keys from the main tile's band start (its first row's horizon, rounded down to MAIN_N) to each row's horizon,
    masked, then merged with the main launch's output and lse (natural log, in Lse), which it overwrites."""
    start_m = tl.program_id(0)
    off_z, off_h, off_hk = seq_heads(tl.program_id(1), num_heads_q, group_size)
    q_base, k_base, v_base, o_base, q_start, seqlen_q, seqlen_k = seq_bases(
        Q, K, V, Out, cu_seqlens_q, cu_seqlens_k, off_z, off_h, off_hk, seqlen_q, seqlen_k,
        stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
        stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om, IS_VARLEN)
    if start_m * BLOCK_M >= seqlen_q:
        return
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    rows = offs_m < seqlen_q
    q_mask = rows[:, None] & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :], mask=q_mask, other=0.0)

    # Bottom-right causal alignment, as in the main launch: row i sees keys j <= i + diag. The main tile holding
    # these rows folded keys [0, lo); lo is a multiple of MAIN_N, so of BLOCK_N too.
    diag = seqlen_k - seqlen_q
    main_first = (start_m * BLOCK_M) // MAIN_M * MAIN_M
    lo = tl.maximum(main_first + diag + 1, 0) // MAIN_N * MAIN_N
    lo = tl.minimum(lo, tl.maximum(seqlen_k, 0) // MAIN_N * MAIN_N)
    hi = tl.maximum(tl.minimum(seqlen_k, (start_m + 1) * BLOCK_M + diag), 0)
    m_b = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_b = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    acc, l_b, m_b = attn_fwd_inner(acc, l_b, m_b, q, k_base, v_base, None, None, 0, lo, hi,
                                   offs_m, offs_n, offs_d, stride_kn, stride_vn, seqlen_k, diag, qk_scale,
                                   HEAD_DIM, BLOCK_N, BLOCK_D, True, True, False, False, False, False)

    o_ptrs = o_base + offs_m[:, None] * stride_om + offs_d[None, :]
    l_ptrs = Lse + off_z * stride_lz + off_h * stride_lh + (q_start + offs_m) * stride_lm
    o_main = tl.load(o_ptrs, mask=q_mask, other=0.0).to(tl.float32)
    lse_main = tl.load(l_ptrs, mask=rows, other=float("-inf")) * LOG2E
    m = tl.maximum(lse_main, m_b)
    m = tl.where(m == float("-inf"), 0.0, m)  # a row with no key in either part: both weights 0, output 0
    w_main = tl.math.exp2(lse_main - m)
    w_band = tl.math.exp2(m_b - m)
    den = w_main + l_b * w_band
    den_safe = tl.where(den == 0.0, 1.0, den)
    out = (o_main * w_main[:, None] + acc * w_band[:, None]) / den_safe[:, None]
    tl.store(o_ptrs, out.to(o_base.dtype.element_ty), mask=q_mask)
    if RETURN_LSE:
        tl.store(l_ptrs, natural_lse(m, den), mask=rows)


def band_tiles(config, head_dim: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) of the band launch for a main config (see BAND_ROWS)."""
    return min(BAND_ROWS, config["BLOCK_M"]), min(64 if head_dim <= 128 else 32, config["BLOCK_N"])


def band_launch(args: tuple, *, head_dim: int, block_d: int, config, varlen: bool, return_lse: bool, grid: tuple,
                compile_only: bool = False):
    """Launch (or, `compile_only`, build) the band kernel after the main launch. `args` are the main kernel's
    leading arguments (tensors, strides, lengths, heads, scale: flash_attn.py builds them), with Lse the main
    launch's log-sum-exp buffer; `grid` is (query blocks of the band tile, batch * Hq)."""
    block_m, block_n = band_tiles(config, head_dim)
    kwargs = dict(HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=block_m, BLOCK_N=block_n, MAIN_M=config["BLOCK_M"],
                  MAIN_N=config["BLOCK_N"], IS_VARLEN=varlen, RETURN_LSE=return_lse, num_warps=BAND_WARPS,
                  num_stages=BAND_STAGES)
    if compile_only:
        compiled = _attn_band.warmup(*args, grid=(1,), **kwargs)
        compiled._init_handles()
        return compiled
    _attn_band[grid](*args, **kwargs)
    return None


def band_grid(seqlen_q: int, batch: int, heads: int, config, head_dim: int) -> tuple[int, int]:
    return triton.cdiv(seqlen_q, band_tiles(config, head_dim)[0]), batch * heads
