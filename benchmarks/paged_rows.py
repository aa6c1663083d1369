"""The rows of the paged-attention benchmark (`benchmarks/paged_bench.py`): which batches it times.

A row is one paged batch: per sequence, its new query tokens (`q_lens`) and its cached keys, new ones included
(`contexts`, what `seqused_k` holds). Decode rows are one query per sequence over one context; mixed rows put a
few prefill chunks (512-2048 new tokens over a cached prefix) beside decode rows, drawn from a seed, as a serving
engine's chunked-prefill step does.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import numpy as np

DECODE_BATCHES = (1, 8, 32, 128, 256)
DECODE_CONTEXTS = (1024, 4096, 8192, 32768)
# (prefill chunks, decode rows) of the mixed rows; each draws its lengths from its own seed.
MIXED = ((2, 32), (2, 128), (4, 32), (4, 128))
CHUNK_TOKENS = (512, 2048)  # new tokens of a prefill chunk, uniform
CHUNK_PREFIX = (0, 4096)  # keys cached before a chunk, uniform
MIXED_DECODE_CONTEXT = (1024, 8192)  # keys of a decode row in a mixed batch, uniform
QUICK = ("decode-b1-k32768", "decode-b32-k4096", "decode-b128-k8192", "mixed-p2-d32")


@dataclass(frozen=True)
class Row:
    name: str
    kind: str  # "decode" or "mixed"
    q_lens: tuple[int, ...]
    contexts: tuple[int, ...]
    hq: int = 32
    hkv: int = 8
    head_dim: int = 128
    block_size: int = 16
    dtype: str = "bfloat16"
    seed: int = 0

    @property
    def num_seqs(self) -> int:
        return len(self.q_lens)

    @property
    def total_q(self) -> int:
        return sum(self.q_lens)

    @property
    def total_k(self) -> int:
        return sum(self.contexts)

    @property
    def max_q(self) -> int:
        return max(self.q_lens)

    @property
    def max_k(self) -> int:
        return max(self.contexts)

    @property
    def num_blocks(self) -> int:
        return sum(-(-n // self.block_size) for n in self.contexts)

    def elem_bytes(self) -> int:
        return 4 if self.dtype == "float32" else 2

    def bytes_moved(self) -> int:
        """What attention must move at least: K and V of the keys each sequence uses (seqused_k), read once,
        Q read and the output written."""
        kv = 2 * self.total_k * self.hkv * self.head_dim
        qo = 2 * self.total_q * self.hq * self.head_dim
        return (kv + qo) * self.elem_bytes()

    def cache_bytes(self) -> int:
        """The paged K and V caches (whole blocks)."""
        return 2 * self.num_blocks * self.block_size * self.hkv * self.head_dim * self.elem_bytes()

    def describe(self) -> str:
        if self.kind == "decode":
            return f"{self.num_seqs} x 1 query over {self.contexts[0]} keys"
        chunks = [(q, n) for q, n in zip(self.q_lens, self.contexts, strict=True) if q > 1]
        dec = [n for q, n in zip(self.q_lens, self.contexts, strict=True) if q == 1]
        text = " + ".join(f"{q}q/{n}k" for q, n in chunks)
        return f"chunks {text}; {len(dec)} decodes over {min(dec)}-{max(dec)} keys"


def decode_row(batch: int, context: int, **shape) -> Row:
    return Row(f"decode-b{batch}-k{context}", "decode", (1,) * batch, (context,) * batch, **shape)


def mixed_row(chunks: int, decodes: int, seed: int, *, chunk_tokens=CHUNK_TOKENS, chunk_prefix=CHUNK_PREFIX,
              decode_context=MIXED_DECODE_CONTEXT, **shape) -> Row:
    """`chunks` prefill chunks then `decodes` decode rows, lengths uniform in the given bounds from `seed`."""
    rng = np.random.default_rng(seed)
    q_chunk = rng.integers(chunk_tokens[0], chunk_tokens[1], size=chunks, endpoint=True)
    prefix = rng.integers(chunk_prefix[0], chunk_prefix[1], size=chunks, endpoint=True)
    ctx_dec = rng.integers(decode_context[0], decode_context[1], size=decodes, endpoint=True)
    q_lens = tuple(int(x) for x in q_chunk) + (1,) * decodes
    contexts = tuple(int(q + p) for q, p in zip(q_chunk, prefix, strict=True)) + tuple(int(x) for x in ctx_dec)
    return Row(f"mixed-p{chunks}-d{decodes}", "mixed", q_lens, contexts, seed=seed, **shape)


def full_rows() -> list[Row]:
    rows = [decode_row(b, k) for b in DECODE_BATCHES for k in DECODE_CONTEXTS]
    rows += [mixed_row(p, d, seed=i) for i, (p, d) in enumerate(MIXED)]
    return rows


def tiny_rows() -> list[Row]:
    """Interpreter-sized rows (fp32, few heads, odd lengths): correctness only."""
    shape = {"hq": 4, "hkv": 2, "head_dim": 16, "dtype": "float32"}
    rows = [decode_row(b, k, **shape) for b, k in ((1, 40), (3, 100))]
    rows.append(mixed_row(2, 3, seed=0, chunk_tokens=(5, 9), chunk_prefix=(0, 20), decode_context=(10, 50),
                          **shape))
    return rows


def select(rows: list[Row], patterns: str | None) -> list[Row]:
    """The rows whose names match any of the comma-separated shell patterns (all rows without patterns)."""
    if not patterns:
        return rows
    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    chosen = [r for r in rows if any(fnmatch.fnmatchcase(r.name, p) for p in pats)]
    if not chosen:
        names = ", ".join(r.name for r in rows)
        raise ValueError(f"--rows {patterns!r} matches no row; rows are: {names}")
    return chosen
