"""Configs per second of sweeps from their trial rows: mid-sweep (between the trials that ended at 25% and 75% of
the search trials; 113th and 338th of the Llama set's 450, as runs 10-12 counted) and from the first trial's end to
the last one's. The final re-measure's rows are not search trials and are left out.

    python -m benchmarks.sweep_rates docs/benchmarks/h100x2/grid-1gpu_trials.parquet \
        docs/benchmarks/h100x2/grid-2gpu_trials.parquet
"""

from __future__ import annotations

import argparse

import pandas as pd

from raytune_attn.tune.winners import is_final


def rates(df: pd.DataFrame) -> tuple[int, float, float]:
    """(search trials, configs per second mid-sweep, seconds from the first trial's end to the last one's)."""
    t = df[(df.kind == "trial") & ~df.trial_id.map(is_final)]
    end = pd.to_datetime(t.groupby("trial_id").timestamp.max()).sort_values()
    n = len(end)
    lo, hi = (113, 338) if n == 450 else (n // 4, 3 * n // 4)
    mid = (hi - lo) / (end.iloc[hi - 1] - end.iloc[lo - 1]).total_seconds()
    return n, mid, (end.iloc[-1] - end.iloc[0]).total_seconds()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trials", nargs="+", help="trials.parquet (or the partial file of a sweep cut short)")
    a = ap.parse_args()
    print(f"{'sweep':<44} {'trials':>6} {'mid-sweep/s':>11} {'first-to-last s':>15} {'per s':>6}")
    for path in a.trials:
        n, mid, span = rates(pd.read_parquet(path))
        print(f"{path.split('/')[-1]:<44} {n:>6} {mid:>11.2f} {span:>15.1f} {(n - 1) / span:>6.2f}")


if __name__ == "__main__":
    main()
