"""Bad tensors raise ValueError naming the problem, through the public API."""

import pytest
import torch
from conftest import DEVICE

import raytune_attn as ra

F32 = torch.float32 if DEVICE == "cpu" else torch.float16


def t(*shape, dtype=F32, device=DEVICE):
    return torch.randn(*shape, dtype=torch.float32).to(device=device, dtype=dtype)


@pytest.mark.parametrize(
    "q, k, v, match",
    [
        (t(2, 4, 8, 32)[0], t(4, 8, 32), t(4, 8, 32), "4 dimensions"),
        (t(1, 4, 8, 32), t(1, 4, 8, 32, dtype=torch.float64), t(1, 4, 8, 32), "share a dtype"),
        (t(1, 4, 8, 32, dtype=torch.int32), t(1, 4, 8, 32, dtype=torch.int32), t(1, 4, 8, 32, dtype=torch.int32),
         "int32 is not supported: use float16, bfloat16 or float32"),
        (t(1, 4, 8, 64), t(1, 4, 8, 32), t(1, 4, 8, 32), "head dims differ"),
        (t(1, 4, 8, 320), t(1, 4, 8, 320), t(1, 4, 8, 320), "head dim 320"),
        (t(1, 6, 8, 32), t(1, 4, 8, 32), t(1, 4, 8, 32), "multiple of key/value heads"),
        (t(2, 4, 8, 32), t(1, 4, 8, 32), t(1, 4, 8, 32), "batch sizes differ"),
        (t(1, 4, 8, 32), t(1, 4, 8, 32), t(1, 4, 9, 32), "sequence lengths differ"),
        (t(1, 4, 8, 32), t(1, 4, 8, 32), t(1, 2, 8, 32), "same number of heads"),
        ("q", t(1, 4, 8, 32), t(1, 4, 8, 32), "torch.Tensor"),
    ],
)
def test_dense_bad_tensors(q, k, v, match):
    with pytest.raises(ValueError, match=match):
        ra.attention(q, k, v)


@pytest.mark.skipif(DEVICE != "cuda", reason="needs a GPU and a CPU tensor to mix")
def test_device_mismatch():
    with pytest.raises(ValueError, match="one device"):
        ra.attention(t(1, 4, 8, 32), t(1, 4, 8, 32, device="cpu"), t(1, 4, 8, 32))


def _cu(lens, dtype=torch.int32):
    import itertools

    return torch.tensor([0, *itertools.accumulate(lens)], dtype=dtype, device=DEVICE)


@pytest.mark.parametrize(
    "cu_q, cu_k, max_q, match",
    [
        (_cu([3, 5]), _cu([3, 5]), 5, None),
        (torch.tensor([0, 5, 3, 8], dtype=torch.int32, device=DEVICE), _cu([3, 5]), 5, "non-decreasing"),
        (_cu([3, 4]), _cu([3, 5]), 5, "ends at 7"),
        (_cu([3, 5], torch.int64), _cu([3, 5]), 5, "int32"),
        (torch.tensor([1, 4, 8], dtype=torch.int32, device=DEVICE), _cu([3, 5]), 5, "start at 0"),
        (_cu([3, 5]), _cu([3, 5]), 4, "max_seqlen"),
        (_cu([3, 5]), _cu([3, 2, 3]), 5, "different batch sizes"),
        (_cu([3, 5])[None], _cu([3, 5]), 5, "1-D"),
    ],
)
def test_varlen_bad_offsets(cu_q, cu_k, max_q, match):
    q, k = t(8, 4, 32), t(8, 2, 32)
    if match is None:
        assert ra.varlen_attention(q, k, k, cu_q, cu_k, max_q, 5).shape == q.shape
        return
    with pytest.raises(ValueError, match=match):
        ra.varlen_attention(q, k, k, cu_q, cu_k, max_q, 5)


def test_varlen_wrong_rank():
    with pytest.raises(ValueError, match="3 dimensions"):
        ra.varlen_attention(t(1, 8, 4, 32), t(8, 4, 32), t(8, 4, 32), _cu([8]), _cu([8]), 8, 8)


@pytest.mark.parametrize(("q", "k", "match"), [
    (t(1, 0, 8, 32), t(1, 0, 8, 32), r"q has 0 heads \(shape \(1, 0, 8, 32\)"),
    (t(1, 4, 8, 32), t(1, 0, 8, 32), r"k has 0 heads"),
])
def test_zero_heads_are_a_value_error(q, k, match):
    with pytest.raises(ValueError, match=match):
        ra.attention(q, k, k)
    with pytest.raises(ValueError, match=match):
        ra.attention(q, k, k, config={"BLOCK_M": 16})
    packed = [x[0].transpose(0, 1) for x in (q, k)]
    with pytest.raises(ValueError, match=match.replace(r"\(1, 0, 8, 32\)", r"\(8, 0, 32\)")):
        ra.varlen_attention(packed[0], packed[1], packed[1], _cu([3, 5]), _cu([3, 5]), 5, 5)


@pytest.mark.parametrize(("max_q", "words"), [
    (True, "max_seqlen_q must be an int from the longest sequence of cu_seqlens_q (5) to its packed total (8 "
           "tokens), got True"),
    (9, "got 9"),  # beyond the packed total: a grid of programs that do nothing
    (10**12, "got 1000000000000"),
    (5.0, "got 5.0"),
])
def test_varlen_max_seqlen_bounds(max_q, words):
    q = t(8, 4, 32)
    with pytest.raises(ValueError) as e:
        ra.varlen_attention(q, q, q, _cu([3, 5]), _cu([3, 5]), max_q, 5)
    assert words in str(e.value)
    assert ra.varlen_attention(q, q, q, _cu([3, 5]), _cu([3, 5]), 8, 5).shape == q.shape  # the total: allowed
