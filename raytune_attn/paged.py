"""`paged_attention`: attention of packed queries over a paged KV cache (decode, speculative groups and prefill
chunks in one call), the layout of vLLM and flash-attn's paged KV.

Forward only: inputs that need a gradient (grad mode on) raise `inputs.ForwardOnlyError`. bfloat16 on the CPU (the
Triton interpreter, which computes through NumPy and has no bfloat16) is computed in float32 and cast back, with
the config looked up for bfloat16, as in `raytune_attn.attention`.

Host synchronisation: none on GPU. Every check here reads shapes, dtypes, devices and strides only; the grid
comes from shapes and `max_seqlen_q`. The values of `cu_seqlens_q`, `seqused_k` and `block_table` are checked
on the host only when they live on the CPU (the interpreter), where reading them costs nothing; on GPU the
kernel never reads past a sequence's table and drops block ids outside the cache (reported by a device assert
under TRITON_DEBUG=1), and `max_seqlen_q` must be a true upper bound, as in flash-attn.
"""

from __future__ import annotations

import numbers

import torch

from raytune_attn.device import interpreter_enabled
from raytune_attn.inputs import check_forward_only, host_bfloat16
from raytune_attn.kernels.paged_attn import paged_attn_fwd
from raytune_attn.paged_runtime import select_paged_config
from raytune_attn.validation import check_paged as check_paged_config

MAX_HEAD_DIM = 256
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_PAGE_SIZES = (16, 32, 64, 128, 256)


