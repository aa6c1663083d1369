"""The inference core in a few lines: load a tuned artifact (optional), call `attention` on dense tensors and
`varlen_attention` on a packed batch, and check both against PyTorch SDPA. Needs only torch and triton; without a
GPU the kernel runs in the Triton interpreter (float32, small shapes, a few seconds).

    python examples/quickstart.py [raytune-results/<sweep>/best_configs.json]
"""

import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # read when the kernel is defined, so before its first import

import raytune_attn  # noqa: E402 - after the interpreter switch

F = torch.nn.functional


def main(argv: list[str]) -> int:
    if argv:
        # An artifact tuned on another GPU, arch or Triton major version warns once and the defaults are used.
        try:
            raytune_attn.load_configs(argv[0])
        except (OSError, ValueError) as e:  # no such file, or not a valid artifact (ArtifactError): one line
            print(f"quickstart: {e}", file=sys.stderr)
            return 2
    dev, dt = ("cuda", torch.bfloat16) if torch.cuda.is_available() else ("cpu", torch.float32)
    q = torch.randn(2, 8, 256, 64, device=dev, dtype=dt)  # (batch, heads, seq, head_dim)
    k = torch.randn(2, 2, 256, 64, device=dev, dtype=dt)  # 2 key/value heads: GQA 4:1
    v = torch.randn_like(k)
    out = raytune_attn.attention(q, k, v, causal=True)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    print(f"attention: max |diff| to SDPA {(out - ref).abs().max().item():.2e}")

    # Two sequences of 100 and 156 tokens packed along dim 0, flash-attn's varlen layout: (tokens, heads, head_dim).
    cu = torch.tensor([0, 100, 256], device=dev, dtype=torch.int32)
    qp, kp, vp = (t[0].transpose(0, 1).contiguous() for t in (q, k, v))
    out_p = raytune_attn.varlen_attention(qp, kp, vp, cu, cu, 156, 156, causal=True)
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True):
        seq = [t[a:b].transpose(0, 1) for t in (qp, kp, vp)]
        ref = F.scaled_dot_product_attention(*seq, is_causal=True, enable_gqa=True).transpose(0, 1)
        print(f"varlen_attention, tokens {a}-{b}: max |diff| to SDPA {(out_p[a:b] - ref).abs().max().item():.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
