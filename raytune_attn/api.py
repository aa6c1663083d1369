"""Public entry points: `attention` (SDPA layout) and `varlen_attention` (flash-attn's packed layout).

Without an explicit config, the config comes from a loaded tuned artifact (`raytune_attn.runtime`) for the
current device and the call's shape, else from `raytune_attn.config.default_config`.

Forward only: inputs that need a gradient (grad mode on) raise `inputs.ForwardOnlyError`. bfloat16 tensors on the
CPU (the Triton interpreter, which computes through NumPy and has no bfloat16) are computed in float32 and the
output cast back to bfloat16; the config is still the one looked up for bfloat16.
"""

from __future__ import annotations

import torch

from raytune_attn import inputs, runtime, validation
from raytune_attn.kernels.flash_attn import flash_attn_fwd

_DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}


def attention(q, k, v, *, causal=False, softmax_scale=None, config=None, return_lse=False):
    """Drop-in for `torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=...)` on
    (B, H, S, D) tensors, with GQA/MQA when k and v have fewer heads than q (as SDPA's `enable_gqa=True`).

    One difference from SDPA: when Sq != Sk, the causal mask is aligned to the bottom-right corner (flash-attn's
    convention: the last query sees every key); SDPA's `is_causal` aligns it top-left. With Sq == Sk they agree.
    """
    inputs.check_forward_only(q, k, v)
    if config is None:
        try:
            config = _select(q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3], causal, q.dtype,
                             False)
        except (AttributeError, IndexError, KeyError, ValueError):  # not 4-D tensors of a supported dtype, no heads:
            inputs.check_dense(q, k, v)  # let the checks say
            raise
    if inputs.host_bfloat16(q):
        inputs.check_dense(q, k, v)
        out = attention(q.float(), k.float(), v.float(), causal=causal, softmax_scale=softmax_scale, config=config,
                        return_lse=return_lse)
        return _cast_back(out, q.dtype, return_lse)
    config, contiguous = _prepared(config, q, k, v, "dense")
    if not contiguous:
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    return flash_attn_fwd(q, k, v, config, causal=causal, softmax_scale=softmax_scale, return_lse=return_lse)


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal=False,
                     softmax_scale=None, config=None, return_lse=False):
    """flash-attn's `flash_attn_varlen_func` layout: q (total_q, Hq, D), k and v (total_k, Hkv, D), int32
    cu_seqlens of length batch+1. The causal mask is bottom-right aligned per sequence.

    The offsets are read on the host to check them (a device sync on GPU): a wrong offset would otherwise read
    or write out of bounds."""
    inputs.check_forward_only(q, k, v)
    inputs.check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    # The kernel reads the offsets at unit stride: a strided view (a column of a wider tensor) is copied.
    cu_seqlens_q, cu_seqlens_k = cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous()
    if config is None:
        config = _select(cu_seqlens_q.numel() - 1, q.shape[1], k.shape[1], max_seqlen_q, max_seqlen_k, q.shape[2],
                         causal, q.dtype, True)
    if inputs.host_bfloat16(q):
        out = varlen_attention(q.float(), k.float(), v.float(), cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                               max_seqlen_k, causal=causal, softmax_scale=softmax_scale, config=config,
                               return_lse=return_lse)
        return _cast_back(out, q.dtype, return_lse)
    config, contiguous = _prepared(config, q, k, v, "varlen")
    if not contiguous:
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    return flash_attn_fwd(q, k, v, config, causal=causal, softmax_scale=softmax_scale, cu_seqlens_q=cu_seqlens_q,
                          cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                          return_lse=return_lse)


def _cast_back(out, dtype, return_lse: bool):
    """A float32 result of a bfloat16 call as the call's dtype (the log-sum-exp is float32 either way)."""
    return (out[0].to(dtype), out[1]) if return_lse else out.to(dtype)


_plans: dict[tuple, tuple[dict, bool]] = {}


def _prepared(config, q, k, v, layout: str) -> tuple[dict, bool]:
    """(validated config, whether the inputs' last dimension is contiguous), with every check of the inputs and
    the config (`validation.prepare`) done once per distinct (config, shapes, strides, dtypes, devices): a hot
    inference loop pays one dict lookup instead of ~10 us of checks, inside a dispatch budget of a few
    microseconds."""
    try:
        key = (tuple(config.items()), layout, q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(),
               q.dtype, k.dtype, v.dtype, q.device, k.device, v.device)
        plan = _plans.get(key)
    except (AttributeError, TypeError):  # not tensors, or not a dict: the full checks below name the problem
        key, plan = None, None
    if plan is None:
        if layout == "dense":
            inputs.check_dense(q, k, v)  # varlen inputs are checked on every call (their offsets change)
        cfg = validation.prepare(config, q, k, v)
        plan = (cfg, all(t.stride(-1) == 1 for t in (q, k, v)))
        if key is not None:
            if len(_plans) > 4096:  # shapes can vary without bound (varlen, growing caches): keep the table small
                _plans.clear()
            _plans[key] = plan
    if plan[0]["USE_TMA"]:
        validation.check_tma_alignment(q, k, v)  # base addresses change from call to call
    return plan


def _select(batch, hq, hkv, sq, sk, d, causal, dtype, varlen) -> dict:
    return runtime.select_config(batch=batch, hq=hq, hkv=hkv, seqlen_q=sq, seqlen_k=sk, head_dim=d, causal=causal,
                                 dtype=_DTYPE_NAMES[dtype], varlen=varlen)
