"""Paged-KV attention workloads (`raytune_attn.paged_attention` batches): the unit a search tunes and the artifact
keys for serving calls.

A paged problem is a batch of sequences in groups. Each group has a count and, for its sequences, the number of
new query tokens (`q_len`) and of cached keys, new tokens included (`context`, what `seqused_k` holds). Each is
fixed, one value per sequence, or uniform between two bounds, drawn from `seed`; the first sequence of a group
takes the upper bound, so the problem's longest query run and context (its `seqlen_q` and `seqlen_k`, the
`max_seqlen_q` and `max_seqlen_k` of the call) are the bounds given. A context shorter than its sequence's
q_len is raised to it (the new tokens are in the cache). Pure decode is one group of q_len 1; a mixed batch has
a group of prefill chunks beside a group of decode rows.

`PagedProblem` is a `Problem` whose dense fields are its summary (batch = sequences, seqlen_q / seqlen_k the
longest query run and context, causal, varlen), so the sweep's rows, priors and reports read it as they read
any problem; its key (`paged-...`) names all of it, e.g.
`paged-n32q1k2048~4096-bs16-hq32-hkv8-d128-bfloat16-seed0` (32 decode rows over 2048-4096 cached keys).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import numpy as np

from raytune_attn.problem import DTYPES, Problem

BLOCK_SIZES = (16, 32, 64, 128, 256)  # the kernel's page sizes (`paged.py`)
MAX_HEAD_DIM = 256


@dataclass(frozen=True)
class Lengths:
    """Lengths of a group's sequences: fixed (`values`: one for all, or one per sequence) or uniform in [lo, hi]."""

    values: tuple[int, ...] = ()
    lo: int = 0
    hi: int = 0

    @classmethod
    def parse(cls, spec, name: str) -> Lengths:
        """From a problems file: an int, a list (one per sequence) or {uniform: [lo, hi]}."""
        if isinstance(spec, dict):
            if set(spec) != {"uniform"}:
                raise ValueError(f"{name}: a distribution is {{uniform: [lo, hi]}}, got {spec!r}")
            b = spec["uniform"]
            if not (isinstance(b, list) and len(b) == 2):
                raise ValueError(f"{name}: uniform needs [lo, hi], got {b!r}")
            out = cls(lo=b[0], hi=b[1])
        elif isinstance(spec, list):
            out = cls(values=tuple(spec))
        else:
            out = cls(values=(spec,))
        out.check(name)
        return out

    def check(self, name: str) -> None:
        for v in (*self.values, *((self.lo, self.hi) if not self.values else ())):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: lengths must be positive integers, got {v!r}")
        if not self.values and self.lo > self.hi:
            raise ValueError(f"{name}: uniform [lo, hi] needs lo <= hi, got [{self.lo}, {self.hi}]")

    @property
    def max(self) -> int:
        return max(self.values) if self.values else self.hi

    def capped(self, cap: int) -> Lengths:
        if self.values:
            return Lengths(values=tuple(min(v, cap) for v in self.values))
        return Lengths(lo=min(self.lo, cap), hi=min(self.hi, cap))

    def draw(self, count: int, rng: np.random.Generator) -> list[int]:
        if len(self.values) == 1:
            return [self.values[0]] * count
        if self.values:
            return list(self.values)
        return [self.hi] + [int(x) for x in rng.integers(self.lo, self.hi + 1, size=count - 1)]

    @property
    def token(self) -> str:
        if self.values:
            return ".".join(map(str, self.values))
        return f"{self.lo}~{self.hi}"

    @classmethod
    def from_token(cls, token: str) -> Lengths:
        if "~" in token:
            lo, hi = token.split("~")
            return cls(lo=int(lo), hi=int(hi))
        return cls(values=tuple(int(v) for v in token.split(".")))


@dataclass(frozen=True)
class SeqGroup:
    """`count` sequences with `q_len` new tokens each over `context` cached keys (new tokens included)."""

    count: int
    q_len: Lengths
    context: Lengths

    def check(self, where: str) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"{where}num_seqs must be a positive integer, got {self.count!r}")
        self.q_len.check(f"{where}q_len")
        self.context.check(f"{where}context")
        for name, spec in (("q_len", self.q_len), ("context", self.context)):
            if len(spec.values) > 1 and len(spec.values) != self.count:
                raise ValueError(f"{where}{name}: {len(spec.values)} lengths for {self.count} sequences")

    @property
    def token(self) -> str:
        return f"n{self.count}q{self.q_len.token}k{self.context.token}"


