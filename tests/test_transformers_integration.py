"""attn_implementation="raytune_attn" in Hugging Face transformers: greedy generation of a small random Llama
with GQA must give exactly the tokens SDPA gives, for one prompt and for a left-padded batch."""

import pytest
import torch
from conftest import DEVICE, HAS_GPU

transformers = pytest.importorskip("transformers")
integration = pytest.importorskip("raytune_attn.integrations.transformers")

NEW_TOKENS = 8


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The kernels run in the single-threaded interpreter; torch's intra-op threads around them only spin
    against it and against other processes on a 2-core machine, multiplying the CPU time of every torch op."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A 2-layer Llama (4 query heads over 2 KV heads, head dim 16) with random weights, saved locally so that
    `from_pretrained` selects the implementation the way users do, without any download."""
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-llama")
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    return path


def generate(path, impl, input_ids, attention_mask):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation=impl,
                                                              dtype=torch.float32).to(DEVICE).eval()
    assert model.config._attn_implementation == impl
    with torch.no_grad():
        return model.generate(input_ids=input_ids.to(DEVICE), attention_mask=attention_mask.to(DEVICE),
                              max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)


class _Counting:
    """Calls through to a kernel entry point and counts the calls (to show which path served each step)."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)


def test_one_prompt_matches_sdpa(saved_model, monkeypatch):
    ids = torch.tensor([[1, 5, 9, 33, 17, 80, 4]])
    mask = torch.ones_like(ids)
    prefill = _Counting(integration.attention)
    paged = _Counting(integration.paged_attn_fwd)
    monkeypatch.setattr(integration, "attention", prefill)
    monkeypatch.setattr(integration, "paged_attn_fwd", paged)
    ours = generate(saved_model, "raytune_attn", ids, mask)
    assert torch.equal(ours, generate(saved_model, "sdpa", ids, mask))
    layers = 2
    assert prefill.calls == layers  # the prompt: the tuned prefill kernel
    assert paged.calls == layers * (NEW_TOKENS - 1)  # every decode step: the paged kernel


@pytest.mark.slow
def test_left_padded_batch_matches_sdpa(saved_model):
    ids = torch.tensor([[0, 0, 0, 1, 7, 3, 99], [1, 5, 9, 33, 17, 80, 4]])
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])
    ours = generate(saved_model, "raytune_attn", ids, mask)
    assert torch.equal(ours, generate(saved_model, "sdpa", ids, mask))


@pytest.mark.skipif(HAS_GPU, reason="the mask's layout is checked only where it is on the CPU (no sync)")
def test_right_padding_is_refused(saved_model):
    model = transformers.AutoModelForCausalLM.from_pretrained(saved_model, attn_implementation="raytune_attn")
    ids = torch.tensor([[1, 7, 3, 0], [1, 5, 9, 33]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    with torch.no_grad(), pytest.raises(ValueError, match="left padding only"):
        model(input_ids=ids, attention_mask=mask)


def _decode_inputs(hq=4, hkv=2, d=16, sk=9, dtype=torch.float32):
    g = torch.Generator().manual_seed(5)
    return [torch.randn(2, h, s, d, generator=g).to(DEVICE, dtype) for h, s in ((hq, 1), (hkv, sk), (hkv, sk))]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_decode_step_in_half_precision_matches_sdpa(dtype):
    """A decode call (one query, no mask) in a half dtype; on the CPU bf16 takes the float32 detour, as the prefill
    kernel's API does (the interpreter has no bfloat16)."""
    from reference import rel_err, tolerance

    q, k, v = _decode_inputs(dtype=dtype)
    out, _ = integration.raytune_attention_forward(torch.nn.Module(), q, k, v, None)
    ref = torch.nn.functional.scaled_dot_product_attention(*(t.cpu().double() for t in (q, k, v)), enable_gqa=True)
    assert out.dtype == dtype and out.shape == (2, 1, 4, 16)
    assert rel_err(out, ref.transpose(1, 2)) < tolerance(dtype, DEVICE)


@pytest.mark.parametrize("shapes, error, match", [
    (dict(hq=3, hkv=2), ValueError, "multiple of key/value heads"),
    (dict(d=300), ValueError, "head dim 300"),
    (dict(), "grad", "requires grad"),
], ids=["heads", "head-dim", "needs-grad"])
def test_decode_inputs_get_the_prefill_checks(shapes, error, match):
    """The decode (paged) path refuses what the prefill path refuses, before any launch."""
    from raytune_attn.inputs import ForwardOnlyError

    q, k, v = _decode_inputs(**shapes)
    if error == "grad":
        error, q = ForwardOnlyError, q.requires_grad_()
    with pytest.raises(error, match=match):
        integration.raytune_attention_forward(torch.nn.Module(), q, k, v, None)
