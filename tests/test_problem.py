"""Problem keys: round trip, validation, varlen lengths and the FLOP count."""

import pytest

from raytune_attn.problem import Problem


def test_key_round_trip():
    p = Problem(batch=4, hq=32, hkv=8, seqlen_q=1000, seqlen_k=1000, head_dim=128, causal=True, varlen=True)
    assert Problem.from_key(p.key) == p
    assert Problem.from_dict(p.to_dict()) == p


def test_gqa_group_is_query_heads_per_kv_head():
    base = dict(batch=1, seqlen_q=32, seqlen_k=32, head_dim=64, causal=False)
    assert [Problem(hq=hq, hkv=hkv, **base).gqa_group for hq, hkv in ((8, 8), (32, 8), (32, 1))] == [1, 4, 32]


@pytest.mark.parametrize(
    "fields, match",
    [
        (dict(hq=6, hkv=4), "multiple"),
        (dict(head_dim=320), "head_dim"),
        (dict(batch=0), "batch"),
        (dict(dtype="int8"), "dtype"),
        (dict(varlen=True, seqlen_k=64), "varlen"),
        (dict(causal="maybe"), "causal must be true or false, got 'maybe'"),
        (dict(varlen=1), "varlen must be true or false"),
    ],
)
def test_invalid_problems(fields, match):
    base = dict(batch=1, hq=4, hkv=4, seqlen_q=32, seqlen_k=32, head_dim=64, causal=False)
    with pytest.raises(ValueError, match=match):
        Problem(**{**base, **fields})


def test_a_table_rows_numpy_flags_are_plain_bools():
    import numpy as np

    p = Problem(batch=1, hq=4, hkv=4, seqlen_q=32, seqlen_k=32, head_dim=64, causal=np.bool_(True),
                varlen=np.bool_(False))
    assert type(p.causal) is bool and type(p.varlen) is bool
    assert p == Problem.from_key(p.key) and p.key.endswith("-causal-bfloat16")


def test_bad_key_and_unknown_field():
    with pytest.raises(ValueError, match="not a problem key"):
        Problem.from_key("dense-b1")
    with pytest.raises(ValueError, match="unknown problem field"):
        Problem.from_dict({"batch": 1, "heads": 2})


def test_varlen_lengths_deterministic_and_bounded():
    p = Problem(batch=16, hq=4, hkv=4, seqlen_q=300, seqlen_k=300, head_dim=64, causal=True, varlen=True)
    lens = p.seqlens(seed=3)
    assert lens == p.seqlens(seed=3) and len(lens) == 16
    assert lens[0] == 300 and all(1 <= n <= 300 for n in lens)
    # causal FLOPs: half of 4 * H * sum(L^2) * D
    assert p.flops(seed=3) == pytest.approx(4 * 4 * sum(n * n for n in lens) * 64 / 2)


def test_dense_flops():
    p = Problem(batch=2, hq=16, hkv=16, seqlen_q=512, seqlen_k=1024, head_dim=128, causal=False)
    assert p.flops() == 4 * 2 * 16 * 512 * 1024 * 128
