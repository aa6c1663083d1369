"""Do the committed replay tables still come out of today's code? Replays a sample of a miss_rate folder's runs again.

Each folder of docs/benchmarks/search (miss_rate*/, variants_*/) holds the runs.csv and README.md of a
`benchmarks.miss_rate` command, and tests/test_miss_rate.py checks that the README is the report of those runs. A replay
is deterministic on one numeric stack (every searcher and the noise are seeded; on another numpy / scipy about 1 run in
100 takes another path: docs/benchmarks/search/bars.md, "Two machines"), so the runs themselves come out again for as
long as the searchers do not change. This takes, for each searcher of a folder's runs.csv, the runs that took the most
evaluations within `--within` (50 by default: long trajectories, where a changed step shows), replays each with the
options of the command in the folder's README, and names every run that comes out different. When a change to a searcher
moves them, the folders it names are to be measured again by their commands before the change lands (their numbers are
quoted across docs/search.md and docs/benchmarks/search/).

    python -m benchmarks.replay_check docs/benchmarks/search/miss_rate_screen docs/benchmarks/search/miss_rate
    python -m benchmarks.replay_check --all --jobs 2   # every committed folder whose command replays
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmarks import miss_rate
from benchmarks.landscape_spec import split_spec

ROOT = Path(__file__).resolve().parents[1]
SEARCH_DOCS = ROOT / "docs" / "benchmarks" / "search"
WITHIN = 50  # bar (b)'s budget: the sample's runs reached 98% of the best by then


def folders(root: Path = SEARCH_DOCS) -> list[Path]:
    """The folders under `root` with a runs.csv and a README whose command replays (not one that pools --runs)."""
    readmes = [p.parent / "README.md" for p in root.glob("**/runs.csv") if (p.parent / "README.md").is_file()]
    return sorted(r.parent for r in readmes if "--runs" not in shlex.split(miss_rate.readme_command(r.read_text())))


def sample(runs: pd.DataFrame, per_searcher: int, within: int) -> pd.DataFrame:
    """For each searcher, the `per_searcher` runs that took the most evaluations to 98% within `within` (and their
    budget); ties go to the lowest seed, then the first landscape."""
    done = runs[(runs.evals_to_98 <= within) & (runs.evals_to_98 <= runs.budget)]
    done = done.sort_values(["evals_to_98", "seed", "landscape", "problem_key"], ascending=[False, True, True, True])
    return done.groupby("searcher", sort=True).head(per_searcher)


def _sets(command: str) -> tuple[argparse.Namespace, dict]:
    """The parsed options of a miss_rate command and its sets of landscapes (set name -> (files, keys per file)), the
    command's relative paths read from the repository root."""
    ap = miss_rate.parser()
    a = ap.parse_args(shlex.split(command)[3:])  # after "python -m benchmarks.miss_rate"
    if a.landscape:
        return a, miss_rate.given_sets(ap, [str(ROOT / spec) for spec in a.landscape])
    return a, {k: v for k, v in miss_rate.SETS.items() if not a.set or k in a.set}


def _path(files: Sequence, stem: str) -> Path:
    for spec in files:
        path = split_spec(spec)[0]
        if path.stem == stem:
            return path
    raise ValueError(f"no file {stem} in its set")


@dataclass(frozen=True)
class Folder:
    """A miss_rate folder read: its runs.csv and what its README's command replays them with."""

    path: Path
    runs: pd.DataFrame
    sets: dict  # set name -> (files, keys per file), as miss_rate.SETS
    options: dict  # the command's noise and screen

    def jobs(self, rows: pd.DataFrame, budget: int) -> list[tuple]:
        """(file, problem key, searcher, seed, budget, options) to replay each of `rows` (runs of this folder) up to
        `budget` evaluations (at most its own); ValueError naming the folder when a row's landscape is not in the
        command's sets."""
        try:
            return [(_path(self.sets[r.set][0], r.landscape), r.problem_key or None, r.searcher, int(r.seed),
                     min(budget, int(r.budget)), self.options) for r in rows.itertuples()]  # fmt: skip
        except (KeyError, ValueError) as e:
            raise ValueError(f"{self.path}: cannot replay its runs ({e})") from None


def read_folder(folder: Path) -> Folder:
    """A miss_rate folder's runs and its command's options; ValueError naming the folder when it cannot be read, its
    README has no command that replays the runs, or its runs.csv lacks a column."""
    try:
        a, sets = _sets(miss_rate.readme_command((folder / "README.md").read_text()))
        runs = pd.read_csv(folder / "runs.csv", keep_default_na=False)  # an empty problem_key: the file has none
    except (OSError, ValueError, SystemExit) as e:  # SystemExit: argparse refused the command
        raise ValueError(f"{folder}: cannot replay its runs ({e})") from None
    missing = [c for c in miss_rate.COLUMNS if c not in runs.columns]
    if missing:
        raise ValueError(f"{folder}: cannot replay its runs (runs.csv has no column {', '.join(missing)})")
    return Folder(folder, runs, sets, {"noise": a.noise, "screen": a.screen})


def _replay(job: tuple) -> int:
    path, key, searcher, seed, budget, options = job
    return miss_rate.measure(path, key, searcher, seeds=1, seed_start=seed, budget=budget, **options)[1][0]


def check(folder: Path, *, per_searcher: int = 1, within: int = WITHIN, jobs: int = 1) -> list[str]:
    """The sampled runs of `folder` (see `sample`) that come out different when replayed now, one line each; empty
    when every one is as committed. ValueError naming the folder when its files cannot be read this way."""
    read = read_folder(folder)
    rows = sample(read.runs, per_searcher, within)
    jobs_ = read.jobs(rows, within)
    with ProcessPoolExecutor(jobs) as pool:
        got = list(pool.map(_replay, jobs_))
    return [f"{folder}: {r.searcher} on {r.landscape} {r.problem_key} seed {r.seed}: committed {r.evals_to_98}, "
            f"replayed {g}" for r, g in zip(rows.itertuples(), got, strict=True) if g != r.evals_to_98]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="*", type=Path, help="A folder of a miss_rate command's runs.csv and README.md.")
    ap.add_argument("--all", action="store_true", help=f"Every such folder under {SEARCH_DOCS.relative_to(ROOT)}.")
    ap.add_argument("--per-searcher", type=int, default=1, help="Runs replayed per searcher of a folder (default 1).")
    ap.add_argument("--within", type=int, default=WITHIN, help=f"Sample runs that reached 98%% by this many "
                    f"evaluations (default {WITHIN}).")
    ap.add_argument("--jobs", type=int, default=1, help="Runs replayed at once.")
    a = ap.parse_args(argv)
    if bool(a.folder) == a.all:
        ap.error("give folders or --all, one of them")
    if a.per_searcher < 1 or a.within < 1 or a.jobs < 1:
        ap.error("--per-searcher, --within and --jobs count: at least 1 each")
    missing = [str(f) for f in a.folder if not (f / "runs.csv").is_file() or not (f / "README.md").is_file()]
    if missing:
        ap.error(f"no runs.csv and README.md in {', '.join(missing)}")
    differ = []
    for folder in folders() if a.all else a.folder:
        try:
            lines = check(folder, per_searcher=a.per_searcher, within=a.within, jobs=a.jobs)
        except ValueError as e:
            ap.error(str(e))
        print("\n".join(lines) if lines else f"{folder}: as committed")
        differ += lines
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
