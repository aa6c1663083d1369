"""Public entry points: `attention` (SDPA layout) and `varlen_attention` (flash-attn's packed layout).

Without an explicit config, the config comes from a loaded tuned artifact (`raytune_attn.runtime`) for the
current device and the call's shape, else from `raytune_attn.config.default_config`.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from raytune_attn import inputs, runtime
from raytune_attn.config import InvalidConfig, validate_config
from raytune_attn.kernels.flash_attn import flash_attn_fwd

_DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}


def attention(q, k, v, *, causal=False, softmax_scale=None, config=None, return_lse=False):
    """Drop-in for `torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=...)` on
    (B, H, S, D) tensors, with GQA/MQA when k and v have fewer heads than q (as SDPA's `enable_gqa=True`).

    One difference from SDPA: when Sq != Sk, the causal mask is aligned to the bottom-right corner (flash-attn's
    convention: the last query sees every key); SDPA's `is_causal` aligns it top-left. With Sq == Sk they agree.
    """
    if config is None:
        try:
            config = _select(q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3], causal, q.dtype,
                             False)
        except (AttributeError, IndexError, KeyError):  # not 4-D tensors of a supported dtype: let the checks say
            inputs.check_dense(q, k, v)
            raise
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
    inputs.check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    if config is None:
        config = _select(cu_seqlens_q.numel() - 1, q.shape[1], k.shape[1], max_seqlen_q, max_seqlen_k, q.shape[2],
                         causal, q.dtype, True)
    config, contiguous = _prepared(config, q, k, v, "varlen")
    if not contiguous:
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    return flash_attn_fwd(q, k, v, config, causal=causal, softmax_scale=softmax_scale, cu_seqlens_q=cu_seqlens_q,
                          cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                          return_lse=return_lse)


_plans: dict[tuple, tuple[dict, bool]] = {}


def _prepared(config, q, k, v, layout: str) -> tuple[dict, bool]:
    """(validated config, whether the inputs' last dimension is contiguous), with every check of the inputs and
    the config done once per distinct (config, shapes, strides, dtypes, devices): a hot inference loop pays one
    dict lookup instead of ~10 us of checks, inside a dispatch budget of a few microseconds."""
    try:
        key = (tuple(config.items()), layout, q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(),
               q.dtype, k.dtype, v.dtype, q.device, k.device, v.device)
        plan = _plans.get(key)
    except (AttributeError, TypeError):  # not tensors, or not a dict: the full checks below name the problem
        key, plan = None, None
    if plan is None:
        if layout == "dense":
            inputs.check_dense(q, k, v)  # varlen inputs are checked on every call (their offsets change)
        cfg = _validated(config, q)
        _check_fits(cfg, q, k, v)
        plan = (cfg, all(t.stride(-1) == 1 for t in (q, k, v)))
        if key is not None:
            if len(_plans) > 4096:  # shapes can vary without bound (varlen, growing caches): keep the table small
                _plans.clear()
            _plans[key] = plan
    if plan[0]["USE_TMA"]:
        _check_tma_alignment(q, k, v)  # base addresses change from call to call
    return plan


def _vendor(t: torch.Tensor) -> str:
    if not t.is_cuda:
        return "cpu"
    return "amd" if torch.version.hip else "nvidia"


def _validated(config, q) -> dict:
    return validate_config(config, head_dim=q.shape[-1], vendor=_vendor(q))


def _select(batch, hq, hkv, sq, sk, d, causal, dtype, varlen) -> dict:
    return runtime.select_config(batch=batch, hq=hq, hkv=hkv, seqlen_q=sq, seqlen_k=sk, head_dim=d, causal=causal,
                                 dtype=_DTYPE_NAMES[dtype], varlen=varlen)


@functools.lru_cache(maxsize=16)
def _smem_limit(device_index: int) -> int:
    props = torch.cuda.get_device_properties(device_index)
    return getattr(props, "shared_memory_per_block_optin", 0) or getattr(props, "shared_memory_per_block", 0)


@functools.lru_cache(maxsize=16)
def _capability(device_index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device_index)


def _check_fits(config: dict, q, k, v):
    """Reject configs that cannot work for this problem before any compile.

    Only certain failures are caught here (the search's resource pre-filter estimates more): one K tile and one
    V tile must sit in shared memory at once whatever the pipelining, so 2 * BLOCK_N * BLOCK_D * itemsize above
    the device's limit can never launch.
    """
    block_d = max(16, triton.next_power_of_2(q.shape[-1]))
    if q.is_cuda:
        need = 2 * config["BLOCK_N"] * block_d * q.element_size()
        limit = _smem_limit(q.device.index if q.device.index is not None else torch.cuda.current_device())
        if limit and need > limit:
            raise InvalidConfig(
                f"BLOCK_N={config['BLOCK_N']} with head dim {q.shape[-1]}: K and V tiles alone need {need} bytes "
                f"of shared memory, the device has {limit}"
            )
    if config["USE_TMA"]:
        if not hasattr(tl, "make_tensor_descriptor"):
            raise InvalidConfig(f"USE_TMA needs tensor descriptors, which Triton {triton.__version__} lacks")
        if q.is_cuda and (torch.version.hip or _capability(q.device.index or 0) < (9, 0)):
            raise InvalidConfig("USE_TMA needs an NVIDIA GPU of compute capability 9.0 (Hopper) or newer")
        _check_tma_alignment(q, k, v)


def _check_tma_alignment(q, k, v):
    # The copy engine moves 16-byte-aligned rows: every row stride and base address must be 16-byte aligned.
    for name, t in (("k", k), ("v", v)):
        row_stride = t.stride(-3) if t.dim() == 3 else t.stride(-2)
        head_stride = t.stride(-2) if t.dim() == 3 else t.stride(1)
        bad = [s for s in (row_stride, head_stride) if (s * t.element_size()) % 16]
        if bad or t.data_ptr() % 16 or (t.shape[-1] * t.element_size()) % 16:
            raise InvalidConfig(
                f"USE_TMA needs 16-byte aligned rows of {name}: head dim {t.shape[-1]} x {t.element_size()} "
                f"bytes and strides {tuple(t.stride())} do not all qualify"
            )
