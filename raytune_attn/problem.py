"""Attention workload keys: the unit a search tunes for and the runtime looks configs up by."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import numpy as np

DTYPES = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class Problem:
    """One attention workload.

    Dense problems have `batch` sequences of exactly `seqlen_q` queries and `seqlen_k` keys. Varlen problems pack
    `batch` sequences whose lengths are drawn (see `seqlens`) with `seqlen_q`/`seqlen_k` as the maximum lengths.
    """

    batch: int
    hq: int
    hkv: int
    seqlen_q: int
    seqlen_k: int
    head_dim: int
    causal: bool
    dtype: str = "bfloat16"
    varlen: bool = False

    def __post_init__(self):
        for name in ("batch", "hq", "hkv", "seqlen_q", "seqlen_k", "head_dim"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"problem field {name} must be a positive integer, got {v!r}")
        for name in ("causal", "varlen"):
            v = getattr(self, name)
            if isinstance(v, np.bool_):  # a flag read from a table's row
                object.__setattr__(self, name, bool(v))
            elif not isinstance(v, bool):  # "maybe" or 1 would be taken as true and name a causal problem
                raise ValueError(f"problem field {name} must be true or false, got {v!r}")
        if self.hq % self.hkv:
            raise ValueError(f"problem hq={self.hq} must be a multiple of hkv={self.hkv}")
        if self.head_dim > 256:
            raise ValueError(f"problem head_dim={self.head_dim} is above the supported 256")
        if self.dtype not in DTYPES:
            raise ValueError(f"problem dtype {self.dtype!r} must be one of {DTYPES}")
        if self.varlen and self.seqlen_q != self.seqlen_k:
            raise ValueError("varlen problems draw one length per sequence for both q and k: seqlen_q == seqlen_k")

    @property
    def gqa_group(self) -> int:
        """Query heads per key/value head: the GQA group (1 without GQA)."""
        return self.hq // self.hkv

    @property
    def key(self) -> str:
        """Stable string form, e.g. `dense-b4-hq16-hkv16-sq4096-sk4096-d128-causal-bfloat16`."""
        kind = "varlen" if self.varlen else "dense"
        mask = "causal" if self.causal else "full"
        return (
            f"{kind}-b{self.batch}-hq{self.hq}-hkv{self.hkv}-sq{self.seqlen_q}-sk{self.seqlen_k}"
            f"-d{self.head_dim}-{mask}-{self.dtype}"
        )

    @classmethod
    def from_key(cls, key: str) -> Problem:
        if key.startswith("paged-"):  # a paged-KV batch (raytune_attn.paged_problem)
            return _paged().from_key(key)
        m = _KEY_RE.fullmatch(key)
        if not m:
            raise ValueError(f"not a problem key: {key!r} (expected e.g. {_EXAMPLE_KEY})")
        g = m.groupdict()
        return cls(
            batch=int(g["b"]), hq=int(g["hq"]), hkv=int(g["hkv"]), seqlen_q=int(g["sq"]), seqlen_k=int(g["sk"]),
            head_dim=int(g["d"]), causal=g["mask"] == "causal", dtype=g["dtype"], varlen=g["kind"] == "varlen",
        )

    @classmethod
    def from_dict(cls, d: dict) -> Problem:
        if str(d.get("problem_key", "")).startswith("paged-"):  # a PagedProblem's to_dict
            return _paged().from_dict(d)
        fields = dataclasses.fields(cls)
        names = {f.name for f in fields}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown problem field(s) {unknown}; known fields are {sorted(names)}")
        missing = [f.name for f in fields if f.name not in d and f.default is dataclasses.MISSING]
        if missing:
            raise ValueError(f"missing problem field(s) {missing}: they have no default")
        return cls(**d)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def seqlens(self, seed: int = 0) -> list[int]:
        """Per-sequence lengths. Dense: all `seqlen_q`. Varlen: the first sequence has the maximum length (so the
        key's maximum is real) and the rest are uniform in [1, max], drawn from `seed` so that every trial and
        every GPU measures the same packing."""
        if not self.varlen:
            return [self.seqlen_q] * self.batch
        rng = np.random.default_rng(seed)
        rest = rng.integers(1, self.seqlen_q + 1, size=self.batch - 1).tolist()
        return [self.seqlen_q] + [int(x) for x in rest]

    def flops(self, seed: int = 0) -> float:
        """4 * H * Sq * Sk * D per sequence (two matmuls of 2 flops per multiply-add), halved for causal."""
        if self.varlen:
            pairs = sum(s * s for s in self.seqlens(seed))
        else:
            pairs = self.batch * self.seqlen_q * self.seqlen_k
        f = 4.0 * self.hq * pairs * self.head_dim
        return f / 2 if self.causal else f


def _paged():
    from raytune_attn.paged_problem import PagedProblem  # it subclasses Problem: imported when first asked

    return PagedProblem


_KEY_RE = re.compile(
    r"(?P<kind>dense|varlen)-b(?P<b>\d+)-hq(?P<hq>\d+)-hkv(?P<hkv>\d+)-sq(?P<sq>\d+)-sk(?P<sk>\d+)"
    r"-d(?P<d>\d+)-(?P<mask>causal|full)-(?P<dtype>float16|bfloat16|float32)"
)
_EXAMPLE_KEY = "dense-b4-hq16-hkv16-sq4096-sk4096-d128-causal-bfloat16"
