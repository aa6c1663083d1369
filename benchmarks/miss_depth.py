"""How far the runs that miss 2% of the best end: the fraction of the best they reached by `--at` evaluations.

Bar (b) of issue #36 counts a run as a miss when it is not within 2% of the landscape's best after 50 evaluations, and
a landscape times each config once, with a run-to-run spread of about 2% (docs/benchmarks/search/remeasured.md). This
takes the runs of miss_rate folders (runs.csv and README.md: docs/benchmarks/search/miss_rate*/) that miss at `--at`,
replays each with the options of its folder's command (replays are seeded: the same run comes out again on one numeric
stack; one that now reaches 98% is counted apart), and tables the fraction of the best (its true, recorded value) each
reached: per searcher and per landscape, the median and the worst, and how many end within 3% and within 5%.

    python -m benchmarks.miss_depth docs/benchmarks/search/miss_rate_screen \
        docs/benchmarks/search/miss_rate_screen/seeds10 docs/benchmarks/search/miss_rate_screen/seeds20 \
        --searcher tpe --jobs 2 --out docs/benchmarks/search/miss_depth/screen_tpe

`--out DIR` writes `depth.csv` (one row per replayed run: folder, set, landscape, problem key, searcher, seed, the
fraction reached) and `README.md` (the tables printed, and the command).
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import miss_rate
from benchmarks.replay_check import read_folder

AT = 50  # bar (b)'s budget
WITHIN = (0.97, 0.95)  # the bands counted beside bar (b)'s 0.98


def missed(runs: pd.DataFrame, at: int) -> pd.DataFrame:
    """The runs not within 2% of the best after `at` evaluations; ValueError when a run's budget is below `at` (what
    it would have reached by then is not known)."""
    short = runs[runs.budget < at]
    if len(short):
        raise ValueError(f"runs of budget {int(short.budget.min())} cannot say where they are after {at} evaluations")
    return runs[runs.evals_to_98 > at]


def _reached(job: tuple) -> float:
    """The fraction of the landscape's best the replayed run held after its budget (0 when nothing succeeded)."""
    path, key, searcher, seed, budget, options = job
    land, runs = miss_rate.replay_runs(path, key, searcher, seeds=1, seed_start=seed, budget=budget, **options)
    last = runs[0].trace[-1] if runs[0].trace else math.nan
    return 0.0 if math.isnan(last) else last / land.best


def collect(folders: Sequence[Path], at: int, searchers: Sequence[str], jobs: int) -> pd.DataFrame:
    """One row per run of the folders that misses at `at` (of `searchers`, or all): its problem, searcher, seed and
    `reached`, the fraction of the best after `at` evaluations replayed now."""
    rows, work = [], []
    for folder in folders:  # every folder read and its command parsed before any replay
        read = read_folder(folder)  # its errors name the folder
        try:
            runs = missed(read.runs, at)
        except ValueError as e:
            raise ValueError(f"{folder}: {e}") from None
        if searchers:
            runs = runs[runs.searcher.isin(searchers)]
        rows.append(runs.assign(folder=str(folder)))
        work += read.jobs(runs, at)
    with ProcessPoolExecutor(jobs) as pool:  # each run seeded: the same fractions for any --jobs
        reached = list(pool.map(_reached, work))
    cols = ["folder", *miss_rate.PROBLEM, "searcher", "seed"]
    out = pd.concat(rows, ignore_index=True)[cols] if rows else pd.DataFrame(columns=cols)
    return out.assign(reached=reached)


def _band_cells(r: pd.Series) -> str:
    return " | ".join(f"{int((r >= w).sum())}" for w in WITHIN)


def _summary(df: pd.DataFrame, by: list[str]) -> list[str]:
    lines = []
    for name, g in df.groupby(by, sort=True):
        name = " ".join(str(n) for n in (name if isinstance(name, tuple) else (name,)) if n != "")
        r = g.reached
        again = int((r >= 0.98).sum())
        lines.append(f"| {name} | {len(g)} | {again} | {np.median(r):.3f} | {r.min():.3f} | {_band_cells(r)} |")
    return lines


def report(df: pd.DataFrame, at: int) -> str:
    """Markdown: per searcher, then per searcher and landscape, the replayed misses and how far they reached."""
    head = ("| {} | missed at {} | within 2% when replayed | median reached | worst | within 3% | within 5% |\n"
            "|---|---|---|---|---|---|---|")  # fmt: skip
    if df.empty:
        return f"No run of these folders misses 2% of the best after {at} evaluations."
    return "\n".join([
        f"Runs more than 2% from the best after {at} evaluations, the fraction of the best they reached then:", "",
        head.format("searcher", at), *_summary(df, ["searcher"]), "",
        head.format("searcher, landscape", at), *_summary(df, ["searcher", "landscape", "problem_key"]),
    ])  # fmt: skip


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="+", type=Path, help="A folder of a miss_rate command's runs.csv and README.md.")
    ap.add_argument("--at", type=int, default=AT, help=f"Evaluations after which a run counts as a miss ({AT}).")
    ap.add_argument("--searcher", action="append", default=[], help="Only these searchers' runs (repeatable).")
    ap.add_argument("--jobs", type=int, default=1, help="Runs replayed at once (processes).")
    ap.add_argument("--out", type=Path, help="A folder for depth.csv and README.md.")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    if a.at < 1 or a.jobs < 1:
        ap.error("--at and --jobs count: at least 1 each")
    try:
        df = collect(a.folder, a.at, a.searcher, a.jobs)
    except ValueError as e:
        ap.error(str(e))
    text = report(df, a.at)
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        df.to_csv(a.out / "depth.csv", index=False)
        command = "python -m benchmarks.miss_depth " + shlex.join(sys.argv[1:] if argv is None else argv)
        (a.out / "README.md").write_text(f"# How far the misses end\n\nMeasured by:\n\n    {command}\n\n{text}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
