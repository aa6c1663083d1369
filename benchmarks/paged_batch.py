"""The tensors of one benchmark row (`paged_rows.Row`): a paged KV cache with its block table, the same keys
gathered into contiguous (de-paged) K/V, and the float32 SDPA reference every method is checked against.

The cache's blocks are a random permutation, so a sequence's pages are scattered over the cache as in a serving
engine's, and the cache holds exactly the blocks the sequences use: the benchmark reads no more memory than the
rows need. Unused block-table entries hold block 0 (a valid id the kernels never read past `seqused_k`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from benchmarks.paged_rows import Row

REFERENCE_TOKENS = 1 << 17  # keys gathered in float32 per reference step: bounds its memory (1 GiB at Hkv 8, D 128)


@dataclass
class PagedBatch:
    row: Row
    q: torch.Tensor  # (total_q, hq, d)
    k_cache: torch.Tensor  # (num_blocks, block_size, hkv, d)
    v_cache: torch.Tensor
    block_table: torch.Tensor  # int32 (num_seqs, max_pages)
    seqused_k: torch.Tensor  # int32 (num_seqs,)
    cu_seqlens_q: torch.Tensor  # int32 (num_seqs + 1,)
    cu_seqlens_k: torch.Tensor  # int32 (num_seqs + 1,)
    token_index: torch.Tensor  # int64 (total_k,): each key's row in the flattened cache, sequences back to back

    @property
    def pages(self) -> list[int]:
        bs = self.row.block_size
        return [-(-n // bs) for n in self.row.contexts]


def make_batch(row: Row, device: str | torch.device) -> PagedBatch:
    """Random queries and caches (normal, seeded by the row), the block table a permutation of the cache."""
    dtype = getattr(torch, row.dtype)
    gen = torch.Generator().manual_seed(row.seed)
    bs = row.block_size
    pages = [-(-n // bs) for n in row.contexts]
    perm = torch.randperm(row.num_blocks, generator=gen).to(torch.int32)
    table = torch.zeros((row.num_seqs, max(pages)), dtype=torch.int32)
    start = 0
    for z, p in enumerate(pages):
        table[z, :p] = perm[start:start + p]
        start += p
    torch.manual_seed(row.seed)
    q = torch.randn((row.total_q, row.hq, row.head_dim), device=device, dtype=dtype)
    shape = (row.num_blocks, bs, row.hkv, row.head_dim)
    k_cache = torch.randn(shape, device=device, dtype=dtype)
    v_cache = torch.randn(shape, device=device, dtype=dtype)
    table = table.to(device)
    used = torch.tensor(row.contexts, dtype=torch.int32, device=device)
    return PagedBatch(row, q, k_cache, v_cache, table, used, _offsets(row.q_lens, device),
                      _offsets(row.contexts, device), _token_index(table, used, bs))


def _offsets(lengths, device) -> torch.Tensor:
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device=device)


def _token_index(table: torch.Tensor, used: torch.Tensor, bs: int) -> torch.Tensor:
    """Key j of sequence z sits in cache row table[z, j // bs] * bs + j % bs."""
    j = torch.arange(table.shape[1] * bs, device=table.device)
    rows = table.long()[:, j // bs] * bs + j % bs
    return rows[j[None, :] < used[:, None].long()]


def padded_index(batch: PagedBatch, seqs: list[int], length: int) -> torch.Tensor:
    """(len(seqs), length) cache rows of the first `length` keys of each sequence; past a sequence's keys they
    point at whatever its table holds there (block 0 past its pages): callers mask those keys."""
    bs = batch.row.block_size
    j = torch.arange(length, device=batch.block_table.device)
    table = batch.block_table[seqs].long()
    return table[:, j // bs] * bs + j % bs


def gather(batch: PagedBatch, cache: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
    """The keys (or values) at `index` (default: every sequence's, back to back) as contiguous (tokens, hkv, d)."""
    flat = cache.view(-1, cache.shape[2], cache.shape[3])
    return flat[batch.token_index if index is None else index]


def gathered_bytes(row: Row) -> int:
    """Contiguous K and V of every sequence's keys."""
    return 2 * row.total_k * row.hkv * row.head_dim * row.elem_bytes()


def causal_mask(q_len: int, n: int, device) -> torch.Tensor | None:
    """Bottom-right aligned causal mask (query i sees keys j <= i + n - q_len); None when it hides nothing."""
    if q_len == 1:
        return None
    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    return j <= i + (n - q_len)


def reference(batch: PagedBatch) -> torch.Tensor:
    """float32 SDPA over the gathered keys, (total_q, hq, d): runs of sequences with the same (q_len, keys) go
    together, REFERENCE_TOKENS keys at a time."""
    row = batch.row
    out = torch.empty((row.total_q, row.hq, row.head_dim), device=batch.q.device, dtype=torch.float32)
    cu_q = [0]
    cu_k = [0]
    for ql, n in zip(row.q_lens, row.contexts, strict=True):
        cu_q.append(cu_q[-1] + ql)
        cu_k.append(cu_k[-1] + n)
    z = 0
    while z < row.num_seqs:
        ql, n = row.q_lens[z], row.contexts[z]
        end = z + 1
        while (end < row.num_seqs and (row.q_lens[end], row.contexts[end]) == (ql, n)
               and (end + 1 - z) * n <= REFERENCE_TOKENS):
            end += 1
        cnt = end - z
        idx = batch.token_index[cu_k[z]:cu_k[end]]
        k = gather(batch, batch.k_cache, idx).float().view(cnt, n, row.hkv, row.head_dim).transpose(1, 2)
        v = gather(batch, batch.v_cache, idx).float().view(cnt, n, row.hkv, row.head_dim).transpose(1, 2)
        q = batch.q[cu_q[z]:cu_q[end]].float().view(cnt, ql, row.hq, row.head_dim).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(ql, n, q.device), enable_gqa=True)
        out[cu_q[z]:cu_q[end]] = o.transpose(1, 2).reshape(cnt * ql, row.hq, row.head_dim)
        z = end
    return out


def max_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref.to(out.device)).abs().max())
