"""One GPU against two (benchmarks/two_gpus.sh): a table of sweeps, and the winners of a pair compared problem by
problem. Reads each sweep's summary.json and trials.parquet (the files the script leaves as NAME_summary.json and
NAME_trials.parquet).

    python -m benchmarks.two_gpu_table --dir docs/benchmarks/h100x2 --pair grid-1gpu grid-2gpu \
        --pair decode-1gpu decode-2gpu --sweep grid-kill-r3 --out docs/benchmarks/h100x2/table.md

Per sweep: trials, Tune's wall time, configs per second over it and mid-sweep (between the trials that ended at 25%
and 75% of the search trials), each GPU's busy fraction (its benchmark actor's seconds running kernels over Tune's
wall time), the trials each GPU ran (by the GPU's UUID recorded per trial) and the trials that ended in an error.
Per pair: the ratio of configs per second, and per problem the two-GPU winner's TFLOP/s over the one-GPU winner's,
each as its own sweep's final re-measure recorded it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd


def _search_trials(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["kind"] == "trial") & ~df["trial_id"].astype(str).str.endswith("-final")]


def _gpu_of(extra: str) -> str:
    try:
        return str(json.loads(extra).get("gpu", ""))[:8]
    except (TypeError, ValueError):
        return ""


def sweep_row(summary: dict, trials: pd.DataFrame) -> dict:
    t = _search_trials(trials)
    ends = pd.to_datetime(t.groupby("trial_id")["timestamp"].max()).sort_values()
    n = len(ends)
    lo, hi = n // 4, 3 * n // 4
    mid = (hi - lo) / (ends.iloc[hi - 1] - ends.iloc[lo - 1]).total_seconds()
    wall = summary["tune_wall_s"]
    actors = [a for v in summary["actors"].values() for a in v]
    info = [a for v in summary["actor_info"].values() for a in v]
    busy = {str(i.get("gpu_uuid", ""))[:8]: a["busy_s"] / wall for a, i in zip(actors, info, strict=False)}
    per_gpu = t.drop_duplicates("trial_id", keep="last")["extra"].map(_gpu_of).value_counts().to_dict()
    errors = int((t.drop_duplicates("trial_id", keep="last")["status"] == "error").sum())
    return {"trials": summary["trials"], "expected": summary.get("trials_expected"), "tune_s": wall,
            "configs_per_s": summary["configs_per_s"], "mid_per_s": mid, "busy": busy, "per_gpu": per_gpu,
            "errors": errors, "actors": len(actors)}  # fmt: skip


def winners(trials: pd.DataFrame) -> dict[str, float]:
    """Problem key -> the winner's TFLOP/s in the sweep's final re-measure (the best final row of the problem)."""
    f = trials[(trials["kind"] == "trial") & trials["trial_id"].astype(str).str.endswith("-final")]
    f = f[f["status"] == "ok"]
    return f.groupby("problem_key")["tflops"].max().to_dict()


def load(d: Path, name: str) -> tuple[dict, pd.DataFrame]:
    return json.loads((d / f"{name}_summary.json").read_text()), pd.read_parquet(d / f"{name}_trials.parquet")


def table(d: Path, pairs: Sequence[tuple[str, str]], singles: Sequence[str]) -> str:
    names = [n for p in pairs for n in p] + list(singles)
    rows = {n: sweep_row(*load(d, n)) for n in names}
    lines = ["| sweep | trials | Tune s | configs/s | mid-sweep configs/s | busy fraction per GPU | trials per GPU "
             "| errors |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for n, r in rows.items():
        busy = ", ".join(f"{g}: {b:.2f}" for g, b in sorted(r["busy"].items()))
        gpus = ", ".join(f"{g}: {c}" for g, c in sorted(r["per_gpu"].items()))
        lines.append(f"| {n} | {r['trials']} | {r['tune_s']:.1f} | {r['configs_per_s']:.2f} | {r['mid_per_s']:.2f} "
                     f"| {busy} | {gpus} | {r['errors']} |")  # fmt: skip
    out = ["\n".join(lines)]
    for one, two in pairs:
        w1, w2 = winners(load(d, one)[1]), winners(load(d, two)[1])
        ratio = np.array([w2[k] / w1[k] for k in sorted(w1) if k in w2])
        out.append(f"{two} / {one}: configs/s {rows[two]['configs_per_s'] / rows[one]['configs_per_s']:.2f}x, "
                   f"mid-sweep {rows[two]['mid_per_s'] / rows[one]['mid_per_s']:.2f}x; winners (two-GPU sweep's "
                   f"TFLOP/s over the one-GPU sweep's, {len(ratio)} problems): min {ratio.min():.3f}, median "
                   f"{np.median(ratio):.3f}, max {ratio.max():.3f}, within 2%: {(ratio >= 0.98).sum()}")  # fmt: skip
    return "\n\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--pair", nargs=2, action="append", default=[], metavar=("ONE_GPU", "TWO_GPUS"))
    ap.add_argument("--sweep", action="append", default=[], help="A sweep shown alone (e.g. the kill -9 run).")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    text = table(a.dir, [tuple(p) for p in a.pair], a.sweep)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
