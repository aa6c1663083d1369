"""Hugging Face transformers attention through raytune-attn's kernels.

Importing this module registers the implementation "raytune_attn" with transformers' `AttentionInterface` (and
the 2-D padding mask it reads with `AttentionMaskInterface`), so that

    import raytune_attn.integrations.transformers  # noqa: F401
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="raytune_attn")

(or `model.set_attn_implementation("raytune_attn")`) runs every attention call through the project's kernels:

- prefill without padding (several queries, no padding mask): the tuned prefill kernel (`raytune_attn.attention`,
  configs from the artifact loaded by `raytune_attn.load_configs` or $RAYTUNE_ATTN_CONFIGS);
- decode steps, and any call with a left-padding mask: the paged kernel (`kernels.paged_attn`), GQA-packed and
  split-KV, reading transformers' own cache in place: each sequence's (Hkv, S, D) keys are one page of a paged
  cache, and its left padding is hidden by a per-sequence first key.

Forward only, causal or not; left padding only (right padding or arbitrary masks are refused where the mask is
on the CPU, and unchecked on GPU, where checking would synchronise); no dropout, sliding window, softcap or
attention sinks.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

from raytune_attn import inputs
from raytune_attn.api import attention
from raytune_attn.kernels.paged_attn import paged_attn_fwd
from raytune_attn.kernels.paged_config import default_paged_config

NAME = "raytune_attn"
_UNSUPPORTED = ("sliding_window", "softcap", "s_aux")


def raytune_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                              is_causal=None, **kwargs):
    """transformers' attention-function signature: query (B, Hq, Sq, D), key and value (B, Hkv, Sk, D), the
    2-D (B, Sk) padding mask or None. Returns (output (B, Sq, Hq, D), None)."""
    _refuse_unsupported(dropout, kwargs)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    if attention_mask is None and query.shape[2] > 1:
        out = attention(query, key, value, causal=causal, softmax_scale=scaling)
        return out.transpose(1, 2), None
    return _paged(query, key, value, attention_mask, causal, scaling), None


def _paged(query, key, value, attention_mask, causal, scaling, config=None):
    """Attention over transformers' cache read as a paged cache of one page per sequence, with `config` (a paged
    config, `benchmarks/hf_decode_configs.py` times several) or the default for the call. The inputs get the checks
    of `raytune_attn.attention` (the same layout), bfloat16 on the CPU its float32 detour."""
    inputs.check_forward_only(query, key, value)
    inputs.check_dense(query, key, value)
    if inputs.host_bfloat16(query):
        out = _paged(query.float(), key.float(), value.float(), attention_mask, causal, scaling, config)
        return out.to(query.dtype)
    b, hq, sq, d = query.shape
    hkv, sk = key.shape[1], key.shape[2]
    dev = query.device
    q = query.transpose(1, 2).reshape(b * sq, hq, d)
    k_cache, v_cache = (t if t.stride(-1) == 1 else t.contiguous() for t in (key, value))
    k_cache, v_cache = k_cache.transpose(1, 2), v_cache.transpose(1, 2)  # (B, Sk, Hkv, D): page b = sequence b
    used, first_key = _keys_in_use(attention_mask, b, sk, dev)
    config = config or default_paged_config(head_dim=d, group=hq // hkv, max_seqlen_q=sq, max_seqlen_k=sk,
                                            num_seqs=b, num_kv_heads=hkv)
    table = torch.arange(b, dtype=torch.int32, device=dev)[:, None]
    cu_seqlens_q = torch.arange(0, (b + 1) * sq, sq, dtype=torch.int32, device=dev)
    scale = scaling if scaling is not None else d**-0.5
    out = paged_attn_fwd(q, k_cache, v_cache, torch.empty_like(q), table, used, cu_seqlens_q, sq, config,
                         causal=causal, scale=scale, kv_start=first_key)
    return out.view(b, sq, hq, d)


def _keys_in_use(attention_mask, b, sk, dev):
    """(seqused_k, first visible key) per sequence, both int32 on the device, computed there (no sync).

    The mask covers the first mask.shape[1] keys (fewer than Sk with a static cache); a left-padded row is
    zeros then ones, so its first visible key is the count of zeros."""
    if attention_mask is None:
        return torch.full((b,), sk, dtype=torch.int32, device=dev), None
    if attention_mask.dim() != 2:
        raise ValueError(f"attn_implementation={NAME!r} reads the 2-D padding mask (register() registers its mask "
                         f"function too), got a mask of shape {tuple(attention_mask.shape)}")
    mask = attention_mask.to(dev).bool()
    n = mask.shape[1]
    first = (n - mask.sum(-1)).to(torch.int32)
    if mask.device.type == "cpu":
        expected = torch.arange(n, device=dev)[None, :] >= first[:, None]
        if not torch.equal(mask, expected):
            raise ValueError(f"attn_implementation={NAME!r} handles left padding only: every row of the attention "
                             "mask must be zeros then ones (use padding_side='left')")
    return torch.full((b,), n, dtype=torch.int32, device=dev), first


def _refuse_unsupported(dropout, kwargs):
    if dropout:
        raise ValueError(f"attn_implementation={NAME!r} is forward-only: dropout={dropout} is not supported")
    given = [name for name in _UNSUPPORTED if kwargs.get(name) is not None]
    if given:
        raise ValueError(f"attn_implementation={NAME!r} does not support {given}")


def register(name: str = NAME) -> None:
    """Register the implementation (done on import; call again under another name if you like)."""
    AttentionInterface.register(name, raytune_attention_forward)
    AttentionMaskInterface.register(name, flash_attention_mask)


register()