@dataclass(frozen=True)
class PagedProblem(Problem):
    """One paged-KV batch (see the module docstring). Build it with `PagedProblem.make`; `batch`, `seqlen_q`,
    `seqlen_k`, `causal` and `varlen` are derived from the groups. Given lower than the groups' longest,
    `seqlen_q`/`seqlen_k` cap every length (`dataclasses.replace` with shorter lengths gives a smaller problem of
    the same kind, as the compile pool's twin asks)."""

    groups: tuple[SeqGroup, ...] = ()
    block_size: int = 16
    seed: int = 0

    @classmethod
    def make(cls, groups, *, block_size: int, hq: int, hkv: int, head_dim: int, dtype: str = "bfloat16",
             seed: int = 0) -> PagedProblem:
        return cls(batch=1, hq=hq, hkv=hkv, seqlen_q=0, seqlen_k=0, head_dim=head_dim, causal=True, dtype=dtype,
                   varlen=True, groups=tuple(groups), block_size=block_size, seed=seed)

    def __post_init__(self):
        if not self.groups:
            raise ValueError("a paged problem needs at least one group of sequences")
        for i, g in enumerate(self.groups):
            g.check(f"groups[{i}]: " if len(self.groups) > 1 else "")
        groups = self.groups
        for field, cap in (("q_len", self.seqlen_q), ("context", self.seqlen_k)):
            if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0:
                groups = tuple(dataclasses.replace(g, **{field: getattr(g, field).capped(cap)}) for g in groups)
        set_ = object.__setattr__.__get__(self)
        set_("groups", groups)
        set_("batch", sum(g.count for g in groups))
        set_("seqlen_q", max(g.q_len.max for g in groups))
        set_("seqlen_k", max(max(g.context.max, g.q_len.max) for g in groups))
        set_("causal", True)
        set_("varlen", True)
        self._check_fields()

    def _check_fields(self) -> None:
        for name in ("hq", "hkv", "head_dim", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "seed" else 1):
                raise ValueError(f"{name} must be a {'non-negative' if name == 'seed' else 'positive'} integer, "
                                 f"got {v!r}")
        if self.hq % self.hkv:
            raise ValueError(f"hq={self.hq} must be a multiple of hkv={self.hkv}")
        if self.head_dim > MAX_HEAD_DIM:
            raise ValueError(f"head_dim={self.head_dim} is above the supported {MAX_HEAD_DIM}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r} must be one of {DTYPES}")
        if self.block_size not in BLOCK_SIZES:
            raise ValueError(f"block_size={self.block_size!r} must be one of {BLOCK_SIZES}")

    @property
    def kind(self) -> str:
        return "paged"

    @property
    def key(self) -> str:
        groups = "+".join(g.token for g in self.groups)
        return (f"paged-{groups}-bs{self.block_size}-hq{self.hq}-hkv{self.hkv}-d{self.head_dim}-{self.dtype}"
                f"-seed{self.seed}")

    @classmethod
    def from_key(cls, key: str) -> PagedProblem:
        m = _KEY_RE.fullmatch(key)
        if not m:
            raise ValueError(f"not a paged problem key: {key!r} (expected e.g. {_EXAMPLE_KEY})")
        groups = [SeqGroup(int(n), Lengths.from_token(q), Lengths.from_token(k))
                  for n, q, k in _GROUP_RE.findall(m["groups"])]
        return cls.make(groups, block_size=int(m["bs"]), hq=int(m["hq"]), hkv=int(m["hkv"]), head_dim=int(m["d"]),
                        dtype=m["dtype"], seed=int(m["seed"]))

    @classmethod
    def from_fields(cls, d: dict) -> PagedProblem:
        """From a problems file's entry (merged over its defaults; `kind: paged`)::

            {num_seqs: 32, q_len: 1, context: {uniform: [2049, 4096]}, block_size: 16, hq: 32, hkv: 8,
             head_dim: 128, dtype: bfloat16, seed: 0}
            {mix: [{num_seqs: 2, q_len: {uniform: [512, 2048]}, context: 8192}, {num_seqs: 32, q_len: 1, ...}]}

        q_len and context: an int, a list (one per sequence) or {uniform: [lo, hi]}."""
        d = {k: v for k, v in d.items() if k != "kind"}
        unknown = sorted(set(d) - _FIELDS)
        if unknown:
            raise ValueError(f"unknown paged problem field(s) {unknown}; known fields are {sorted(_FIELDS)}")
        if "mix" in d and any(k in d for k in _GROUP_FIELDS):
            raise ValueError(f"give either mix or {'/'.join(sorted(_GROUP_FIELDS))}, not both")
        raw = d.get("mix", [{k: d[k] for k in _GROUP_FIELDS if k in d}])
        if not isinstance(raw, list) or not raw:
            raise ValueError("mix must be a non-empty list of {num_seqs, q_len, context}")
        groups = [_group(g, f"mix[{i}]: " if "mix" in d else "") for i, g in enumerate(raw)]
        missing = sorted(k for k in ("block_size", "hq", "hkv", "head_dim") if k not in d)
        if missing:
            raise ValueError(f"paged problem field(s) {missing} missing")
        return cls.make(groups, block_size=d["block_size"], hq=d["hq"], hkv=d["hkv"], head_dim=d["head_dim"],
                        dtype=d.get("dtype", "bfloat16"), seed=d.get("seed", 0))

    @classmethod
    def from_dict(cls, d: dict) -> PagedProblem:
        """From `to_dict`'s form (its `problem_key` names the problem)."""
        if "problem_key" not in d:
            raise ValueError(f"a paged problem's dict needs its problem_key, got {sorted(d)}")
        return cls.from_key(str(d["problem_key"]))

    def to_dict(self) -> dict:
        """The dense summary fields (the results table's problem columns) and the key that names the problem."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(Problem)}
        out["problem_key"] = self.key
        return out

    def lengths(self) -> list[tuple[int, int]]:
        """(q_len, context) of every sequence, in batch order, drawn from `seed`."""
        rng = np.random.default_rng(self.seed)
        out = []
        for g in self.groups:
            q = g.q_len.draw(g.count, rng)
            k = g.context.draw(g.count, rng)
            out += [(qi, max(ki, qi)) for qi, ki in zip(q, k, strict=True)]
        return out

    def seqlens(self, seed: int = 0) -> list[int]:
        """Query tokens per sequence (the problem's own seed draws them; `seed` is the Problem signature's)."""
        return [q for q, _ in self.lengths()]

    def flops(self, seed: int = 0) -> float:
        """4 * Hq * D per visible (query, key) pair: query i of q_len sees context - q_len + i + 1 keys."""
        pairs = sum(q * k - q * (q - 1) // 2 for q, k in self.lengths())
        return 4.0 * self.hq * self.head_dim * pairs

    def bytes_moved(self) -> int:
        """Bytes a call must move at least: every sequence's cached K and V read once, Q read, the output written
        (decode is bound by this: achieved bandwidth = bytes_moved / time)."""
        elt = 4 if self.dtype == "float32" else 2
        keys = sum(k for _, k in self.lengths())
        tokens = sum(q for q, _ in self.lengths())
        return elt * self.head_dim * (2 * keys * self.hkv + 2 * tokens * self.hq)


_GROUP_FIELDS = {"num_seqs", "q_len", "context"}
_FIELDS = _GROUP_FIELDS | {"mix", "block_size", "hq", "hkv", "head_dim", "dtype", "seed"}


def _group(g, where: str) -> SeqGroup:
    if not isinstance(g, dict):
        raise ValueError(f"{where}a group is a mapping of num_seqs, q_len and context, got {g!r}")
    unknown = sorted(set(g) - _GROUP_FIELDS)
    missing = sorted(_GROUP_FIELDS - set(g))
    if unknown or missing:
        raise ValueError(f"{where}a group needs exactly num_seqs, q_len and context (missing {missing}, unknown "
                         f"{unknown})")
    return SeqGroup(g["num_seqs"], Lengths.parse(g["q_len"], f"{where}q_len"),
                    Lengths.parse(g["context"], f"{where}context"))


_SPEC = r"\d+(?:~\d+|(?:\.\d+)*)"
_GROUP_RE = re.compile(rf"n(\d+)q({_SPEC})k({_SPEC})")
_KEY_RE = re.compile(
    rf"paged-(?P<groups>n\d+q{_SPEC}k{_SPEC}(?:\+n\d+q{_SPEC}k{_SPEC})*)-bs(?P<bs>\d+)-hq(?P<hq>\d+)-hkv(?P<hkv>\d+)"
    rf"-d(?P<d>\d+)-(?P<dtype>float16|bfloat16|float32)-seed(?P<seed>\d+)"
)
_EXAMPLE_KEY = "paged-n32q1k2048~4096-bs16-hq32-hkv8-d128-bfloat16-seed0"
