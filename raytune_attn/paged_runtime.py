"""The config of a `paged_attention` call without an explicit one: the tuned artifact's paged entry for the call's
shape bucket, else the heuristic default.

Buckets, as serving kernels key their tuned tables: the number of sequences, the longest query run and the
longest context, each rounded up to a power of two, plus what must match exactly (query and KV heads, head dim,
dtype, the cache's block size). A call's bucket comes from host ints only (`block_table.shape[0]`,
`max_seqlen_q`, `max_seqlen_k` and the tensors' shapes and dtype), so choosing a config reads nothing back from
the GPU and a CUDA-graph capture sees no sync. A tuned problem's bucket comes from its key: its sequence count
and the upper bounds of its query runs and contexts (a problem drawn over (c/2, c] serves every call whose
longest context is in that range).

Entries come from the active table of `raytune_attn.runtime` (`load_configs`, or $RAYTUNE_ATTN_CONFIGS on the
first lookup), which keeps those tuned on this device and Triton major version. When no entry has the call's
bucket, the nearest entry that differs only in its sequence count and longest context (the fewest powers of two
apart in both together; the query bucket and the exact parts equal) serves it: a decode batch of 8192 keys gets
the config tuned for 16k, not the untuned heuristic. With no such entry, the config is
`kernels.paged_config.default_paged_config` for the call. Several entries in one bucket, or at one distance: the
one whose problem key sorts first (deterministic).
"""

from __future__ import annotations

import os
import threading

from raytune_attn import runtime
from raytune_attn.kernels.paged_config import default_paged_config

_CACHE_MAX = 8192
_lock = threading.Lock()
_indexed: tuple[object, dict] = (None, {})  # (the runtime table it was built from, bucket -> (key, config))
_cache: dict[tuple, tuple[dict, str]] = {}


def pow2_bucket(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def bucket(*, num_seqs: int, max_seqlen_q: int, max_seqlen_k: int, hq: int, hkv: int, head_dim: int, dtype: str,
           block_size: int) -> tuple:
    """A call's (or a problem's) lookup key."""
    return (pow2_bucket(num_seqs), pow2_bucket(max_seqlen_q), pow2_bucket(max_seqlen_k), hq, hkv, head_dim,
            str(dtype).removeprefix("torch."), block_size)


def problem_bucket(p) -> tuple:
    """The bucket of a `PagedProblem`: its sequences, longest query run and longest context."""
    return bucket(num_seqs=p.batch, max_seqlen_q=p.seqlen_q, max_seqlen_k=p.seqlen_k, hq=p.hq, hkv=p.hkv,
                  head_dim=p.head_dim, dtype=p.dtype, block_size=p.block_size)


def _table():
    table = runtime.active_configs()
    if table is None and os.environ.get(runtime.ENV_VAR):
        table = runtime.load_configs(os.environ[runtime.ENV_VAR])  # as the dense lookup does on its first call
    return table


def _index(table) -> dict:
    global _indexed
    if _indexed[0] is not table:
        idx: dict[tuple, tuple[str, dict]] = {}
        for p, cfg in sorted(getattr(table, "paged", []), key=lambda item: item[0].key, reverse=True):
            idx[problem_bucket(p)] = (p.key, cfg)  # the smallest key of a bucket is written last
        with _lock:
            _indexed = (table, idx)
            _cache.clear()
    return _indexed[1]


def lookup(*, num_seqs: int, max_seqlen_q: int, max_seqlen_k: int, hq: int, hkv: int, head_dim: int, dtype: str,
           block_size: int) -> tuple[dict, str]:
    """The config for a call and how it was chosen: "bucket:<key>", "nearest:<key>" or "default". Memoised per call
    shape; the returned dict is shared (callers must not mutate it)."""
    table = _table()
    idx = _index(table) if table is not None else {}
    key = bucket(num_seqs=num_seqs, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, hq=hq, hkv=hkv,
                 head_dim=head_dim, dtype=dtype, block_size=block_size)
    call = (id(table), key, num_seqs, max_seqlen_q, max_seqlen_k)
    hit = _cache.get(call)
    if hit is not None:
        return hit
    found = idx.get(key)
    if found is not None:
        hit = (found[1], "bucket:" + found[0])
    elif (near := _nearest(idx, key)) is not None:
        hit = (near[1], "nearest:" + near[0])
    else:
        hit = (default_paged_config(head_dim=head_dim, group=hq // hkv, max_seqlen_q=max_seqlen_q,
                                    max_seqlen_k=max_seqlen_k, num_seqs=num_seqs, num_kv_heads=hkv), "default")
    if len(_cache) >= _CACHE_MAX:
        _cache.clear()
    _cache[call] = hit
    return hit


def _nearest(idx: dict, key: tuple) -> tuple[str, dict] | None:
    """The entry of `idx` nearest to bucket `key` in sequences and context (log2 steps), with the same query
    bucket and exact parts; None if there is none."""
    def steps(b: tuple) -> int:
        return abs(b[0].bit_length() - key[0].bit_length()) + abs(b[2].bit_length() - key[2].bit_length())

    same = [(steps(b), entry[0], entry) for b, entry in idx.items() if b[1] == key[1] and b[3:] == key[3:]]
    return min(same)[2] if same else None


def select_paged_config(q, k_cache, block_table, max_seqlen_q: int, max_seqlen_k: int) -> dict:
    """`lookup` for a `paged_attention` call's (checked) arguments: shapes, dtype and the two host bounds."""
    cfg, _ = lookup(num_seqs=block_table.shape[0], max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                    hq=q.shape[1], hkv=k_cache.shape[2], head_dim=q.shape[-1], dtype=str(q.dtype),
                    block_size=k_cache.shape[1])
    return cfg
