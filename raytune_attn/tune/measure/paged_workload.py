"""Inputs for a `PagedProblem`, the paged kernel's call on them, its reference, and the SDPA baseline over the
gathered (de-paged) K/V: what the sweep's trials, the compile pool and the benchmark measure paged configs on.

The cache is laid out as a server's would be: each sequence's blocks are scattered over the cache in a random
order (from the seed), so no config is timed on contiguous pages it would not see in serving. Every slot past a
sequence's context in its last block, and one spare block no table names, hold NaN: a config that reads them
fails the reference check.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

import torch

from raytune_attn.kernels.paged_attn import paged_attn_fwd
from raytune_attn.paged import check_paged
from raytune_attn.paged_problem import PagedProblem
from raytune_attn.tune.measure.sdpa_reference import sdpa_float32
from raytune_attn.validation import check_paged as check_paged_config

_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
_FILL_CHUNK = 1 << 26  # elements drawn at a time: the float32 draw of a 30 GB cache would double its size


@dataclass
class PagedWorkload:
    problem: PagedProblem
    q: torch.Tensor  # (total_q, Hq, D)
    k: torch.Tensor  # the K cache, (num_blocks, block_size, Hkv, D)
    v: torch.Tensor  # the V cache
    block_table: torch.Tensor
    seqused_k: torch.Tensor
    cu_seqlens_q: torch.Tensor
    _checked: dict = field(default_factory=dict, repr=False)  # config items -> validated config

    def __post_init__(self):
        # Checked once here (values too on the CPU), not on every timed call.
        p = self.problem
        check_paged(self.q, self.k, self.v, self.block_table, self.seqused_k, self.cu_seqlens_q, p.seqlen_q,
                    p.seqlen_k)

    def _config(self, config: dict) -> dict:
        key = tuple(sorted(config.items()))
        cfg = self._checked.get(key)
        if cfg is None:
            p = self.problem
            cfg = self._checked[key] = check_paged_config(config, head_dim=p.head_dim, group=p.gqa_group)
        return cfg

    def run(self, config: dict, out: torch.Tensor | None = None, compile_only: bool = False):
        """One launch with `config`: the kernel call of `raytune_attn.paged_attention` without its input checks."""
        p = self.problem
        if out is None:
            out = torch.empty_like(self.q)
        return paged_attn_fwd(self.q, self.k, self.v, out, self.block_table, self.seqused_k, self.cu_seqlens_q,
                              p.seqlen_q, self._config(config), causal=True, scale=p.head_dim**-0.5,
                              compile_only=compile_only)

    def check_run(self, config: dict) -> torch.Tensor:
        """One launch into an output filled with NaN (a row left unwritten fails the check)."""
        return self.run(config, out=torch.full_like(self.q, float("nan")))

    def compile(self, config: dict):
        """Validate `config` and compile it without launching; raises InvalidConfig."""
        return self.run(config, compile_only=True)


def make_paged_workload(problem: PagedProblem, device: str | torch.device = "cuda", seed: int = 0,
                        random: bool = True) -> PagedWorkload:
    """Random normal Q and caches (drawn on the device, from `seed`), the block table from the problem's own
    seed. `random=False` leaves the tensors unfilled (a compile process needs shapes only)."""
    p, dev = problem, torch.device(device)
    dtype = _DTYPES[p.dtype]
    lens = p.lengths()
    pages = [-(-k // p.block_size) for _, k in lens]
    num_blocks = sum(pages) + 1  # + one spare block, never in a table
    perm = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(p.seed)).tolist()
    spare, ids = perm[0], perm[1:]
    table = torch.zeros((len(lens), max(pages)), dtype=torch.int32)
    starts = list(itertools.accumulate(pages, initial=0))
    for z, n in enumerate(pages):
        table[z, :n] = torch.tensor(ids[starts[z]:starts[z] + n], dtype=torch.int32)
    cu = torch.tensor([0, *itertools.accumulate(q for q, _ in lens)], dtype=torch.int32)
    shape = (num_blocks, p.block_size, p.hkv, p.head_dim)
    q = torch.empty((int(cu[-1]), p.hq, p.head_dim), dtype=dtype, device=dev)
    k, v = (torch.empty(shape, dtype=dtype, device=dev) for _ in range(2))
    if random:
        g = torch.Generator(device=dev).manual_seed(seed)
        for t in (q, k, v):
            _randn_(t, g)
        _poison(k, v, table, lens, spare, p.block_size)
    return PagedWorkload(p, q, k, v, table.to(dev), torch.tensor([c for _, c in lens], dtype=torch.int32,
                                                                     device=dev), cu.to(dev))


def compile_twin(problem: PagedProblem) -> PagedProblem:
    """A small problem that compiles to the same binaries: contexts capped at two pages (the kernel specializes on
    whether a sequence spans one page, never on lengths), query runs kept (their longest decides whether each
    sequence is one query tile). A compile process then holds megabytes, not the real cache's gigabytes."""
    return dataclasses.replace(problem, seqlen_k=min(problem.seqlen_k, 2 * problem.block_size))


