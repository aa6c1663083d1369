"""The kernel against PyTorch SDPA's backends, cell by cell: `raytune-attn bench`.

Standard grid: bf16, D in {64, 128}, S in {512 ... 16384}, B = 16384 / S, H = 2048 / D, causal and not, so
every cell moves the same number of tokens and model width. TFLOP/s = 4 B H Sq Sk D / time, halved for causal.
Rows go to Parquet (columns gpu, impl, B, H, S, D, causal, dtype, ms, tflops, config, plus provenance) and a
markdown table. Varlen problems (packed sequences) get SDPA on two layouts, nested jagged tensors and a padded
batch with a mask, and the table names the faster one per backend; see docs/benchmarks/bench.md.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import torch

from raytune_attn.config import InvalidConfig, validate_config
from raytune_attn.device import detect, interpreter_enabled
from raytune_attn.paged_problem import PagedProblem
from raytune_attn.problem import Problem
from raytune_attn.tune.measure.paged_workload import sdpa_gathered
from raytune_attn.tune.measure.timing import median_ms, tflops
from raytune_attn.tune.measure.workload import accept, make_workload, reference

SDPA_BACKENDS = ("flash", "cudnn", "efficient")
# The standard grid's cells share one amount of work per token: B*S tokens and H*D channels, as in the FlashAttention
# papers' benchmarks, so a cell's TFLOP/s moves with S and D alone.
GRID_TOKENS = 16384
GRID_WIDTH = 2048


GRID_HEAD_DIMS = (64, 128)
GRID_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)


def standard_grid(head_dims=GRID_HEAD_DIMS, seqlens=GRID_SEQLENS, dtype="bfloat16", causal=(False, True),
                  tokens=GRID_TOKENS, width=GRID_WIDTH) -> list[Problem]:
    """B = tokens / S and H = width / D for each head dim D, sequence length S and mask."""
    return [
        Problem(batch=tokens // s, hq=width // d, hkv=width // d, seqlen_q=s, seqlen_k=s, head_dim=d, causal=c,
                dtype=dtype)
        for d in head_dims for s in seqlens for c in causal
    ]


def tiny_grid() -> list[Problem]:
    """For the interpreter: shapes that finish in seconds on a CPU (timings mean nothing there)."""
    return [Problem(batch=1, hq=2, hkv=2, seqlen_q=s, seqlen_k=s, head_dim=32, causal=c, dtype="float32")
            for s in (64, 128) for c in (False, True)]


def _sdpa_kernel(backend: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    which = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]
    return sdpa_kernel([which])


def _sdpa_fn(backend: str, w):
    gqa = w.q.shape[1] != w.k.shape[1]

    def fn():
        with _sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(w.q, w.k, w.v, is_causal=w.problem.causal,
                                                                    enable_gqa=gqa)

    return fn


# Varlen baselines: SDPA on two layouts of the same packed batch. "njt": nested jagged tensors built on the packed
# q/k/v and cu_seqlens (no copy); "padded": every sequence padded to the longest, with a key-padding (and causal)
# mask, which the flash backend does not take. Each (backend, layout) pair is one row, `sdpa-<backend>-<layout>`.
VARLEN_LAYOUTS = {"njt": ("flash", "cudnn", "efficient"), "padded": ("cudnn", "efficient")}


def _lens(w) -> torch.Tensor:
    return (w.cu_seqlens[1:] - w.cu_seqlens[:-1]).long()


def expand_kv(t: torch.Tensor, hq: int, dim: int) -> torch.Tensor:
    """K or V with each of its heads repeated for the query heads that share it (SDPA's `enable_gqa` order)."""
    g = hq // t.shape[dim]
    return t if g == 1 else t.repeat_interleave(g, dim=dim)


def njt_inputs(w, *, expand: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The packed varlen q, k, v (total, H, D) as nested jagged tensors of shape (B, H, j, D), the layout SDPA
    takes for NJTs. Views of the packed data, except K/V expanded to the query heads when `expand` (the fused
    NJT kernels need equal head counts: no GQA)."""
    lens = _lens(w)
    offsets = w.cu_seqlens.long()
    lo, hi = int(lens.min()), int(lens.max())  # given, so that SDPA does not sync on the GPU to find them
    k, v = (expand_kv(t, w.q.shape[1], 1) if expand else t for t in (w.k, w.v))
    return tuple(torch.nested.nested_tensor_from_jagged(t, offsets, min_seqlen=lo, max_seqlen=hi).transpose(1, 2)
                 for t in (w.q, k, v))


def njt_output(out: torch.Tensor) -> torch.Tensor:
    """An NJT SDPA output (B, H, j, D) back to the packed (total, H, D) layout of the reference."""
    return out.transpose(1, 2).values()


def padded_inputs(w, *, expand: bool = False, align: int = 16):
    """The packed varlen batch padded to (B, H, S, D), S the longest sequence rounded up to `align` (the
    memory-efficient kernel wants an aligned mask), and an additive mask (B, 1, S, S) in q's dtype (0 where a
    query may see a key, -inf elsewhere): key padding, and causal when the problem is. Padded query rows see
    key 0, so they stay finite; `unpad_output` drops them. K/V expanded to the query heads when `expand`."""
    lens = _lens(w)
    n_b = lens.numel()
    s = -(-int(lens.max()) // align) * align
    pos = torch.arange(s, device=w.q.device)
    valid = pos[None, :] < lens[:, None]  # (B, S)

    def pad(t):
        out = t.new_zeros(n_b, s, *t.shape[1:])
        out[valid] = t
        return out.transpose(1, 2)  # (B, H, S, D), a view of (B, S, H, D) like the packed rows

    k, v = (expand_kv(t, w.q.shape[1], 1) if expand else t for t in (w.k, w.v))
    allowed = valid[:, None, None, :]  # (B, 1, 1, S): keys inside the sequence
    if w.problem.causal:  # q and k lengths are equal per sequence: top-left and bottom-right causal agree
        allowed = allowed & (pos[None, :] <= pos[:, None])[None, None]
    else:
        allowed = allowed.expand(n_b, 1, s, s)
    mask = torch.zeros(allowed.shape, dtype=w.q.dtype, device=w.q.device).masked_fill_(~allowed, float("-inf"))
    return pad(w.q), pad(k), pad(v), mask


def unpad_output(out: torch.Tensor, w) -> torch.Tensor:
    """A padded SDPA output (B, H, S, D) back to the packed (total, H, D) layout, padded query rows dropped."""
    lens = _lens(w)
    valid = torch.arange(out.shape[2], device=out.device)[None, :] < lens[:, None]
    return out.transpose(1, 2)[valid]


def _varlen_candidates(w, backends):
    """(impl, fn, to_packed, note) for each SDPA backend and layout of a varlen workload. The inputs of a layout
    are built (outside any timing) when its first candidate is reached and dropped after its last."""
    ratio = w.problem.gqa_group
    gqa = ratio > 1
    for layout, supported in VARLEN_LAYOUTS.items():
        todo = [b for b in backends if b in supported]
        if not todo:
            continue
        try:
            if layout == "njt":
                q, k, v = njt_inputs(w, expand=True)
                mask, to_packed = None, njt_output
            else:
                q, k, v, mask = padded_inputs(w, expand=False)
                to_packed = lambda o: unpad_output(o, w)  # noqa: E731
        except Exception as e:  # noqa: BLE001 - this torch cannot build the layout: every row of it says why
            for b in todo:
                yield f"sdpa-{b}-{layout}", _raiser(e), None, ""
            continue
        for b in todo:
            note = f"K/V heads repeated {ratio}x before timing (NJT SDPA has no GQA)" if gqa and layout == "njt" else ""
            fn = _layout_fn(b, q, k, v, mask, w.problem.causal, gqa and layout == "padded")
            if gqa and layout == "padded" and not _runs(fn):  # no enable_gqa here? repeat K/V heads instead
                expanded = _layout_fn(b, q, expand_kv(k, w.problem.hq, 1), expand_kv(v, w.problem.hq, 1), mask,
                                      w.problem.causal, False)
                if _runs(expanded):  # else keep the native call, whose error the row reports
                    fn, note = expanded, f"K/V heads repeated {ratio}x before timing (no enable_gqa in this backend)"
            yield f"sdpa-{b}-{layout}", fn, to_packed, note
        del q, k, v, mask


def _layout_fn(backend, q, k, v, mask, causal, gqa):
    def fn():
        with _sdpa_kernel(backend):
            if mask is None:
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)

    return fn


def _runs(fn) -> bool:
    try:
        with warnings.catch_warnings():  # a refusing backend warns why before it raises
            warnings.simplefilter("ignore")
            fn()
        return True
    except Exception:  # noqa: BLE001 - any refusal: the caller falls back or reports the first call's error
        return False


def _raiser(e: Exception):
    def fn():
        raise RuntimeError(f"{type(e).__name__}: {e}")

    return fn


def bench_problem(problem: Problem, configs: Iterable[dict], *, baselines=SDPA_BACKENDS, rep_ms: float = 100):
    """Rows for each SDPA backend and each given config on one problem; a config or backend that cannot run
    this problem gets a row with NaN timings and the reason. Baselines run on a GPU only. Paged problems: one row,
    `sdpa-gathered` (SDPA over the de-paged K/V, `paged_workload.sdpa_gathered`).

    Dense problems: one row per backend, `sdpa-<backend>`. Varlen problems: one row per backend and layout,
    `sdpa-<backend>-njt` and `sdpa-<backend>-padded` (see `VARLEN_LAYOUTS`), with `layout`, `note` (what was done
    outside the timing) and `fastest` (the fastest layout of its backend on this problem, which says which)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    w = make_workload(problem, device=device)
    ref = reference(w)
    flops = problem.flops()
    p = problem
    base = {"B": p.batch, "H": p.hq, "Hkv": p.hkv, "S": p.seqlen_q, "Sk": p.seqlen_k, "D": p.head_dim,
            "causal": p.causal, "dtype": p.dtype, "problem_key": p.key}

    def measure(impl, fn, cfg_json="", to_packed=None, catch=(InvalidConfig, RuntimeError, ValueError), check=None,
                **extra):
        row = {**base, "impl": impl, "config": cfg_json, "ms": float("nan"), "tflops": float("nan"), "error": "",
               **extra}
        try:
            out = (check or fn)()
            ok, err = accept(to_packed(out) if to_packed else out, ref)
            del out
            if not ok:
                raise RuntimeError(f"wrong result: rel err {err:.2e}")
            ms = median_ms(fn, rep_ms=rep_ms)
            row.update(ms=ms, tflops=tflops(flops, ms))
        except catch as e:  # backend not available for this shape, etc.
            row["error"] = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        return row

    rows = []
    if device == "cuda" and isinstance(p, PagedProblem):
        fn, to_packed = sdpa_gathered(w)
        rows.append(measure("sdpa-gathered", fn, to_packed=to_packed, catch=Exception,  # out of memory included
                            note="K/V gathered into a padded batch with a mask outside the timing"))
    elif device == "cuda" and p.varlen:
        for impl, fn, to_packed, note in _varlen_candidates(w, baselines):
            rows.append(measure(impl, fn, to_packed=to_packed, catch=Exception,  # NJT SDPA refuses in many ways
                                layout=impl.rsplit("-", 1)[1], note=note, fastest=False))
        for fam in {_family(r["impl"]) for r in rows}:
            ok = [r for r in rows if _family(r["impl"]) == fam and r["tflops"] == r["tflops"]]
            if ok:
                max(ok, key=lambda r: r["tflops"])["fastest"] = True
    elif device == "cuda":
        rows.extend(measure(f"sdpa-{b}", _sdpa_fn(b, w)) for b in baselines)
    for cfg in configs:
        rows.append(measure("raytune-attn", lambda c=cfg: w.run(c), json.dumps(cfg, sort_keys=True),
                            check=lambda c=cfg: w.check_run(c)))
    return rows


def _family(impl: str) -> str:
    """`sdpa-flash-njt` -> `sdpa-flash`; dense rows and raytune-attn are their own family."""
    parts = impl.split("-")
    return "-".join(parts[:2]) if impl.startswith("sdpa-") else impl


def run_bench(problems: list[Problem], configs: list[dict], out: str | Path, *, rep_ms: float = 100) -> pd.DataFrame:
    info = detect()
    rows = []
    for p in problems:
        cfgs = configs or [validate_config({}, head_dim=p.head_dim)]
        rows.extend(bench_problem(p, cfgs, rep_ms=rep_ms))
    df = pd.DataFrame(rows)
    df.insert(0, "gpu", info.name)
    df["arch"] = info.arch
    df["torch"] = torch.__version__
    df["triton"] = __import__("triton").__version__
    df["timestamp"] = pd.Timestamp.now(tz="UTC")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_parquet(out, index=False)
    out.with_suffix(".md").write_text(markdown_table(df))
    return df


def markdown_table(df: pd.DataFrame) -> str:
    """One line per cell: best raytune-attn config's TFLOP/s, each SDPA backend's, and the ratios. A varlen cell
    shows, per backend, its fastest layout and names it: `512.3 (njt)`; S is then the longest sequence."""
    lines = []
    df = df.reset_index(drop=True)
    best = (df[df.impl == "raytune-attn"].sort_values("tflops", ascending=False)
            .groupby("problem_key", sort=False).head(1).set_index("problem_key"))
    family = df.impl.map(_family)
    impls = [i for i in ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient") if i in set(family)]
    head = ["D", "S", "B", "H", "causal", "raytune-attn"] + impls + [f"x {i}" for i in impls]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    any_varlen = False
    for key, cell in df.groupby("problem_key", sort=False):
        r = cell.iloc[0]
        varlen = str(key).startswith("varlen-")
        any_varlen |= varlen
        ours = best.tflops.get(key, float("nan"))
        fam = family[cell.index]
        vals, shown = {}, {}
        for i in impls:
            tf = cell[fam == i].tflops
            vals[i] = tf.max()
            shown[i] = f"{vals[i]:.1f}"
            if varlen and tf.notna().any():
                shown[i] += f" ({cell.impl[tf.idxmax()].rsplit('-', 1)[1]})"
        row = [r.D, r.S, r.B, r.H, r.causal, f"{ours:.1f}"] + [shown[i] for i in impls]
        row += [f"{ours / vals[i]:.2f}" if vals[i] == vals[i] and vals[i] > 0 else "n/a" for i in impls]
        lines.append("| " + " | ".join(map(str, row)) + " |")
    if any_varlen:
        lines.append("\nVarlen cells: S is the longest sequence, TFLOP/s count each sequence's own work, and each SDPA "
                     "column is the faster of its layouts (njt: nested jagged tensors; padded: padded batch with a "
                     "mask), named in brackets.")
    if interpreter_enabled():
        lines.append("\nTriton interpreter on the CPU: these timings say nothing about any GPU.")
    return "\n".join(lines) + "\n"
