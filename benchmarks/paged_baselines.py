"""What the paged kernel is compared with, each as a `Runner`: a callable that does one call's work into
preallocated buffers (so the timer can capture it in a CUDA graph) and the output it writes.

- SDPA over gathered (de-paged) K/V: the gather happens here, once; only the attention calls are timed.
- The project's varlen kernel over the same contiguous K/V: what paging costs the project's own kernel.
- FlashInfer's paged decode (`BatchDecodeWithPagedKVCacheWrapper`) and paged prefill
  (`BatchPrefillWithPagedKVCacheWrapper`) over the very same cache and block table, planned once outside the
  timing, as a serving engine plans once per step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from benchmarks.paged_batch import PagedBatch, causal_mask, gather, padded_index

FI_WORKSPACE_BYTES = 256 << 20


@dataclass
class Runner:
    fn: Callable[[], object]
    out: torch.Tensor | Callable[[], torch.Tensor]  # (total_q, hq, d) written by fn, or what returns it after fn
    label: str = ""  # how it ran (SDPA variant, config, FlashInfer backend)

    def output(self) -> torch.Tensor:
        return self.out() if callable(self.out) else self.out


# ---- SDPA over gathered K/V ----------------------------------------------------------------------------------

def _sdpa_backends(fused_only: bool):
    """The SDPA backends a variant may use: the fused ones only (a variant that needs the unfused math path is
    reported as such), or any."""
    if not fused_only:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION])


def sdpa_runner(batch: PagedBatch, k: torch.Tensor, v: torch.Tensor) -> Runner:
    """SDPA over gathered K/V (`k`, `v`: (total_k, hkv, d), sequences back to back), the first variant that runs:
    GQA on fused kernels, then K/V heads repeated to Hq (made here, untimed) on fused kernels, then any backend.
    Equal sequences (decode rows) are one batched call; in a mixed batch the decode rows are one call over keys
    padded to the longest (masked) and each prefill chunk its own call (bottom-right causal)."""
    errors = []
    for label, fused, expand in (("gqa", True, False), ("kv repeated to Hq", True, True), ("math", False, False)):
        try:
            run, result = _sdpa_plan(batch, k, v, expand)

            def fn(run=run, fused=fused):
                with _sdpa_backends(fused):
                    run()

            fn()
            return Runner(fn, result, label)
        except Exception as e:  # noqa: BLE001 - no kernel for this variant here (or no memory): the next one
            errors.append(f"{label}: {str(e).splitlines()[0][:120]}")
    raise RuntimeError("no SDPA variant ran: " + "; ".join(errors))


def _sdpa_plan(batch: PagedBatch, k: torch.Tensor, v: torch.Tensor, expand: bool):
    """(run, result): `run` makes the calls; `result` returns their output as (total_q, hq, d). One call keeps
    SDPA's own output (no copy is timed); several write theirs into one buffer."""
    row = batch.row
    group = row.hq // row.hkv

    def heads(t):  # (b, n, hkv, d) -> (b, h, n, d) view, or repeated to hq heads
        t = t.transpose(1, 2)
        return t.repeat_interleave(group, dim=1) if expand else t

    def attend(q, kk, vv, mask):
        return F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, enable_gqa=not expand)

    calls = []  # (q view (b, hq, ql, d), k, v, mask, output rows)
    if len(set(zip(row.q_lens, row.contexts, strict=True))) == 1:
        b, ql, n = row.num_seqs, row.q_lens[0], row.contexts[0]
        kk, vv = (heads(t.view(b, n, row.hkv, row.head_dim)) for t in (k, v))
        calls.append((b, ql, kk, vv, causal_mask(ql, n, k.device), slice(0, row.total_q)))
    else:
        cu_q, cu_k = _offsets(row.q_lens), _offsets(row.contexts)
        dec = [z for z, ql in enumerate(row.q_lens) if ql == 1]
        if dec:
            if dec != list(range(dec[0], dec[-1] + 1)):
                raise ValueError("the benchmark's mixed rows keep their decode rows together")
            n = max(row.contexts[z] for z in dec)
            idx = padded_index(batch, dec, n)
            kk, vv = (heads(gather(batch, c, idx)) for c in (batch.k_cache, batch.v_cache))
            lens = torch.tensor([row.contexts[z] for z in dec], device=k.device)
            mask = (torch.arange(n, device=k.device)[None, :] < lens[:, None])[:, None, None, :]
            calls.append((len(dec), 1, kk, vv, mask, slice(cu_q[dec[0]], cu_q[dec[-1] + 1])))
        for z, ql in enumerate(row.q_lens):
            if ql > 1:
                n = row.contexts[z]
                kk, vv = (heads(t[cu_k[z]:cu_k[z + 1]].view(1, n, row.hkv, row.head_dim)) for t in (k, v))
                calls.append((1, ql, kk, vv, causal_mask(ql, n, k.device), slice(cu_q[z], cu_q[z + 1])))

    queries = [batch.q[rows].view(b, ql, row.hq, row.head_dim).transpose(1, 2) for b, ql, *_, rows in calls]
    out = torch.empty_like(batch.q)
    last = []

    def run() -> None:
        last[:] = [attend(q, kk, vv, mask) for q, (_, _, kk, vv, mask, _) in zip(queries, calls, strict=True)]
        if len(calls) > 1:
            for o, (b, ql, *_, rows) in zip(last, calls, strict=True):
                out[rows] = o.transpose(1, 2).reshape(b * ql, row.hq, row.head_dim)

    def result() -> torch.Tensor:
        if len(calls) > 1:
            return out
        return last[0].transpose(1, 2).reshape(row.total_q, row.hq, row.head_dim)

    return run, result


