"""Checks of the tensors handed to the public API: every problem raises ValueError naming what is wrong.

`check_forward_only` is asked on every call (it depends on the grad mode, not only on the tensors); the shape
checks once per distinct shapes (the API caches their answer).
"""

from __future__ import annotations

import torch

from raytune_attn.device import interpreter_enabled

MAX_HEAD_DIM = 256
_GPU_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class ForwardOnlyError(RuntimeError):
    """An input needs a gradient: the kernels compute the forward pass only."""


def check_forward_only(q, k, v, *, grad_mode: bool | None = None) -> None:
    """Refuse inputs that need a gradient while grad mode is on (`grad_mode`: the caller's, default the current
    one): no backward pass exists, and an output without a grad_fn would make a later `backward()` fail far from its
    cause (or silently train nothing). Asked on every call: three attribute reads when nothing needs a gradient."""
    try:
        if not (q.requires_grad or k.requires_grad or v.requires_grad):
            return
    except AttributeError:  # not tensors: the shape checks say so
        return
    if not (torch.is_grad_enabled() if grad_mode is None else grad_mode):
        return
    names = [n for n, t in (("q", q), ("k", k), ("v", v)) if t.requires_grad]
    verb = "requires" if len(names) == 1 else "require"
    raise ForwardOnlyError(
        f"{' and '.join(names)} {verb} grad, but raytune-attn's kernels are forward-only (no backward pass): "
        "call it under torch.no_grad() / torch.inference_mode(), or pass detached tensors"
    )


def host_bfloat16(q) -> bool:
    """A bfloat16 tensor on the CPU: the Triton interpreter computes through NumPy, which has no bfloat16, so the
    entry points compute it in float32 and cast the output back."""
    return isinstance(q, torch.Tensor) and q.dtype is torch.bfloat16 and q.device.type == "cpu"


def _check_common(q, k, v, rank: int, layout: str):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != rank:
            raise ValueError(f"{name} must have {rank} dimensions {layout}, got shape {tuple(t.shape)}")
        heads = t.shape[-2] if rank == 3 else t.shape[1]
        if heads < 1:
            raise ValueError(f"{name} has {heads} heads (shape {tuple(t.shape)} {layout}): at least 1 is needed")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in _GPU_DTYPES:
        raise ValueError(f"dtype {q.dtype} is not supported: use float16, bfloat16 or float32")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    if q.device.type == "meta":
        raise ValueError("q, k and v are meta tensors (no data): the kernels need CPU (interpreter) or GPU tensors")
    if q.device.type == "cpu" and not interpreter_enabled():
        raise ValueError("CPU tensors run only in the Triton interpreter: set TRITON_INTERPRET=1 or use a GPU")
    d = q.shape[-1]
    if k.shape[-1] != d or v.shape[-1] != d:
        raise ValueError(f"head dims differ: q {d}, k {k.shape[-1]}, v {v.shape[-1]}")
    if d > MAX_HEAD_DIM or d < 1:
        raise ValueError(f"head dim {d} is outside the supported 1..{MAX_HEAD_DIM}")


def _check_heads(hq: int, hk: int, hv: int):
    if hk != hv:
        raise ValueError(f"k and v must have the same number of heads, got {hk} and {hv}")
    if hq % hk:
        raise ValueError(f"query heads ({hq}) must be a multiple of key/value heads ({hk}) for GQA/MQA")


def check_dense(q, k, v):
    """q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D): SDPA's layout."""
    _check_common(q, k, v, 4, "(batch, heads, seqlen, head_dim)")
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        raise ValueError(f"batch sizes differ: q {q.shape[0]}, k {k.shape[0]}, v {v.shape[0]}")
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"k and v sequence lengths differ: {k.shape[2]} and {v.shape[2]}")
    _check_heads(q.shape[1], k.shape[1], v.shape[1])


def check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
    """q (total_q, Hq, D), k and v (total_k, Hkv, D), cu_seqlens int32 (B+1,): flash-attn's varlen layout.

    Reads cu_seqlens on the host to check them (a device sync on GPU): a wrong offset would otherwise read or
    write out of bounds.
    """
    _check_common(q, k, v, 3, "(total_tokens, heads, head_dim)")
    if k.shape[0] != v.shape[0]:
        raise ValueError(f"k and v token counts differ: {k.shape[0]} and {v.shape[0]}")
    _check_heads(q.shape[1], k.shape[1], v.shape[1])
    lens = {}
    for name, cu, total, max_len in (
        ("cu_seqlens_q", cu_seqlens_q, q.shape[0], max_seqlen_q),
        ("cu_seqlens_k", cu_seqlens_k, k.shape[0], max_seqlen_k),
    ):
        if not isinstance(cu, torch.Tensor) or cu.dim() != 1 or cu.numel() < 2:
            raise ValueError(f"{name} must be a 1-D tensor of batch+1 offsets")
        if cu.dtype != torch.int32:
            raise ValueError(f"{name} must be int32, got {cu.dtype}")
        if cu.device != q.device:
            raise ValueError(f"{name} is on {cu.device} but q is on {q.device}")
        offsets = cu.tolist()
        if offsets[0] != 0:
            raise ValueError(f"{name} must start at 0, got {offsets[0]}")
        if any(b < a for a, b in zip(offsets, offsets[1:], strict=False)):
            raise ValueError(f"{name} must be non-decreasing, got {offsets}")
        if offsets[-1] != total:
            raise ValueError(f"{name} ends at {offsets[-1]} but the packed tensor has {total} tokens")
        longest = max(b - a for a, b in zip(offsets, offsets[1:], strict=False))
        arg = "max_seqlen_q" if name == "cu_seqlens_q" else "max_seqlen_k"
        # At most the packed total: the grid has max_seqlen / BLOCK_M programs per sequence and head, and a bound
        # far above the longest sequence launches (and in the interpreter runs) programs that do nothing.
        if isinstance(max_len, bool) or not isinstance(max_len, int) or not longest <= max_len <= max(total, 1):
            raise ValueError(f"{arg} must be an int from the longest sequence of {name} ({longest}) to its packed "
                             f"total ({total} tokens), got {max_len!r}")
        lens[name] = len(offsets)
    if lens["cu_seqlens_q"] != lens["cu_seqlens_k"]:
        raise ValueError(
            f"cu_seqlens_q and cu_seqlens_k describe different batch sizes: {lens['cu_seqlens_q'] - 1} "
            f"and {lens['cu_seqlens_k'] - 1}"
        )
