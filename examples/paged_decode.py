"""A decode loop over a paged KV cache: a block allocator, one attention layer's K/V written into the cache at
each step, and `raytune_attn.paged.paged_attention` over the whole batch, checked against plain attention over
the gathered keys.

Three sequences of different prompt lengths start with a prefill chunk each (one mixed call), then decode one
token a step; blocks are handed out as sequences grow, from a shuffled free list, so no sequence's pages are
contiguous. Runs on a GPU, or on the CPU in seconds with the Triton interpreter:

    TRITON_INTERPRET=1 python examples/paged_decode.py [--steps 6] [--block-size 16]
"""

import argparse

import torch

from raytune_attn.device import interpreter_enabled
from raytune_attn.paged import paged_attention

HQ, HKV, D = 4, 2, 32


class PagedCache:
    """K and V pages shared by all sequences, a free list, and each sequence's block table row."""

    def __init__(self, num_blocks, block_size, max_blocks_per_seq, num_seqs, device, dtype):
        shape = (num_blocks, block_size, HKV, D)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.block_size = block_size
        self.free = torch.randperm(num_blocks).tolist()
        self.table = torch.zeros((num_seqs, max_blocks_per_seq), dtype=torch.int32)
        self.lengths = [0] * num_seqs

    def append(self, seq, k, v):
        """Write the K/V of `seq`'s new tokens (n, HKV, D), taking a fresh block whenever one fills up."""
        for i in range(k.shape[0]):
            pos = self.lengths[seq]
            if pos % self.block_size == 0:
                self.table[seq, pos // self.block_size] = self.free.pop()
            blk = int(self.table[seq, pos // self.block_size])
            self.k[blk, pos % self.block_size] = k[i]
            self.v[blk, pos % self.block_size] = v[i]
            self.lengths[seq] += 1

    def gathered(self, seq):
        """The keys and values of `seq` in order (the reference reads them this way)."""
        n = self.lengths[seq]
        blocks = self.table[seq, : -(-n // self.block_size)].tolist()
        k = torch.cat([self.k[b] for b in blocks])[:n]
        v = torch.cat([self.v[b] for b in blocks])[:n]
        return k, v


def step(cache, q_by_seq, kv_by_seq):
    """One batched attention call: write every sequence's new K/V, then attend with its new queries."""
    for seq, (k, v) in enumerate(kv_by_seq):
        cache.append(seq, k, v)
    dev = cache.k.device
    q_lens = [q.shape[0] for q in q_by_seq]
    cu = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32, device=dev)
    out = paged_attention(torch.cat(q_by_seq), cache.k, cache.v, block_table=cache.table.to(dev),
                          seqused_k=torch.tensor(cache.lengths, dtype=torch.int32, device=dev),
                          cu_seqlens_q=cu, max_seqlen_q=max(q_lens), max_seqlen_k=max(cache.lengths))
    return out, cu.tolist()


def reference(cache, seq, q):
    """Plain causal attention over the gathered keys (bottom-right aligned), in float64."""
    k, v = (t.cpu().double().repeat_interleave(HQ // HKV, dim=1) for t in cache.gathered(seq))
    s = torch.einsum("qhd,khd->hqk", q.double(), k) * D**-0.5
    n, m = q.shape[0], k.shape[0]
    s = s.masked_fill(torch.arange(m)[None, :] > torch.arange(n)[:, None] + (m - n), float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--block-size", type=int, default=16)
    args = ap.parse_args(argv)
    if args.steps < 0:
        ap.error(f"--steps must be >= 0, got {args.steps}")
    if args.block_size not in (16, 32, 64, 128, 256):  # paged_attention's page sizes
        ap.error(f"--block-size must be 16, 32, 64, 128 or 256, got {args.block_size}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not interpreter_enabled():
        ap.error("no GPU: run with TRITON_INTERPRET=1 to use the Triton interpreter")
    dtype = torch.float16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    prompts = [5, 19, 33]
    max_len = max(prompts) + args.steps
    blocks_per_seq = -(-max_len // args.block_size)
    cache = PagedCache(len(prompts) * blocks_per_seq, args.block_size, blocks_per_seq, len(prompts), device, dtype)
    q_lens = prompts  # the first call is the prefill of every prompt; each later one decodes a token per sequence
    tolerance = 1e-2 if dtype == torch.float16 else 1e-5
    failed = False
    for t in range(args.steps + 1):
        q_by_seq = [torch.randn(n, HQ, D, device=device, dtype=dtype) for n in q_lens]
        kv_by_seq = [(torch.randn(n, HKV, D, device=device, dtype=dtype),
                      torch.randn(n, HKV, D, device=device, dtype=dtype)) for n in q_lens]
        out, cu = step(cache, q_by_seq, kv_by_seq)
        worst = max((out[cu[z]:cu[z + 1]].double().cpu() - reference(cache, z, q.cpu())).abs().max().item()
                    for z, q in enumerate(q_by_seq))
        kind = "prefill" if t == 0 else "decode"
        print(f"step {t} ({kind}): lengths {cache.lengths}, max |out - reference| = {worst:.2e}")
        q_lens = [1] * len(prompts)
        failed |= not worst < tolerance
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