def compile_paged(problem: PagedProblem, config: dict, device: str | torch.device = "cuda"):
    """Compile and load `config`'s binaries for `problem` on `device` without launching them (a compile pool's
    job beside a GPU that is timing); the main kernel's compiled object (None in the interpreter). Raises
    InvalidConfig for a config the paged kernel cannot run."""
    return make_paged_workload(compile_twin(problem), device=device, random=False).compile(config)


def _randn_(t: torch.Tensor, g: torch.Generator) -> None:
    flat = t.view(-1)
    for a in range(0, flat.numel(), _FILL_CHUNK):
        b = min(a + _FILL_CHUNK, flat.numel())
        flat[a:b] = torch.randn(b - a, generator=g, dtype=torch.float32, device=t.device).to(t.dtype)


def _poison(k, v, table, lens, spare: int, page: int) -> None:
    """NaN in every slot no sequence owns: past each context in its last block, and the spare block."""
    for t in (k, v):
        t[spare] = float("nan")
    for z, (_, ctx) in enumerate(lens):
        if ctx % page:
            last = int(table[z, (ctx - 1) // page])
            for t in (k, v):
                t[last, ctx % page:] = float("nan")


def gathered(w: PagedWorkload) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Each sequence's (q, k, v) as (heads, tokens, D), its K/V read back from the pages it owns."""
    out = []
    cu = w.cu_seqlens_q.tolist()
    page = w.problem.block_size
    for z, ctx in enumerate(w.seqused_k.tolist()):
        ids = w.block_table[z, : -(-ctx // page)].long()
        k, v = (t[ids].reshape(-1, *t.shape[2:])[:ctx] for t in (w.k, w.v))
        out.append(tuple(t.transpose(0, 1) for t in (w.q[cu[z]:cu[z + 1]], k, v)))
    return out


def paged_reference(w: PagedWorkload) -> torch.Tensor:
    """float32 attention over each sequence's gathered K/V (bottom-right causal), packed as q is."""
    outs = [sdpa_float32(q[None], k[None], v[None], True)[0].transpose(0, 1) for q, k, v in gathered(w)]
    return torch.cat(outs, 0)


def sdpa_gathered(w: PagedWorkload):
    """The baseline: PyTorch SDPA (its own backend choice) over K/V gathered into a padded batch with a mask
    (bottom-right causal and each sequence's length), the gather done once outside the timing. Returns a
    function whose output is packed like q."""
    p = w.problem
    seqs = gathered(w)
    n, sq, sk = len(seqs), p.seqlen_q, p.seqlen_k
    dev, dtype = w.q.device, w.q.dtype
    q = torch.zeros((n, p.hq, sq, p.head_dim), dtype=dtype, device=dev)
    k = torch.zeros((n, p.hkv, sk, p.head_dim), dtype=dtype, device=dev)
    v = torch.zeros_like(k)
    mask = torch.zeros((n, 1, sq, sk), dtype=torch.bool, device=dev)
    i = torch.arange(sq, device=dev)[:, None]
    j = torch.arange(sk, device=dev)[None, :]
    for z, (qz, kz, vz) in enumerate(seqs):
        lq, lk = qz.shape[1], kz.shape[1]
        q[z, :, :lq], k[z, :, :lk], v[z, :, :lk] = qz, kz, vz
        mask[z, 0] = (j <= i + lk - lq) & (j < lk) & (i < lq)
    mask[:, :, :, 0] |= ~mask.any(-1)  # padded query rows see one key (no NaN); they are dropped below
    rows = [(z, s.shape[1]) for z, s in enumerate(q_ for q_, _, _ in seqs)]
    gqa = p.hq != p.hkv

    def fn():
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
        return out

    def packed(out):
        return torch.cat([out[z, :, :lq].transpose(0, 1) for z, lq in rows], 0)

    return fn, packed