def _offsets(lengths) -> list[int]:
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return cu


# ---- the project's varlen kernel over contiguous K/V -----------------------------------------------------------

def varlen_runner(batch: PagedBatch, k: torch.Tensor, v: torch.Tensor) -> Runner:
    """`raytune_attn.varlen_attention` over contiguous K/V, called once as users call it (its checks read the
    offsets back: a sync); the timed callable then launches the kernel with the config that call chose, without
    the checks, so that it can be captured as the paged kernel is (the caller runs it before timing it)."""
    from raytune_attn import varlen_attention

    row = batch.row
    args = (batch.q, k, v, batch.cu_seqlens_q, batch.cu_seqlens_k, row.max_q, row.max_k)
    first = varlen_attention(*args, causal=True)
    try:
        from raytune_attn import runtime, validation
        from raytune_attn.kernels.flash_attn import flash_attn_fwd

        cfg = runtime.select_config(batch=row.num_seqs, hq=row.hq, hkv=row.hkv, seqlen_q=row.max_q,
                                    seqlen_k=row.max_k, head_dim=row.head_dim, causal=True, dtype=row.dtype,
                                    varlen=True)
        cfg = validation.prepare(cfg, batch.q, k, v)
        out = torch.empty_like(batch.q)

        def fn():
            flash_attn_fwd(batch.q, k, v, cfg, causal=True, cu_seqlens_q=batch.cu_seqlens_q,
                           cu_seqlens_k=batch.cu_seqlens_k, max_seqlen_q=row.max_q, max_seqlen_k=row.max_k,
                           out=out)

        return Runner(fn, out, _short(cfg))
    except Exception as e:  # noqa: BLE001 - the internals moved or refused: time the public call, sync included
        last = [first]

        def fn():
            last[0] = varlen_attention(*args, causal=True)

        return Runner(fn, lambda: last[0], f"public call, host checks timed ({type(e).__name__})")


def _short(cfg: dict) -> str:
    keys = ("BLOCK_M", "BLOCK_N", "NUM_SEGMENTS", "num_warps", "num_stages")
    return " ".join(f"{k}={cfg[k]}" for k in keys if k in cfg)


# ---- FlashInfer ------------------------------------------------------------------------------------------------

