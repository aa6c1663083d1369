"""Knobs of the paged-KV attention kernel (`kernels/paged_attn.py`): their rules and the heuristic default.

A paged config is a plain dict like the prefill kernel's (`raytune_attn.config`), with its own knobs:

- BLOCK_M: rows of a program's tile. A row is a (query token, query head) pair: GQA packing puts the
  `group = Hq // Hkv` query heads of one KV head side by side, so a program holds BLOCK_M // group query
  tokens of one sequence and reads each K/V tile once for all of their heads.
- BLOCK_N: keys per inner-loop step (the K/V tile), independent of the cache's block size.
- NUM_SEGMENTS: split-KV. Each query tile's key range is cut into this many segments, each run by its own
  program; a reduce kernel then combines their partial max, sum and accumulator. 1 writes the output
  directly (no partials, no reduce).
- num_warps, num_stages: launch options, as for the prefill kernel.

Their rules are decided in the one place configs are validated: `raytune_attn.validation.check_paged`. This module
keeps the knobs and the heuristic default (used when no config is given and no tuned entry matches the call:
`raytune_attn.paged_runtime`).
"""

from __future__ import annotations

from typing import Any

PAGED_KNOBS: dict[str, type] = {
    "BLOCK_M": int,
    "BLOCK_N": int,
    "NUM_SEGMENTS": int,
    "num_warps": int,
    "num_stages": int,
}
_MAX_SEGMENTS = 64  # validation.check_paged's largest NUM_SEGMENTS
# The default splits the keys only when (sequences x KV heads) programs are fewer than a large GPU's SMs, and
# then into segments enough for about _TARGET_PROGRAMS programs: on an H100, decode batches of 32 sequences x 8
# KV heads read the cache fastest unsplit, while 1 and 8 sequences needed 512-1024 programs (docs/paged.md).
_MIN_PROGRAMS = 128
_TARGET_PROGRAMS = 1024


def default_paged_config(*, head_dim: int = 128, group: int = 1, max_seqlen_q: int | None = None,
                         max_seqlen_k: int | None = None, num_seqs: int | None = None,
                         num_kv_heads: int | None = None) -> dict[str, Any]:
    """The config used when none is given: a heuristic, not a tuned one (vLLM's unified attention chooses its
    tiles the same way); docs/paged.md has what it was checked against.

    The tile is as tall as one sequence's packed rows need (at least 16, at least the group), up to 64 rows:
    taller tiles with more warps were slower on mixed batches, whose decode rows fill few of a tile's rows.
    Split-KV is used only when every sequence fits one query tile (decode and small speculative groups) and
    there are fewer than `_MIN_PROGRAMS` (sequence, KV head) programs, which would leave most of a GPU idle: the
    segments multiply the programs up to about `_TARGET_PROGRAMS`, never past one key tile per segment. Prefill
    chunks get one segment: they have query tiles enough to fill the GPU, and partials for every token would
    cost memory traffic.
    """
    cap = 64
    rows = _pow2_at_least(max(1, max_seqlen_q or 1) * group)
    block_m = max(16, _pow2_at_least(group), min(rows, cap))
    block_n = 32 if head_dim > 128 else 64
    if max_seqlen_k:
        block_n = min(block_n, max(16, _pow2_at_least(max_seqlen_k)))
    segments = 1
    programs = max(1, (num_seqs or 1) * (num_kv_heads or 1))
    if max_seqlen_q and max_seqlen_k and max_seqlen_q * group <= block_m and programs < _MIN_PROGRAMS:
        tiles = -(-max_seqlen_k // block_n)
        while segments < _MAX_SEGMENTS and programs * segments * 2 <= _TARGET_PROGRAMS and segments * 2 <= tiles:
            segments *= 2
    one_tile = bool(max_seqlen_k) and max_seqlen_k <= block_n * segments
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "NUM_SEGMENTS": segments, "num_warps": 4,
            "num_stages": 1 if one_tile else 2}


def _pow2_at_least(n: int) -> int:
    return 1 << (int(n) - 1).bit_length()
