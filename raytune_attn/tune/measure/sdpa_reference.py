"""The float32 attention every measured config is checked against (workload.reference, paged_workload.paged_reference):
PyTorch SDPA on float32 copies of the inputs, causal bottom-right aligned when Sq != Sk."""

from __future__ import annotations

import torch


def sdpa_float32(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D), Hq a multiple of Hkv -> (B, Hq, Sq, D) float32. Causal: query row i
    sees keys j <= i + Sk - Sq; a row that sees no key (Sq > Sk) is 0, as the kernel defines it."""
    q, k, v = (t.float() for t in (q, k, v))
    sq, sk = q.shape[-2], k.shape[-2]
    gqa = q.shape[1] != k.shape[1]
    if not causal or sq == sk:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal and sq > 0,
                                                                enable_gqa=gqa)
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(sk, device=q.device)[None, :]
    mask = j <= i + (sk - sq)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
    return torch.where(mask.any(-1)[:, None], out, 0.0)