def _fi_metadata(batch: PagedBatch, seqs: list[int]):
    """FlashInfer's paged-KV description of sequences `seqs`: page offsets, page ids, last page fill."""
    bs = batch.row.block_size
    pages = batch.pages
    indptr = [0]
    ids = []
    table = batch.block_table
    for z in seqs:
        indptr.append(indptr[-1] + pages[z])
        ids.append(table[z, :pages[z]])
    last = [batch.row.contexts[z] - (pages[z] - 1) * bs for z in seqs]
    dev = table.device
    return (torch.tensor(indptr, dtype=torch.int32, device=dev), torch.cat(ids).to(torch.int32),
            torch.tensor(last, dtype=torch.int32, device=dev))


def fi_decode_runner(batch: PagedBatch, workspace: torch.Tensor, seqs: list[int] | None = None,
                     out: torch.Tensor | None = None, tensor_cores: bool = False) -> Runner:
    """`BatchDecodeWithPagedKVCacheWrapper` (NHD, the cache's own layout) over decode rows `seqs` (default: all):
    its CUDA-core decode kernel, or with `tensor_cores` its prefill kernels (FlashInfer's advice for GQA groups of
    4 and more; fa2, the module the mixed rows build too)."""
    import flashinfer

    row = batch.row
    seqs = list(range(row.num_seqs)) if seqs is None else seqs
    indptr, ids, last = _fi_metadata(batch, seqs)
    dtype = getattr(torch, row.dtype)
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD", use_tensor_cores=tensor_cores)
    w.plan(indptr, ids, last, row.hq, row.hkv, row.head_dim, row.block_size, pos_encoding_mode="NONE",
           q_data_type=dtype, kv_data_type=dtype)
    first = _offsets(row.q_lens)[seqs[0]]
    rows = slice(first, first + len(seqs))  # decode rows: one query each, consecutive
    out = torch.empty_like(batch.q) if out is None else out
    q = batch.q[rows]

    dst = out[rows]  # a view: the kernel writes the rows in place

    def fn():
        w.run(q, (batch.k_cache, batch.v_cache), out=dst)

    fn()
    kind = "tensor cores" if tensor_cores else "cuda cores"
    return Runner(fn, out, f"decode {kind} {getattr(w, 'resolved_backend', '')}".strip())


def fi_prefill_runner(batch: PagedBatch, workspace: torch.Tensor, backend: str, seqs: list[int] | None = None,
                      out: torch.Tensor | None = None) -> Runner:
    """`BatchPrefillWithPagedKVCacheWrapper` (causal, bottom-right as ours) over sequences `seqs` (default: all)."""
    import flashinfer

    row = batch.row
    seqs = list(range(row.num_seqs)) if seqs is None else seqs
    indptr, ids, last = _fi_metadata(batch, seqs)
    cu = _offsets(row.q_lens)
    lo, hi = cu[seqs[0]], cu[seqs[-1] + 1]
    qo = torch.tensor([cu[z] - lo for z in seqs] + [hi - lo], dtype=torch.int32, device=batch.q.device)
    dtype = getattr(torch, row.dtype)
    w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD", backend=backend)
    w.plan(qo, indptr, ids, last, row.hq, row.hkv, row.head_dim, row.block_size, causal=True,
           q_data_type=dtype, kv_data_type=dtype)
    out = torch.empty_like(batch.q) if out is None else out
    q = batch.q[lo:hi]

    dst = out[lo:hi]

    def fn():
        w.run(q, (batch.k_cache, batch.v_cache), out=dst)

    fn()
    return Runner(fn, out, f"prefill {backend}")


def fi_split_runner(batch: PagedBatch, workspaces: tuple[torch.Tensor, torch.Tensor], backend: str) -> Runner:
    """A mixed batch as vLLM's FlashInfer backend runs it: the prefill chunks through the prefill wrapper, the
    decode rows through the decode wrapper, two calls."""
    row = batch.row
    chunks = [z for z, ql in enumerate(row.q_lens) if ql > 1]
    dec = [z for z, ql in enumerate(row.q_lens) if ql == 1]
    out = torch.empty_like(batch.q)
    parts = [fi_prefill_runner(batch, workspaces[0], backend, chunks, out)] if chunks else []
    if dec:
        parts.append(fi_decode_runner(batch, workspaces[1], dec, out))

    def fn():
        for p in parts:
            p.fn()

    return Runner(fn, out, " + ".join(p.label for p in parts))
