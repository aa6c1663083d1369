"""tune/measure/sdpa_reference.py: the float32 reference, against attention written out in float64."""

import math

import pytest
import torch

from raytune_attn.tune.measure.sdpa_reference import sdpa_float32


def _explicit(q, k, v, causal):
    """softmax(q k^T / sqrt(D)) v in float64, each query head reading KV head h // (Hq / Hkv), causal bottom-right."""
    q, k, v = (t.double() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    sq, sk = q.shape[-2], k.shape[-2]
    if causal:
        keep = torch.arange(sk)[None, :] <= torch.arange(sq)[:, None] + (sk - sq)
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row with no key: all -inf -> 0
    return p @ v


@pytest.mark.parametrize("sq, sk, causal", [(5, 5, False), (5, 5, True), (3, 7, True), (7, 3, True), (4, 6, False)])
def test_matches_attention_written_out(sq, sk, causal):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, sq, 8, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(2, 2, sk, 8, generator=g).to(torch.bfloat16) for _ in range(2))  # GQA 2:1
    out = sdpa_float32(q, k, v, causal)
    assert out.dtype == torch.float32 and out.shape == (2, 4, sq, 8)
    torch.testing.assert_close(out.double(), _explicit(q, k, v, causal), atol=1e-5, rtol=1e-5)
    if causal and sq > sk:
        assert out[:, :, : sq - sk].abs().max() == 0  # rows that see no key are 0
