"""Issue 7's comparison from a sweep's summary.json: tuned kernel against SDPA's flash and cuDNN backends, measured
in the same sweep on the same GPU, one row per cell, and geometric means (all, and per head dim).

    cd docs/benchmarks && python ../../benchmarks/grid_table.py h200/sweep_bf16_d64/summary.json \
        h200/sweep_bf16_d128/summary.json h200/sweep_bf16_d256/summary.json --csv h200/grid_bf16.csv

Several summaries make one table: a later sweep's cells replace an earlier one's (a `sweep` column names each row's).
Each row, and so each ratio to SDPA, stays one sweep's; only the geometric means mix sweeps.

`--vs` adds other sweeps' tuned TFLOP/s of the same cells (a different machine of the same kind: a ratio across
runs, not a same-run one). Tuned = the sweep's best after its final re-measure.

Varlen problems (the Llama-3-8B prefill set) get their batch size and the best SDPA run of any backend and layout
(which one is named); their flash column is SDPA flash on nested jagged tensors, their cuDNN column the faster of
cuDNN on nested jagged tensors and on the padded batch (`raytune_attn.tune.measure.bench.VARLEN_LAYOUTS`).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

from raytune_attn.problem import Problem


def _short(cfg: dict) -> str:
    s = f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']} w{cfg['num_warps']} s{cfg['num_stages']}"
    for knob, tag in (("USE_TMA", "tma"), ("WARP_SPECIALIZE", "ws"), ("PERSISTENT", "pers"), ("REVERSE_M", "rev"),
                      ("PRE_LOAD_V", "preV"), ("ONE_Q_BUFFER", "1q"), ("BAND_LAUNCH", "band")):
        if cfg.get(knob):
            s += f" {tag}"
    if cfg.get("maxnreg"):
        s += f" nreg{cfg['maxnreg']}"
    return s


def table(path: str) -> pd.DataFrame:
    rows = []
    for s in json.load(open(path))["searches"]:
        p = Problem.from_key(s["problem_key"])
        # A backend that failed on a problem has no number (or None): left out.
        b = {k: v for k, v in s.get("baselines", {}).items() if isinstance(v, (int, float)) and not math.isnan(v)}
        best = max(b, key=b.get) if b else ""
        rows.append({"problem_key": p.key, "head_dim": p.head_dim, "causal": p.causal, "seqlen": p.seqlen_q,
                     "batch": p.batch, "varlen": p.varlen, "dtype": p.dtype, "tuned": s["best_tflops"],
                     "sdpa_flash": b.get("sdpa_flash", b.get("sdpa_flash_njt", math.nan)),
                     "sdpa_cudnn": b.get("sdpa_cudnn", max((b[k] for k in ("sdpa_cudnn_njt", "sdpa_cudnn_padded")
                                                            if k in b), default=math.nan)),
                     "best_sdpa": b.get(best, math.nan), "best_sdpa_name": best,
                     "config": _short(s["best_config"])})
    df = pd.DataFrame(rows).sort_values(["head_dim", "causal", "seqlen", "batch"]).reset_index(drop=True)
    df["x_flash"] = df.tuned / df.sdpa_flash
    df["x_cudnn"] = df.tuned / df.sdpa_cudnn
    df["x_best_sdpa"] = df.tuned / df.best_sdpa
    return df


def _table_or_exit(path: str) -> pd.DataFrame:
    try:
        return table(path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{path}: not a sweep's summary.json ({type(e).__name__}: {e})") from None


def _sweep_name(path: Path) -> str:
    """A summary's sweep: `NAME_summary.json` -> NAME, `NAME/summary.json` -> NAME."""
    return path.parent.name if path.name == "summary.json" else path.name.removesuffix("_summary.json")


def _merged(paths: list[str]) -> pd.DataFrame:
    """The cells of all `paths`, a later summary's row replacing an earlier one's of the same problem."""
    parts = [_table_or_exit(p).assign(sweep=_sweep_name(Path(p))) for p in paths]
    df = pd.concat(parts).drop_duplicates("problem_key", keep="last")
    return df.sort_values(["head_dim", "causal", "seqlen", "batch"]).reset_index(drop=True)


def _geo(x: pd.Series) -> float:
    return float(math.exp(x.map(math.log).mean()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("summary", nargs="+", help="a sweep's summary.json; with several, a later one's cells replace "
                    "an earlier one's")
    ap.add_argument("--vs", nargs="+", help="earlier sweeps' summary.json over the same cells (merged as the summaries "
                    "are)")
    ap.add_argument("--csv", help="write the table here")
    a = ap.parse_args()
    df = _merged(a.summary)
    several = len(a.summary) > 1
    old = _merged(a.vs).set_index("problem_key") if a.vs else None
    varlen = bool(df.varlen.any())
    cols = ["D", "mask", "S", "tuned", "SDPA flash", "cuDNN", "x flash", "x cuDNN", "config"]
    if varlen:
        cols[3:3] = ["B"]
        cols[-1:-1] = ["best SDPA (which)", "x best SDPA"]
    if a.vs:
        df["earlier"] = df.problem_key.map(old.tuned)
        df["earlier_config"] = df.problem_key.map(old.config)
        df["x_earlier"] = df.tuned / df.earlier
        after_tuned = cols.index("tuned") + 1
        cols[after_tuned:after_tuned] = ["earlier", "x earlier"]
    if several:
        cols.append("sweep")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in df.itertuples():
        cells = [r.head_dim, "causal" if r.causal else "full", r.seqlen, *([r.batch] if varlen else []),
                 f"{r.tuned:.1f}"]
        if a.vs:
            cells += [f"{r.earlier:.1f}", f"{r.x_earlier:.2f}"]
        cells += [f"{r.sdpa_flash:.1f}", f"{r.sdpa_cudnn:.1f}", f"{r.x_flash:.2f}", f"{r.x_cudnn:.2f}"]
        if varlen:
            cells += [f"{r.best_sdpa:.1f} ({r.best_sdpa_name})", f"{r.x_best_sdpa:.2f}"]
        cells += [r.config, *([r.sweep] if several else [])]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print()
    for name, g in [("all", df), *((f"D={d}", g) for d, g in df.groupby("head_dim"))]:
        # Three decimals on the means: the targets (1.3x flash, 0.9x cuDNN) are met or missed in the third.
        line = (f"{name}: x flash geo {_geo(g.x_flash):.3f} (min {g.x_flash.min():.3f}, >= 1.3 on "
                f"{(g.x_flash >= 1.3).sum()} of {len(g)}); x cuDNN geo {_geo(g.x_cudnn):.3f} "
                f"(max {g.x_cudnn.max():.2f}, >= 0.9 on {(g.x_cudnn >= 0.9).sum()}, >= 1 on {(g.x_cudnn >= 1).sum()})")
        if varlen:
            line += f"; x best SDPA geo {_geo(g.x_best_sdpa):.2f} (min {g.x_best_sdpa.min():.2f})"
        if a.vs:
            line += f"; x earlier geo {_geo(g.x_earlier):.3f}"
        print(line)
    if a.csv:
        df.to_csv(a.csv, index=False)


if __name__ == "__main__":
    main()
