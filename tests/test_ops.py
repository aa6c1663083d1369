"""The custom ops under torch.compile(fullgraph=True).

backend="aot_eager" traces the whole graph through dynamo and AOTAutograd (where the fake implementations are
what shape inference runs) but skips Inductor's C++ code generation, which would only slow the CPU suite down:
the custom op is opaque to every backend, so Inductor would call the same kernel.
"""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from raytune_attn import api, ops, runtime
from raytune_attn.config import KNOBS

DEV = "cuda" if torch.cuda.is_available() else "cpu"
DT = torch.float32 if DEV == "cpu" else torch.float16


@pytest.fixture(autouse=True)
def fresh():
    runtime.clear_configs()
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def qkv(*shape_q, hkv=None):
    torch.manual_seed(0)
    q = torch.randn(*shape_q, device=DEV, dtype=DT)
    shape_k = list(shape_q)
    if hkv is not None:
        shape_k[-3 if len(shape_q) == 4 else -2] = hkv
    return q, torch.randn(*shape_k, device=DEV, dtype=DT), torch.randn(*shape_k, device=DEV, dtype=DT)


def test_config_encoding_round_trip():
    cfg = {"BLOCK_M": 16, "BLOCK_N": 32, "PRE_LOAD_V": True, "USE_TMA": False}
    enc = ops.encode_config(cfg)
    assert len(enc) == len(KNOBS) and ops.decode_config(enc) == cfg
    assert ops.encode_config(None) is None
    with pytest.raises(ValueError, match="unknown knob"):
        ops.encode_config({"BLOCK_Q": 16})


@pytest.mark.parametrize("config, match", [
    ({"BLOCK_M": "16"}, "BLOCK_M must be an integer"),
    ({"BLOCK_M": 16.9}, "BLOCK_M must be an integer"),
    ({"BLOCK_M": None}, "BLOCK_M must be an integer"),
    ({"maxnreg": -1}, "maxnreg must be >= 0"),  # -1 is the op's marker for an unset knob
    ({"PERSISTENT": 1}, "PERSISTENT must be true or false"),
    ({"num_warps": True}, "num_warps must be an integer"),
])
def test_config_values_are_checked_not_coerced(config, match):
    """What `raytune_attn.attention` refuses by type is refused before the op, not cast to another config."""
    with pytest.raises(ValueError, match=match):
        ops.encode_config(config)


def test_fake_implementations_give_shapes_without_running():
    with FakeTensorMode():
        q, k, v = (torch.empty(2, 4, 300, 64, dtype=torch.float16) for _ in range(3))
        out = torch.ops.raytune_attn.attention(q, k, v, True, None, None)
        assert out.shape == q.shape and out.dtype == q.dtype
        qv, kv = torch.empty(100, 4, 64, dtype=torch.bfloat16), torch.empty(100, 2, 64, dtype=torch.bfloat16)
        cu = torch.tensor([0, 40, 100], dtype=torch.int32)
        out = torch.ops.raytune_attn.varlen_attention(qv, kv, kv, cu, cu, 60, 60, False, 0.1, None)
        assert out.shape == qv.shape and out.dtype == torch.bfloat16


def test_opcheck_dense():
    q, k, v = qkv(1, 2, 17, 32)
    torch.library.opcheck(torch.ops.raytune_attn.attention.default, (q, k, v, True, None, None),
                          test_utils=("test_schema", "test_faketensor"))


def test_compile_fullgraph_dense_matches_eager():
    q, k, v = qkv(1, 4, 17, 32, hkv=2)
    cfg = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 2}

    def block(x, k, v):
        h = x * 2.0
        o = ops.attention(h, k, v, causal=True, config=cfg)
        o2 = ops.attention(h, k, v, causal=False, softmax_scale=0.1)  # tuned/default config looked up at run time
        return (o + o2).sum(-1)

    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    got = compiled(q, k, v)
    want = (api.attention(q * 2.0, k, v, causal=True, config=cfg)
            + api.attention(q * 2.0, k, v, causal=False, softmax_scale=0.1)).sum(-1)
    torch.testing.assert_close(got, want)


def test_compile_fullgraph_varlen_matches_eager():
    qv, kv, vv = qkv(29, 2, 32, hkv=1)
    cu = torch.tensor([0, 17, 29], dtype=torch.int32, device=DEV)

    def f(q, k, v, cu):
        return ops.varlen_attention(q, k, v, cu, cu, 17, 17, causal=True) + 1.0

    got = torch.compile(f, fullgraph=True, backend="aot_eager")(qv, kv, vv, cu)
    torch.testing.assert_close(got, api.varlen_attention(qv, kv, vv, cu, cu, 17, 17, causal=True) + 1.0)