def paged_attention(q, k_cache, v_cache, *, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, max_seqlen_k,
                    causal=True, softmax_scale=None, out=None, config=None):
    """Attention of packed queries over a paged KV cache. Returns `out`, (total_q, Hq, D) in q's dtype.

    Args:
        q: (total_q, Hq, D), the queries of every sequence back to back; last dimension contiguous.
        k_cache, v_cache: (num_blocks, block_size, Hkv, D), block_size a power of two from 16 to 256, Hq a
            multiple of Hkv (GQA/MQA), D up to 256; last dimension contiguous.
        block_table: int32 (num_seqs, max_blocks_per_seq): sequence z's key j is in block
            block_table[z, j // block_size], slot j % block_size.
        seqused_k: int32 (num_seqs,): keys cached per sequence, its new tokens included (already written).
        cu_seqlens_q: int32 (num_seqs + 1,): sequence z's queries are q[cu_seqlens_q[z]:cu_seqlens_q[z + 1]].
        max_seqlen_q, max_seqlen_k: upper bounds of the per-sequence query and key counts (ints; they size the
            grid and choose the default config, so the launch reads nothing back from the device).
        causal: bottom-right aligned: query i of a sequence with q_len queries and n keys sees keys
            j <= i + n - q_len. A query that sees no key outputs zeros.
        softmax_scale: defaults to D ** -0.5.
        out: optional (total_q, Hq, D) tensor of q's dtype to write into.
        config: a paged config (knobs: `kernels.paged_config`; rules: `validation.check_paged`); default: the
            tuned artifact's entry for this call's shape bucket, else `default_paged_config` (`paged_runtime`).
    """
    check_forward_only(q, k_cache, v_cache)
    check_paged(q, k_cache, v_cache, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, max_seqlen_k)
    scale = _scale(softmax_scale, q.shape[-1])
    out = _output(out, q)
    if config is None:  # from host ints and shapes only: no sync (paged_runtime)
        config = select_paged_config(q, k_cache, block_table, max_seqlen_q, max_seqlen_k)
    else:
        config = check_paged_config(config, head_dim=q.shape[-1], group=q.shape[1] // k_cache.shape[2])
    # The kernel reads the per-sequence tensors at unit stride: a strided view (a column of a wider tensor) is copied.
    seqused_k, cu_seqlens_q = seqused_k.contiguous(), cu_seqlens_q.contiguous()
    if host_bfloat16(q):
        result = paged_attn_fwd(q.float().contiguous(), k_cache.float(), v_cache.float(), torch.empty(q.shape),
                                block_table, seqused_k, cu_seqlens_q, max_seqlen_q, config, causal=causal,
                                scale=scale)
        return out.copy_(result)
    if q.stride(-1) != 1:
        q = q.contiguous()
    return paged_attn_fwd(q, k_cache, v_cache, out, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, config,
                          causal=causal, scale=scale)


def check_paged(q, k_cache, v_cache, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, max_seqlen_k):
    """Every problem with the inputs, as a ValueError naming it (values too, where they are on the CPU)."""
    _check_tensors(q, k_cache, v_cache)
    num_seqs = _check_metadata(q, block_table, seqused_k, cu_seqlens_q)
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int (an upper bound), got {value!r}")
    if block_table.device.type == "cpu" and num_seqs:
        _check_values(q, k_cache, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, max_seqlen_k)


def _check_tensors(q, k_cache, v_cache):
    for name, t, rank in (("q", q, 3), ("k_cache", k_cache, 4), ("v_cache", v_cache, 4)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != rank:
            raise ValueError(f"{name} must have {rank} dimensions, got shape {tuple(t.shape)}")
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"k_cache and v_cache shapes differ: {tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    if not (q.dtype == k_cache.dtype == v_cache.dtype) or q.dtype not in _DTYPES:
        raise ValueError(f"q, k_cache and v_cache must share a dtype among float16, bfloat16 (float32 in the "
                         f"interpreter), got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    if not (q.device == k_cache.device == v_cache.device):
        raise ValueError(f"q, k_cache and v_cache must be on one device, got {q.device}, {k_cache.device}, "
                         f"{v_cache.device}")
    if q.device.type == "cpu" and not interpreter_enabled():
        raise ValueError("CPU tensors run only in the Triton interpreter: set TRITON_INTERPRET=1 or use a GPU")
    _, page, hkv, d = k_cache.shape
    if q.shape[-1] != d or not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"head dims must agree and be 1..{MAX_HEAD_DIM}: q {q.shape[-1]}, caches {d}")
    if hkv == 0 or q.shape[1] == 0 or q.shape[1] % hkv:
        raise ValueError(f"query heads ({q.shape[1]}) must be a positive multiple of the caches' KV heads ({hkv})")
    if page not in _PAGE_SIZES:
        raise ValueError(f"block_size (k_cache.shape[1]) must be one of {_PAGE_SIZES}, got {page}")
    if k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1:
        raise ValueError("k_cache and v_cache must be contiguous in their last (head dim) dimension")


def _check_metadata(q, block_table, seqused_k, cu_seqlens_q) -> int:
    for name, t, rank in (("block_table", block_table, 2), ("seqused_k", seqused_k, 1),
                          ("cu_seqlens_q", cu_seqlens_q, 1)):
        if not isinstance(t, torch.Tensor) or t.dim() != rank:
            raise ValueError(f"{name} must be a {rank}-D tensor")
        if t.dtype != torch.int32:
            raise ValueError(f"{name} must be int32, got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}")
    num_seqs = block_table.shape[0]
    if seqused_k.shape[0] != num_seqs or cu_seqlens_q.shape[0] != num_seqs + 1:
        raise ValueError(f"block_table has {num_seqs} rows: seqused_k needs {num_seqs} entries (has "
                         f"{seqused_k.shape[0]}) and cu_seqlens_q {num_seqs + 1} (has {cu_seqlens_q.shape[0]})")
    if num_seqs == 0 and q.shape[0]:
        raise ValueError(f"q has {q.shape[0]} tokens but block_table has no sequence (cu_seqlens_q must rise from 0 "
                         f"to total_q={q.shape[0]})")
    if block_table.stride(1) != 1:
        raise ValueError("block_table must be contiguous in its last dimension")
    return num_seqs


def _check_values(q, k_cache, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, max_seqlen_k):
    cu, used = cu_seqlens_q.tolist(), seqused_k.tolist()
    if cu[0] != 0 or cu[-1] != q.shape[0] or any(b < a for a, b in zip(cu, cu[1:], strict=False)):
        raise ValueError(f"cu_seqlens_q must rise from 0 to total_q={q.shape[0]}, got {cu}")
    longest_q = max(b - a for a, b in zip(cu, cu[1:], strict=False))
    if longest_q > max_seqlen_q:
        raise ValueError(f"max_seqlen_q={max_seqlen_q} is below the longest query run ({longest_q})")
    num_blocks, page = k_cache.shape[:2]
    capacity = block_table.shape[1] * page
    for z, n in enumerate(used):
        if not 0 <= n <= min(capacity, max_seqlen_k):
            raise ValueError(f"seqused_k[{z}]={n} must be within 0..min(max_seqlen_k={max_seqlen_k}, the block "
                             f"table's capacity {capacity})")
        for j, blk in enumerate(block_table[z, : -(-n // page)].tolist()):
            if not 0 <= blk < num_blocks:
                raise ValueError(f"block_table[{z}, {j}] = {blk} is outside the cache's {num_blocks} blocks")


def _scale(softmax_scale, head_dim: int) -> float:
    scale = softmax_scale if softmax_scale is not None else head_dim**-0.5
    # The kernel takes each row's max of the raw scores and scales it: right for a positive scale only.
    if isinstance(scale, bool) or not (isinstance(scale, numbers.Real) and 0 < scale < float("inf")):
        raise ValueError(f"softmax_scale must be a positive finite number, got {softmax_scale!r}")
    return float(scale)


def _output(out, q):
    if out is None:
        return torch.empty(q.shape, device=q.device, dtype=q.dtype)
    if not isinstance(out, torch.Tensor) or out.shape != q.shape or out.dtype != q.dtype or out.device != q.device:
        raise ValueError(f"out must be a tensor of q's shape {tuple(q.shape)}, dtype {q.dtype} and device "
                         f"{q.device}")
    if out.stride(-1) != 1:
        raise ValueError("out must be contiguous in its last dimension")
    return out
