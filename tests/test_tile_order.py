"""The persistent grid's grouped heavy-first order (LPT_GROUP) against float64 references: every tile is computed
once, whatever the grouping, a short last group included."""

import pytest
import torch
from conftest import DEVICE, HAS_GPU
from reference import attention_reference, rel_err, tolerance, varlen_reference

from raytune_attn.config import InvalidConfig, validate_config
from raytune_attn.kernels.flash_attn import flash_attn_fwd

DTYPE = torch.bfloat16 if HAS_GPU else torch.float32
TILES = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4} if HAS_GPU else {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4}
LPT = {**TILES, "PERSISTENT": True, "REVERSE_M": True}


def _dense(shape, causal, cfg, seed=0):
    b, hq, hkv, sq, sk, d = shape
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, h, s, d, generator=g).to(DEVICE, DTYPE) for h, s in ((hq, sq), (hkv, sk), (hkv, sk)))
    out = torch.full_like(q, float("nan"))
    flash_attn_fwd(q, k, v, validate_config(cfg, head_dim=d), causal=causal, out=out)
    ref, _ = attention_reference(q, k, v, causal)
    assert rel_err(out, ref) < tolerance(DTYPE, DEVICE)


# 5 (sequence, head) pairs: groups of 2 leave a short last group; groups of 8 hold every pair in one.
@pytest.mark.parametrize("group", [1, 2, 8])
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_heavy_first_order_computes_every_tile(group, causal):
    _dense((5, 1, 1, 70, 70, 32), causal, {**LPT, "LPT_GROUP": group})


def test_grouped_order_varlen_with_an_empty_sequence():
    cfg = validate_config({**LPT, "LPT_GROUP": 2}, head_dim=32)
    sq, sk = [33, 0, 20], [40, 3, 20]
    g = torch.Generator().manual_seed(1)
    q = torch.randn(sum(sq), 3, 32, generator=g).to(DEVICE, DTYPE)
    k, v = (torch.randn(sum(sk), 1, 32, generator=g).to(DEVICE, DTYPE) for _ in range(2))
    cu_q = torch.tensor([0, 33, 33, 53], dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0, 40, 43, 63], dtype=torch.int32, device=DEVICE)
    out = torch.full_like(q, float("nan"))
    flash_attn_fwd(q, k, v, cfg, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=33,
                   max_seqlen_k=40, out=out)
    ref, _ = varlen_reference(q, k, v, cu_q, cu_k, causal=True)
    assert rel_err(out, ref) < tolerance(DTYPE, DEVICE)


@pytest.mark.parametrize("cfg, message", [
    ({"LPT_GROUP": 4}, "needs PERSISTENT and REVERSE_M"),
    ({"LPT_GROUP": 4, "PERSISTENT": True}, "needs PERSISTENT and REVERSE_M"),
    ({**LPT, "LPT_GROUP": 3}, "LPT_GROUP=3 must be one of"),
])
def test_lpt_group_is_refused_where_it_means_nothing(cfg, message):
    with pytest.raises(InvalidConfig, match=message):
        validate_config(cfg)
