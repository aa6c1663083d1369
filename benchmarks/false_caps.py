"""Adaptive capping against the exhaustive landscape: for each sweep's trials, the rungs stopped for running over
10x the problem's best latency, and how good the H200's exhaustive Llama landscape rates those configs (a cap of a
config at half the best or more is a false cap: a stall, not the config).

    python benchmarks/false_caps.py docs/benchmarks/h200/compile_limit/ct-new-s*/trials.parquet
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

KNOBS = ["BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "PRE_LOAD_V"]
LANDSCAPE = Path(__file__).parents[1] / "docs/benchmarks/h200/llama_landscape_spin/llama_exhaustive_spin.parquet"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trials", nargs="+", help="sweeps' trials.parquet")
    ap.add_argument("--landscape", default=str(LANDSCAPE))
    a = ap.parse_args()
    land = pd.read_parquet(a.landscape)
    best = land[land.status == "ok"].groupby("problem_key").tflops.max()
    value = land.drop_duplicates(["problem_key", *KNOBS]).set_index(["problem_key", *KNOBS]).tflops
    print(f"{'sweep':<48} {'capped':>6} {'rated >= 0.5':>12} {'rated >= 0.1':>12} {'highest':>8}")
    for path in a.trials:
        t = pd.read_parquet(path)
        t = t[t.kind == "trial"]
        cap = t[t.reason.fillna("").str.contains("10x")]
        rel = np.array([value.get((r.problem_key, *(bool(r[k]) if k == "PRE_LOAD_V" else int(r[k]) for k in KNOBS)),
                                  np.nan) / best.get(r.problem_key, np.nan) for _, r in cap.iterrows()])
        top = f"{np.nanmax(rel):.2f}" if np.isfinite(rel).any() else "-"
        name = Path(path).parent.name if Path(path).name == "trials.parquet" else Path(path).name
        print(f"{name:<48} {len(cap):>6} {int((rel >= 0.5).sum()):>12} {int((rel >= 0.1).sum()):>12} "
              f"{top:>8}")


if __name__ == "__main__":
    main()
