"""float64 references for the kernel tests, and the error measure they are judged by."""

import torch


def attention_reference(q, k, v, causal=False, scale=None):
    """Dense (B, Hq, Sq, D) attention in float64 on the CPU, GQA by repeating k/v heads, causal mask aligned
    bottom-right (row i sees keys j <= i + Sk - Sq). Rows that see no key output 0 (flash-attn's convention).
    Returns (out, lse) with lse = -inf on such rows."""
    q, k, v = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if causal:
        i = torch.arange(sq)[:, None]
        j = torch.arange(sk)[None, :]
        s = s.masked_fill(j > i + (sk - sq), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p @ v, lse


def varlen_reference(q, k, v, cu_q, cu_k, causal=False, scale=None):
    """Packed (total, H, D) attention: the dense reference per sequence. Returns (out, lse (H, total_q))."""
    outs, lses = [], []
    cq, ck = cu_q.tolist(), cu_k.tolist()
    for z in range(len(cq) - 1):
        qs = q[cq[z]:cq[z + 1]].transpose(0, 1)[None]
        ks = k[ck[z]:ck[z + 1]].transpose(0, 1)[None]
        vs = v[ck[z]:ck[z + 1]].transpose(0, 1)[None]
        o, lse = attention_reference(qs, ks, vs, causal, scale)
        outs.append(o[0].transpose(0, 1))
        lses.append(lse[0])
    return torch.cat(outs, 0), torch.cat(lses, 1)


def rel_err(out, ref) -> float:
    """||out - ref|| / ||ref||, NaN-propagating (a NaN anywhere fails every tolerance)."""
    out = out.detach().to("cpu", torch.float64)
    denom = ref.norm().item()
    return (out - ref).norm().item() / (denom if denom > 0 else 1.0)


# Tolerances on rel_err. float32 in the interpreter multiplies in true float32 (numpy): ~1e-7, so 1e-5 leaves
# room for accumulation order. On GPU a float32 dot runs in tf32 (10-bit mantissa): ~5e-4. fp16 operands
# (10-bit mantissa) and the fp16 rounding of P before the PV product: ~1e-3. bf16 (7-bit mantissa): ~4e-3.
TOLERANCE = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 1.6e-2}


def tolerance(dtype, device) -> float:
    if dtype == torch.float32 and str(device).startswith("cuda"):
        return 3e-3
    return TOLERANCE[dtype]
