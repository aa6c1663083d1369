"""The kernel against PyTorch SDPA's backends, cell by cell: `raytune-attn bench`.

Standard grid: bf16, D in {64, 128}, S in {512 ... 16384}, B = 16384 / S, H = 2048 / D, causal and not, so
every cell moves the same number of tokens and model width. TFLOP/s = 4 B H Sq Sk D / time, halved for causal.
Rows go to Parquet (columns gpu, impl, B, H, S, D, causal, dtype, ms, tflops, config, plus provenance) and a
markdown table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import torch

from raytune_attn.config import InvalidConfig, validate_config
from raytune_attn.device import detect, interpreter_enabled
from raytune_attn.problem import Problem
from raytune_attn.timing import median_ms, tflops
from raytune_attn.workload import accept, make_workload, reference

SDPA_BACKENDS = ("flash", "cudnn", "efficient")


def standard_grid(head_dims=(64, 128), seqlens=(512, 1024, 2048, 4096, 8192, 16384), dtype="bfloat16",
                  causal=(False, True), tokens=16384, width=2048) -> list[Problem]:
    return [
        Problem(batch=tokens // s, hq=width // d, hkv=width // d, seqlen_q=s, seqlen_k=s, head_dim=d, causal=c,
                dtype=dtype)
        for d in head_dims for s in seqlens for c in causal
    ]


def tiny_grid() -> list[Problem]:
    """For the interpreter: shapes that finish in seconds on a CPU (timings mean nothing there)."""
    return [Problem(batch=1, hq=2, hkv=2, seqlen_q=s, seqlen_k=s, head_dim=32, causal=c, dtype="float32")
            for s in (64, 128) for c in (False, True)]


def _sdpa_fn(backend: str, w):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    which = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]
    gqa = w.q.shape[1] != w.k.shape[1]

    def fn():
        with sdpa_kernel([which]):
            return torch.nn.functional.scaled_dot_product_attention(w.q, w.k, w.v, is_causal=w.problem.causal,
                                                                    enable_gqa=gqa)

    return fn


def bench_problem(problem: Problem, configs: Iterable[dict], *, baselines=SDPA_BACKENDS, rep_ms: float = 100):
    """Rows for each SDPA backend and each given config on one problem; a config or backend that cannot run
    this problem gets a row with NaN timings and the reason."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    w = make_workload(problem, device=device)
    ref = reference(w)
    flops = problem.flops()
    p = problem
    base = {"B": p.batch, "H": p.hq, "Hkv": p.hkv, "S": p.seqlen_q, "Sk": p.seqlen_k, "D": p.head_dim,
            "causal": p.causal, "dtype": p.dtype, "problem_key": p.key}
    rows = []
    candidates = [(f"sdpa-{b}", _sdpa_fn(b, w), "") for b in (baselines if device == "cuda" else ())]
    for cfg in configs:
        candidates.append(("raytune-attn", lambda c=cfg: w.run(c), json.dumps(cfg, sort_keys=True)))
    for impl, fn, cfg_json in candidates:
        row = {**base, "impl": impl, "config": cfg_json, "ms": float("nan"), "tflops": float("nan"), "error": ""}
        try:
            ok, err = accept(fn(), ref)
            if not ok:
                raise RuntimeError(f"wrong result: rel err {err:.2e}")
            ms = median_ms(fn, rep_ms=rep_ms)
            row.update(ms=ms, tflops=tflops(flops, ms))
        except (InvalidConfig, RuntimeError, ValueError) as e:  # backend not available for this shape, etc.
            row["error"] = str(e).splitlines()[0][:200]
        rows.append(row)
    return rows


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
    """One line per cell: best raytune-attn config's TFLOP/s, each SDPA backend's, and the ratios."""
    lines = []
    best = (df[df.impl == "raytune-attn"].sort_values("tflops", ascending=False)
            .groupby("problem_key", sort=False).head(1).set_index("problem_key"))
    impls = [i for i in ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient") if i in set(df.impl)]
    head = ["D", "S", "B", "H", "causal", "raytune-attn"] + impls + [f"x {i}" for i in impls]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for key, cell in df.groupby("problem_key", sort=False):
        r = cell.iloc[0]
        ours = best.tflops.get(key, float("nan"))
        vals = {i: cell[cell.impl == i].tflops.max() for i in impls}
        row = [r.D, r.S, r.B, r.H, r.causal, f"{ours:.1f}"] + [f"{vals[i]:.1f}" for i in impls]
        row += [f"{ours / vals[i]:.2f}" if vals[i] == vals[i] and vals[i] > 0 else "n/a" for i in impls]
        lines.append("| " + " | ".join(map(str, row)) + " |")
    if interpreter_enabled():
        lines.append("\nTriton interpreter on the CPU: these timings say nothing about any GPU.")
    return "\n".join(lines) + "\n"
