"""The kernels as torch custom ops, so that `torch.compile` graphs (fullgraph included) can call them.

- `torch.ops.raytune_attn.attention(q, k, v, causal, softmax_scale, config)`
- `torch.ops.raytune_attn.varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
  causal, softmax_scale, config)`

Both wrap `raytune_attn.api` (so a None config goes through the runtime's tuned-config lookup at run time) and
have fake (meta) implementations: the output has q's shape, dtype and device. A config crosses the op boundary
as a list of ints in `config.KNOBS` order (-1: not set; bools as 0/1), built by `encode_config`; the Python
wrappers `attention(...)` / `varlen_attention(...)` here take the same arguments as `raytune_attn.api`.
Forward only: called with inputs that need a gradient (grad mode on), both ops raise `inputs.ForwardOnlyError` (the
autograd formula registered for them refuses before the kernel runs: there is no backward pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from raytune_attn.config import KNOBS, InvalidConfig, check_knob_type
from raytune_attn.inputs import check_forward_only

_KNOB_NAMES = tuple(KNOBS)


def encode_config(config: Mapping[str, Any] | None) -> list[int] | None:
    """A config dict as the op's `int[]` argument (-1 for an unset knob)."""
    if config is None:
        return None
    unknown = sorted(set(config) - set(KNOBS))
    if unknown:
        raise InvalidConfig(f"unknown knob(s) {unknown}; known knobs are {sorted(KNOBS)}")
    return [_encode_value(k, config[k]) if k in config else -1 for k in _KNOB_NAMES]


def _encode_value(knob: str, value: Any) -> int:
    """A knob's value as an int, its type checked as `raytune_attn.attention` checks it (not coerced); -1 is the
    unset marker, so no negative value crosses (no knob takes one)."""
    check_knob_type(knob, value)
    if value < 0:
        raise InvalidConfig(f"knob {knob} must be >= 0 (-1 marks an unset knob here), got {value}")
    return int(value)


def decode_config(encoded: list[int] | None) -> dict[str, Any] | None:
    if encoded is None:
        return None
    if len(encoded) != len(_KNOB_NAMES):
        raise ValueError(f"an encoded config has {len(_KNOB_NAMES)} values, got {len(encoded)}")
    return {k: (bool(v) if KNOBS[k] is bool else int(v)) for k, v in zip(_KNOB_NAMES, encoded, strict=True) if v != -1}


@torch.library.custom_op("raytune_attn::attention", mutates_args=())
def _attention(
    q: Tensor, k: Tensor, v: Tensor, causal: bool, softmax_scale: float | None, config: list[int] | None
) -> Tensor:
    from raytune_attn import api

    return api.attention(q, k, v, causal=causal, softmax_scale=softmax_scale, config=decode_config(config))


@_attention.register_fake
def _attention_fake(q, k, v, causal, softmax_scale, config):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


def _refuse_grad(ctx, inputs, output) -> None:
    """Autograd's setup, called (under no_grad) only when an input needs a gradient: refused, naming it."""
    check_forward_only(*inputs[:3], grad_mode=True)


def _no_backward(ctx, grad):
    raise AssertionError("unreachable: _refuse_grad refuses every input that needs a gradient")


_attention.register_autograd(_no_backward, setup_context=_refuse_grad)


@torch.library.custom_op("raytune_attn::varlen_attention", mutates_args=())
def _varlen_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Tensor,
    cu_seqlens_k: Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool,
    softmax_scale: float | None,
    config: list[int] | None,
) -> Tensor:
    from raytune_attn import api

    return api.varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
                                softmax_scale=softmax_scale, config=decode_config(config))


@_varlen_attention.register_fake
def _varlen_attention_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, softmax_scale,
                           config):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


_varlen_attention.register_autograd(_no_backward, setup_context=_refuse_grad)


def attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, softmax_scale: float | None = None,
              config: Mapping[str, Any] | None = None) -> Tensor:
    """`raytune_attn.attention` through the custom op (traceable by torch.compile)."""
    return torch.ops.raytune_attn.attention(q, k, v, causal, softmax_scale, encode_config(config))


def varlen_attention(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int,
                     max_seqlen_k: int, *, causal: bool = False, softmax_scale: float | None = None,
                     config: Mapping[str, Any] | None = None) -> Tensor:
    """`raytune_attn.varlen_attention` through the custom op (traceable by torch.compile)."""
    return torch.ops.raytune_attn.varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                                   causal, softmax_scale, encode_config(config))
