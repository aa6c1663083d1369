"""The device memory a problem needs when it is benchmarked, counted before anything is allocated.

A problem set is read on the driver before Ray starts, so the smallest GPU memory of the cluster is not known yet:
problems are checked against a cap, `DEFAULT_MAX_BYTES` (64 GiB: what an 80 GB GPU holds next to the CUDA context
and the caching allocator's slack), or the bytes in `$RAYTUNE_ATTN_MAX_PROBLEM_BYTES`. Before that, an absolute
bound: batch x seqlen at most `MAX_TOKENS` (2^22, four times a million-token context and eight times the largest
Llama prefill set): one sequence of 2^22 tokens at 32 heads of 128 is 3e17 flop, ten minutes a call on an H100,
and a benchmark times tens of calls. A problem past either raises `ProblemTooLarge` naming the problem and the
bytes (or the tokens).

What is counted (bytes of the problem's dtype unless said; tokens are batch x seqlen, varlen: the drawn lengths):
- inputs q, k, v and two outputs (the timed one and the correctness check's NaN-filled one), the log-sum-exp
  (float32 per query row and head), varlen offsets (int32);
- the float32 reference (`tune.measure.workload.reference`): float32 copies of q, k, v, its output, and for
  dense causal with seqlen_q != seqlen_k its Sq x Sk mask (boolean, and the float32 form SDPA adds); on a CPU
  device that masked call runs SDPA's math backend, which holds the float32 scores (batch x heads x Sq x Sk);
- with `baselines` on a GPU (the benchmark times SDPA there only), SDPA's largest extra workspace: varlen's nested
  layout repeats K and V to the query heads, the padded layout pads q, k, v to the longest sequence and builds a
  (batch, 1, S, S) additive mask; the dense backends work in tiles.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from raytune_attn.problem import Problem

GiB = 1 << 30
DEFAULT_MAX_BYTES = 64 * GiB
ENV_VAR = "RAYTUNE_ATTN_MAX_PROBLEM_BYTES"
MAX_TOKENS = 1 << 22
# Varlen lengths are drawn (Problem.seqlens) up to this batch; above it the maximum length stands for every one.
_DRAW_MAX_BATCH = 1 << 16
_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


class ProblemTooLarge(ValueError):
    """A problem whose benchmark would not fit in memory; the message names the problem and the bytes."""


@dataclass(frozen=True)
class Footprint:
    """Bytes per part (in the order listed in the module docstring) and their sum."""

    parts: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(b for _, b in self.parts)

    def describe(self) -> str:
        big = sorted(self.parts, key=lambda p: -p[1])[:3]
        return f"{fmt_bytes(self.total)} (" + ", ".join(f"{n} {fmt_bytes(b)}" for n, b in big) + ", ...)"


def fmt_bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def max_bytes() -> int:
    """The cap: $RAYTUNE_ATTN_MAX_PROBLEM_BYTES (a positive integer of bytes) if set, else DEFAULT_MAX_BYTES."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"${ENV_VAR} must be a positive number of bytes, got {raw!r}")
    return value


def check_tokens(p: Problem) -> None:
    """ProblemTooLarge when batch x seqlen passes MAX_TOKENS (checked before anything is multiplied further)."""
    for name, seqlen in (("seqlen_q", p.seqlen_q), ("seqlen_k", p.seqlen_k)):
        if p.batch * seqlen > MAX_TOKENS:
            raise ProblemTooLarge(f"{p.key}: batch {p.batch} x {name} {seqlen} = {p.batch * seqlen} tokens, more than "
                                  f"{MAX_TOKENS}, the bound on what a benchmark can time")


def footprint(p: Problem, *, baselines: bool = True, device: str = "cuda") -> Footprint:
    """The bytes benchmarking `p` on `device` ("cuda" or "cpu") needs (see the module docstring)."""
    check_tokens(p)
    es = _BYTES[p.dtype]
    lens = p.seqlens() if p.varlen and p.batch <= _DRAW_MAX_BATCH else None
    tq = sum(lens) if lens else p.batch * p.seqlen_q
    tk = sum(lens) if lens else p.batch * p.seqlen_k
    qo, kv = tq * p.hq * p.head_dim, tk * p.hkv * p.head_dim  # elements of q (and of an output), of k (and v)
    parts = [("q", qo * es), ("k+v", 2 * kv * es), ("outputs", 2 * qo * es), ("lse", tq * p.hq * 4)]
    if p.varlen:
        parts.append(("cu_seqlens", (p.batch + 1) * 4))
    parts.append(("reference", (2 * qo + 2 * kv) * 4))
    if p.causal and p.seqlen_q != p.seqlen_k and not p.varlen:
        parts.append(("reference mask", p.seqlen_q * p.seqlen_k * (1 + 4)))
        if device == "cpu":
            parts.append(("reference scores", p.batch * p.hq * p.seqlen_q * p.seqlen_k * 4))
    if baselines and device != "cpu":
        parts.append(("baseline workspace", _baseline_workspace(p, es, tk)))
    return Footprint(tuple(parts))


def _baseline_workspace(p: Problem, es: int, tk: int) -> int:
    if not p.varlen:
        return 0  # the flash, cuDNN and memory-efficient backends work in tiles
    s = -(-p.seqlen_q // 16) * 16  # the padded layout's length: the longest sequence, 16-aligned
    njt = 2 * tk * p.hq * p.head_dim * es
    padded = (p.batch * s * (p.hq + 2 * p.hkv) * p.head_dim + p.batch * s * s) * es
    return max(njt, padded)


def check(p: Problem, limit: int | None = None, *, baselines: bool = True, device: str = "cuda") -> Footprint:
    """The footprint of `p`, or ProblemTooLarge naming the problem, its bytes and the cap (default: max_bytes())."""
    limit = max_bytes() if limit is None else limit
    fp = footprint(p, baselines=baselines, device=device)
    if fp.total > limit:
        raise ProblemTooLarge(f"{p.key}: needs {fp.total} bytes = {fp.describe()} to benchmark, more than the cap of "
                              f"{limit} bytes ({fmt_bytes(limit)}; set ${ENV_VAR} to change it)")
    return fp
