"""Inputs for a `Problem`, the kernel call on them, and the reference that every measured config must match
(a `PagedProblem`'s: `paged_workload.py`, through the same `make_workload` and `reference`).

The benchmark, the exhaustive landscapes and the sweep's trials all build their tensors here, so every config
of a problem is timed on the same data and checked against the same reference.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import torch

from raytune_attn import validation
from raytune_attn.inputs import check_dense, check_varlen
from raytune_attn.kernels.flash_attn import flash_attn_fwd
from raytune_attn.paged_problem import PagedProblem
from raytune_attn.problem import Problem
from raytune_attn.tune.measure.paged_workload import PagedWorkload, make_paged_workload, paged_reference
from raytune_attn.tune.measure.sdpa_reference import sdpa_float32

_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}

# ||out - ref|| / ||ref|| accepted for a measured config. The reference runs in float32 from the same low-precision
# inputs, so the error is the kernel's own rounding: bf16 P and output (7-bit mantissa) stay near 4e-3; a wrong
# kernel (a skipped block, a bad mask) lands at 1e-1 or above.
ACCEPT_REL_ERR = {torch.bfloat16: 2e-2, torch.float16: 5e-3, torch.float32: 1e-3}


@dataclass
class Workload:
    problem: Problem
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    cu_seqlens: torch.Tensor | None = None  # varlen: one set of offsets for q and k
    _checked: dict = field(default_factory=dict, repr=False)  # config items -> validated config

    def __post_init__(self):
        # The inputs are checked once here, not on every timed call: the public varlen entry point reads the
        # offsets on the host (a device sync), and inside a timed call that sync, not the kernel, is what a
        # small problem would measure (a tenth of a millisecond, where the kernel takes microseconds).
        p = self.problem
        if p.varlen:
            check_varlen(self.q, self.k, self.v, self.cu_seqlens, self.cu_seqlens, p.seqlen_q, p.seqlen_k)
        else:
            check_dense(self.q, self.k, self.v)

    def _config(self, config: dict) -> dict:
        """The validated config, checked against these inputs once (raises InvalidConfig)."""
        key = tuple(sorted(config.items()))
        cfg = self._checked.get(key)
        if cfg is None:
            cfg = validation.prepare(config, self.q, self.k, self.v)  # TMA alignment included: the inputs never move
            self._checked[key] = cfg
        return cfg

    def run(self, config: dict, **kw) -> torch.Tensor:
        """One launch of the kernel with `config` (what the benchmarks time): the same kernel call as
        `raytune_attn.attention` / `varlen_attention`, without their per-call input checks."""
        p = self.problem
        varlen = {}
        if p.varlen:
            varlen = dict(cu_seqlens_q=self.cu_seqlens, cu_seqlens_k=self.cu_seqlens, max_seqlen_q=p.seqlen_q,
                          max_seqlen_k=p.seqlen_k)
        return flash_attn_fwd(self.q, self.k, self.v, self._config(config), causal=p.causal, **varlen, **kw)

    def check_run(self, config: dict) -> torch.Tensor:
        """One launch into an output filled with NaN, for the correctness check: a row the kernel leaves unwritten
        fails it. (An output from torch.empty is often the block the caching allocator just took back from the
        previous launch, whose correct rows would pass for this config's.)"""
        out = torch.full_like(self.q, float("nan"), memory_format=torch.contiguous_format)
        return self.run(config, out=out)

    def compile(self, config: dict):
        """Validate `config` for this workload and compile it without launching; raises InvalidConfig."""
        return self.run(config, compile_only=True)


def make_workload(problem: Problem, device: str | torch.device = "cuda", seed: int = 0,
                  random: bool = True) -> Workload | PagedWorkload:
    """Random normal inputs (never zeros: they hide unwritten outputs and run faster than real data).

    Drawn on the target device: a Llama prefill key packs up to half a million tokens (a billion elements for Q),
    which the CPU's generator needs seconds for and a GPU's milliseconds. `random=False` leaves them unfilled: a
    compile process needs only their shapes, dtypes and alignment, and must launch no kernel on a GPU where a
    benchmark actor may be timing."""
    if isinstance(problem, PagedProblem):
        return make_paged_workload(problem, device=device, seed=seed, random=random)
    dev = torch.device(device)
    g = torch.Generator(device=dev).manual_seed(seed) if random else None
    dtype = _DTYPES[problem.dtype]

    def rand(*shape):
        if not random:
            return torch.empty(*shape, dtype=dtype, device=dev)
        return torch.randn(*shape, generator=g, dtype=torch.float32, device=dev).to(dtype=dtype)

    p = problem
    if p.varlen:
        lens = p.seqlens(seed)
        cu = torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32, device=device)
        total = int(cu[-1])
        return Workload(p, rand(total, p.hq, p.head_dim), rand(total, p.hkv, p.head_dim),
                        rand(total, p.hkv, p.head_dim), cu)
    return Workload(p, rand(p.batch, p.hq, p.seqlen_q, p.head_dim), rand(p.batch, p.hkv, p.seqlen_k, p.head_dim),
                    rand(p.batch, p.hkv, p.seqlen_k, p.head_dim))


def reference(w: Workload) -> torch.Tensor:
    """float32 attention through PyTorch SDPA on the workload's device (memory-efficient on GPU: a float64
    score matrix for the largest problems would need tens of GB). Bottom-right causal via an explicit mask when
    Sq != Sk. Paged workloads: over each sequence's K/V gathered from its pages (paged_workload.py)."""
    if isinstance(w, PagedWorkload):
        return paged_reference(w)
    if w.problem.varlen:
        cu = w.cu_seqlens.tolist()
        outs = []
        for a, b in itertools.pairwise(cu):
            q, k, v = (t[a:b].transpose(0, 1)[None] for t in (w.q, w.k, w.v))
            outs.append(sdpa_float32(q, k, v, w.problem.causal)[0].transpose(0, 1))
        return torch.cat(outs, 0)
    return sdpa_float32(w.q, w.k, w.v, w.problem.causal)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    diff = (out.float() - ref).norm().item()
    return diff / max(ref.norm().item(), 1e-30)


def accept(out: torch.Tensor, ref: torch.Tensor) -> tuple[bool, float]:
    """Whether a config's output matches the reference (NaN never does), and its relative error."""
    err = rel_err(out, ref)
    return bool(err == err and err < ACCEPT_REL_ERR[out.dtype]), err
