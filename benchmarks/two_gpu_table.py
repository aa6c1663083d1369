"""One GPU against two (benchmarks/two_gpus.sh): a table of sweeps, and the winners of a pair compared problem by
problem. Reads each sweep's summary.json and trials.parquet (the files the script leaves as NAME_summary.json and
NAME_trials.parquet).

    python -m benchmarks.two_gpu_table --dir docs/benchmarks/h100x2 --pair grid-1gpu grid-2gpu \
        --pair decode-1gpu decode-2gpu --sweep grid-kill-r3 --out docs/benchmarks/h100x2/table.md

Per sweep: trials, Tune's wall time, configs per second over it and mid-sweep (benchmarks/sweep_rates.py), each
GPU's busy fraction (its benchmark actor's seconds running kernels over Tune's wall time), the trials each GPU ran
(by the GPU's UUID recorded per trial) and the trials that ended in an error.
Per pair: the ratio of configs per second, and per problem the two-GPU sweep's winner's TFLOP/s over the one-GPU
sweep's, each as its own sweep named and measured it (winners.py: the final re-measure where there is one).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.sweep_rates import rates
from raytune_attn.tune.winners import is_final, winners


def _gpu_of(extra: str) -> str:
    try:
        return str(json.loads(extra).get("gpu", ""))[:8]
    except (TypeError, ValueError):
        return ""


def sweep_row(summary: dict, trials: pd.DataFrame) -> dict:
    _, mid, _ = rates(trials)
    wall = summary["tune_wall_s"]
    actors = [a for v in summary["actors"].values() for a in v]
    info = [a for v in summary["actor_info"].values() for a in v]
    busy = {str(i.get("gpu_uuid", ""))[:8]: a["busy_s"] / wall for a, i in zip(actors, info, strict=False)}
    last = trials[(trials["kind"] == "trial") & ~trials["trial_id"].map(is_final)].drop_duplicates("trial_id",
                                                                                                    keep="last")
    return {"trials": summary["trials"], "expected": summary.get("trials_expected"), "tune_s": wall,
            "configs_per_s": summary["configs_per_s"], "mid_per_s": mid, "busy": busy,
            "per_gpu": last["extra"].map(_gpu_of).value_counts().to_dict(),
            "errors": int((last["status"] == "error").sum()), "actors": len(actors)}  # fmt: skip


def winning_tflops(trials: pd.DataFrame) -> dict[str, float]:
    """Problem key -> the TFLOP/s of the winner the sweep named (winners.py: its final re-measure where it has one,
    else its best rung)."""
    return {pk: float(row["tflops"]) for (_, pk), row in winners(trials).items()}


def load(d: Path, name: str) -> tuple[dict, pd.DataFrame]:
    return json.loads((d / f"{name}_summary.json").read_text()), pd.read_parquet(d / f"{name}_trials.parquet")


def table(d: Path, pairs: Sequence[tuple[str, str]], singles: Sequence[str]) -> str:
    names = [n for p in pairs for n in p] + list(singles)
    data = {n: load(d, n) for n in names}
    rows = {n: sweep_row(*data[n]) for n in names}
    lines = ["| sweep | trials | Tune s | configs/s | mid-sweep configs/s | busy fraction per GPU | trials per GPU "
             "| errors |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for n, r in rows.items():
        busy = ", ".join(f"{g}: {b:.2f}" for g, b in sorted(r["busy"].items()))
        gpus = ", ".join(f"{g}: {c}" for g, c in sorted(r["per_gpu"].items()))
        lines.append(f"| {n} | {r['trials']} | {r['tune_s']:.1f} | {r['configs_per_s']:.2f} | {r['mid_per_s']:.2f} "
                     f"| {busy} | {gpus} | {r['errors']} |")  # fmt: skip
    out = ["\n".join(lines)]
    for one, two in pairs:
        w1, w2 = winning_tflops(data[one][1]), winning_tflops(data[two][1])
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
