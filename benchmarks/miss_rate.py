"""Runs that end more than 2% from the best, by budget: every landscape of the search docs' replay tables, per searcher.

Bar (b) of issue #36 asks every seed within 2% of the best by 50 evaluations on every landscape. This replays the
landscapes of the replay tables of docs/search.md and docs/benchmarks/search/heldout.md (SETS: the ones the searchers
were developed on, then the held-out sets) with each searcher of search_table.VARIANTS, seeds `--seed-start` .., up to
`--budget` evaluations (default 200), and counts the runs not yet within 2% after n evaluations for each n of `--at`,
and the fewest evaluations after which every run is. A searcher's n-th suggestion does not depend on the budget, so one
run of the largest budget gives every column (and at n = 50 the counts of the tables replayed at budget 50). Beside
them, bar (a)'s figure: the geometric mean over the landscapes of the median evaluations to 98% by 50, pooled over all
and over the held-out sets.

    python -m benchmarks.miss_rate --seeds 10 --budget 200 --jobs 2 --out docs/benchmarks/search/miss_rate

`--landscape FILE` (repeatable; FILE::KEY for one problem key) replays those tables instead of the sets, every key of
each, a set per file (docs/benchmarks/search/miss_rate_llama: the Llama set's keys).
`--screen` replays the candidates a sweep on each table's GPU would try (replay.sweep_screen).
`--out DIR` writes `runs.csv` (one row per run: set, landscape, problem key, knobs of its space, searcher, seed,
evaluations to 98% of the best, budget + 1 when never, the budget) and `README.md` (the tables printed, and the
command). `--runs FILE` (repeatable) reports earlier runs.csv files pooled instead of replaying (seeds 0-9 and 10-19
as 20), cut to `--budget` (default: the smallest of theirs); `--out` then writes the README.md only.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from benchmarks.bootstrap import figure, paired_ratio_interval, ratio_interval
from benchmarks.landscape_spec import split_spec
from benchmarks.replay_args import add_replay_args, check_replay_args
from benchmarks.search_table import DATA, DEVELOPED_ON, VARIANTS, landscapes, load_cell
from benchmarks.search_variants import VARIANTS as GP_VARIANTS
from benchmarks.search_variants import variant_runs
from raytune_attn.tune.search.landscape import Landscape
from raytune_attn.tune.search.replay import Run, run_seeds

HELD = DATA / "heldout"
# Set -> (files, problem keys per file: 0 = all), as the seven search_table commands of docs/search.md (the first)
# and docs/benchmarks/search/heldout.md give them.
SETS = {
    "developed on": (DEVELOPED_ON, 1),
    "held-out": ([HELD / f"{n}.parquet" for n in ("h100_bf16_d256_causal", "h100_fp16_d128_causal",
                  "h100_fp16_d128_full_gqa", "h100_fp16_d64_causal", "h100_llama_exhaustive", "h200_bf16_d256_causal",
                  "h200_fp16_d128_causal", "h200_fp16_d128_full_gqa", "h200_fp16_d64_causal")], 1),
    "held-out new": ([HELD / f"{n}.parquet" for n in ("h100_bf16_d128_causal_mqa", "h100_bf16_d256_full_short",
                      "h100_fp16_d128_causal_gqa8_long", "h100_fp16_d64_full_short", "h100_short_full")], 1),
    "H200 short, recorded again": ([HELD / "h200_short_full.parquet"], 0),
    "H200 study": ([HELD / "h200_bf16_d64_full_long.parquet", HELD / "h200_bf16_d128_full_gqa4.parquet"], 1),
    "H200 study 2": ([HELD / f"{n}.parquet" for n in ("h200_bf16_d64_causal_long", "h200_fp16_d256_full",
                      "h200_bf16_d128_causal_gqa8", "h200_fp16_d128_full_short")], 1),
    "H200 study 3": ([HELD / f"{n}.parquet" for n in ("h200_bf16_d128_full_s1024", "h200_fp16_d256_causal_long",
                      "h200_fp16_d64_full_gqa4", "h200_bf16_d128_full_long", "h200_fp16_d64_causal_short",
                      "h200_fp16_d128_causal_gqa8")], 1),
}  # fmt: skip
AT = (25, 50, 75, 100, 150, 200)
BAR = 50  # bar (b)'s budget
BUDGET = 200  # a replay's, when --budget is not given
PROBLEM = ["set", "landscape", "problem_key"]  # a run's problem: one landscape's key
BASE = "gp no priors"  # what the variants of search_variants change
VARIANT = "variant: "  # a searcher named VARIANT + NAME is search_variants.VARIANTS[NAME]
SEARCHERS = [c for c, *_ in VARIANTS] + [VARIANT + v for v in GP_VARIANTS if v != "no priors"]
COLUMNS = [*PROBLEM, "knobs", "searcher", "seed", "evals_to_98", "budget"]  # runs.csv


def replay_runs(path: Path, key: str | None, column: str, *, seeds: int, seed_start: int, budget: int,
                noise: float, screen: bool = False) -> tuple[Landscape, list[Run]]:  # fmt: skip
    """The landscape and each seed's run of `column` on it; `screen`: the candidates a sweep would screen
    (replay.sweep_screen)."""
    if column.startswith(VARIANT):
        return variant_runs(path, key, column.removeprefix(VARIANT), seeds=seeds, budget=budget,
                            seed_start=seed_start, noise=noise, screen=screen)  # fmt: skip
    land = load_cell(path, key)
    _, name, opts = next(v for v in VARIANTS if v[0] == column)
    return land, run_seeds(land, name, budget=budget, seeds=seeds, seed_start=seed_start, options=opts, noise=noise,
                           screen=screen)  # fmt: skip


def measure(path: Path, key: str | None, column: str, *, seeds: int, seed_start: int, budget: int,
            noise: float, screen: bool = False) -> tuple[int, list[int]]:  # fmt: skip
    """The landscape's knobs, and the evaluations to 98% of its best of each seed's run of `column` (budget + 1:
    never)."""
    land, runs = replay_runs(path, key, column, seeds=seeds, seed_start=seed_start, budget=budget, noise=noise,
                             screen=screen)  # fmt: skip
    return len(land.space.names), [r.evals_to(0.98 * land.best, budget) for r in runs]


def _measure(args):
    path, key, column, kw = args
    return measure(path, key, column, **kw)


def collect(sets: dict, columns: Sequence[str], *, seeds: int, seed_start: int, budget: int, noise: float,
            jobs: int, screen: bool = False) -> pd.DataFrame:  # fmt: skip
    """One row per run: set, landscape, problem_key, knobs (of its space), searcher, seed, evals_to_98, budget."""
    cells = [(name, path, key, col) for name, (files, per) in sets.items() for path, key in landscapes(files, per)
             for col in columns]  # fmt: skip
    kw = {"seeds": seeds, "seed_start": seed_start, "budget": budget, "noise": noise, "screen": screen}
    with ProcessPoolExecutor(jobs) as pool:  # every run is seeded: the same rows for any --jobs
        results = list(pool.map(_measure, [(path, key, col, kw) for _, path, key, col in cells]))
    rows = []
    for (name, path, key, col), (knobs, evals) in zip(cells, results, strict=True):
        rows += [{"set": name, "landscape": Path(path).stem, "problem_key": key or "", "knobs": knobs,
                  "searcher": col, "seed": seed_start + i, "evals_to_98": e, "budget": budget}
                 for i, e in enumerate(evals)]  # fmt: skip
    return pd.DataFrame(rows)


def saved_runs(paths: Sequence[Path], budget: int | None = None) -> pd.DataFrame:
    """The runs.csv files of earlier commands, pooled (seeds 0-9 and 10-19 as one of 20) and cut to `budget` (default:
    the smallest the files ran with), as a run's n-th suggestion does not depend on its budget. ValueError naming the
    file when one lacks a column or ran fewer than `budget` evaluations, or naming the run when two files hold the same
    seed of one searcher on one landscape."""
    frames = []
    for path in paths:
        df = pd.read_csv(path, keep_default_na=False)  # an empty problem_key: every key of the file
        missing = [c for c in COLUMNS if c not in df.columns]
        if missing:
            raise ValueError(f"{path}: not a runs.csv of this command, no column {', '.join(missing)}")
        frames.append(df[COLUMNS])
    runs = pd.concat(frames, ignore_index=True)
    budget = budget or int(runs.budget.min())
    short = [(str(path), int(f.budget.min())) for path, f in zip(paths, frames, strict=True) if f.budget.min() < budget]
    if short:
        raise ValueError(f"{short[0][0]} ran {short[0][1]} evaluations, fewer than the budget {budget}")
    twice = runs[runs.duplicated(PROBLEM + ["searcher", "seed"])]
    if len(twice):
        r = twice.iloc[0]
        raise ValueError(f"seed {r.seed} of {r.searcher} on {r.landscape} {r.problem_key} is in two of the runs files")
    return runs.assign(evals_to_98=runs.evals_to_98.clip(upper=budget + 1), budget=budget)


def misses(runs: pd.DataFrame, at: Sequence[int], budget: int) -> str:
    """Per searcher: the runs not within 2% after each n of `at`, and after how many evaluations every run is."""
    cols = [n for n in at if n <= budget]
    lines = ["| searcher | runs | " + " | ".join(f"missing after {n}" for n in cols) + " | every run within 2% after |",
             "|---|---|" + "---|" * (len(cols) + 1)]  # fmt: skip
    for searcher, g in runs.groupby("searcher", sort=False):
        n = len(g)
        cells = [f"{(g.evals_to_98 > k).sum()} ({(g.evals_to_98 > k).mean():.1%})" for k in cols]
        worst = int(g.evals_to_98.max())
        every = str(worst) if worst <= budget else f"> {budget} ({(g.evals_to_98 > budget).sum()} runs never)"
        lines.append(f"| {searcher} | {n} | " + " | ".join(cells) + f" | {every} |")
    return "\n".join(lines)


def _capped(runs: pd.DataFrame, bar: int) -> pd.DataFrame:
    """The runs with `e`, bar (a)'s count: the evaluations to 98%, a run not within 2% by `bar` counted bar + 1."""
    return runs.assign(e=runs.evals_to_98.clip(upper=bar + 1))


def medians(runs: pd.DataFrame, bar: int) -> str:
    """Bar (a)'s figure per searcher: the median over the seeds of the evaluations to 98% (a run not within 2% by
    `bar` counted bar + 1), its geometric mean over the landscapes, and the GP without priors over TPE with its 95%
    bootstrap interval over the seeds (benchmarks.bootstrap; with two seeds or more)."""
    capped = _capped(runs, bar)
    geo = {s: figure(g, problem=PROBLEM, value="e") for s, g in capped.groupby("searcher", sort=False)}
    text = ", ".join(f"{s} {geo[s]:.1f}" for s in geo)
    if {"gp no priors", "tpe"} <= set(geo):
        text += f" (gp no priors / tpe {geo['gp no priors'] / geo['tpe']:.2f}x"
        if runs.seed.nunique() > 1:
            gp, tpe = (capped[capped.searcher == s] for s in ("gp no priors", "tpe"))
            lo, hi = ratio_interval(gp, tpe, problem=PROBLEM, unit="seed", value="e")
            text += f", 95% interval over the seeds {lo:.2f}-{hi:.2f}x"
        text += ")"
    return f"{capped.groupby(PROBLEM).ngroups} landscapes: {text}"


def against_base(runs: pd.DataFrame, bar: int) -> str | None:
    """Each variant's bar (a) figure over the GP without priors' on the same seeds and landscapes, with its paired
    95% bootstrap interval (benchmarks.bootstrap: the same seeds drawn for both); None without a variant beside it."""
    capped = _capped(runs, bar)
    base = capped[capped.searcher == BASE]
    names = [s for s in dict.fromkeys(runs.searcher) if s.startswith(VARIANT)]
    if base.empty or not names or base.seed.nunique() < 2:
        return None
    parts = []
    for name in names:
        v = capped[capped.searcher == name]
        ratio = figure(v, problem=PROBLEM, value="e") / figure(base, problem=PROBLEM, value="e")
        lo, hi = paired_ratio_interval(v, base, problem=PROBLEM, unit="seed", value="e")
        parts.append(f"{name.removeprefix(VARIANT)} {ratio:.3f}x ({lo:.2f}-{hi:.2f}x)")
    return (f"Variants over the GP without priors on the same seeds, bar (a)'s figure by {bar} (paired 95% interval "
            f"over the seeds): " + "; ".join(parts) + ".")


def by_group(runs: pd.DataFrame, column: str, at: Sequence[int]) -> str:
    """Per value of `column` (set, knobs) and searcher: the runs missing 2% after each n of `at`, of how many."""
    searchers = list(dict.fromkeys(runs.searcher))
    lines = [f"| {column} | landscapes | " + " | ".join(searchers) + " |", "|---|---|" + "---|" * len(searchers)]
    for name, g in runs.groupby(column, sort=False):
        n_land = g.groupby(["landscape", "problem_key"]).ngroups
        evals = [g[g.searcher == s].evals_to_98 for s in searchers]
        cells = [" / ".join(str((e > k).sum()) for k in at) + f" of {len(e)}" for e in evals]
        lines.append(f"| {name} | {n_land} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def worst_runs(runs: pd.DataFrame, searcher: str, at: Sequence[int], budget: int) -> str:
    """The landscapes where a run of `searcher` misses 2% after `at[0]`: its runs missing after each n of `at`, and its
    worst run."""
    g = runs[runs.searcher == searcher]
    after = " / ".join(str(n) for n in at)
    lines = [f"| landscape | knobs | missing after {after} | worst run: evaluations to 98% |", "|---|---|---|---|"]
    for (land, key), r in g.groupby(["landscape", "problem_key"], sort=False):
        if (r.evals_to_98 > at[0]).any():
            worst = int(r.evals_to_98.max())
            cell = str(worst) if worst <= budget else f"> {budget}"
            missing = " / ".join(str((r.evals_to_98 > n).sum()) for n in at)
            lines.append(f"| {land} {key} | {r.knobs.iloc[0]} | {missing} of {len(r)} | {cell} |")
    if len(lines) == 2:
        lines.append("| none | | | |")
    return "\n".join(lines)


def report(runs: pd.DataFrame, budget: int, at: Sequence[int], command: str) -> str:
    """The tables, for bar (b)'s 50 evaluations (the budget, when smaller) and the next two budgets of `at`."""
    seeds, bar = sorted(runs.seed.unique()), min(BAR, budget)
    n_land = runs.groupby(["landscape", "problem_key"]).ngroups
    head = (f"Runs more than 2% from the best after n evaluations, seeds {seeds[0]}-{seeds[-1]}, budget {budget} "
            f"({n_land} landscapes). Measured by:\n\n    {command}\n")
    cols = [bar, *[n for n in at if bar < n <= budget][:2]]
    after = " / ".join(str(n) for n in cols)
    pooled = (f"Median evaluations to 98% by {bar} ({bar + 1}: not within 2% by then), geometric mean over "
              + medians(runs, bar))
    held = runs[runs.set != "developed on"]
    if 0 < len(held) < len(runs):
        pooled += f"; over the held-out {medians(held, bar)}"
    variants = against_base(runs, bar)
    parts = [head, misses(runs, at, budget), pooled + "." + (f"\n\n{variants}" if variants else ""),
             f"By set, runs missing 2% after {after} evaluations:\n\n{by_group(runs, 'set', cols)}",
             f"By the number of knobs of the landscape's space (5: the study space), after {after}:\n\n"
             + by_group(runs.sort_values("knobs", kind="stable"), "knobs", cols)]  # fmt: skip
    if "gp no priors" in set(runs.searcher):
        parts.append(f"The GP without priors, landscapes where a run misses after {bar}:\n\n"
                     + worst_runs(runs, "gp no priors", cols, budget))  # fmt: skip
    return "\n\n".join(parts) + "\n"


def readme_command(text: str) -> str:
    """The command a README.md this script wrote names under "Measured by:" (report); ValueError when it names none."""
    m = re.search(r"Measured by:\n\n    (.+)\n", text)
    if not m:
        raise ValueError("no 'Measured by:' command")
    return m.group(1)


def given_sets(ap: argparse.ArgumentParser, specs: Sequence[str]) -> dict:
    """Set name (the file's stem) -> (its FILE or FILE::KEY specs, 0: every key); a missing file is refused now."""
    sets: dict[str, tuple[list[str], int]] = {}
    for spec in specs:
        path = split_spec(spec)[0]
        if not path.is_file():
            ap.error(f"--landscape {spec}: no such file {path}")
        sets.setdefault(path.stem, ([], 0))[0].append(spec)
    return sets


def saved(ap: argparse.ArgumentParser, a: argparse.Namespace) -> pd.DataFrame:
    """--runs: the files' runs (of --searcher's searchers, when given) cut to --budget when given; a usage error for a
    replay option beside it, a missing file or one saved_runs refuses."""
    replaying = [f"--{n.replace('_', '-')}" for n in ("landscape", "set", "screen", "noise", "seed_start", "seeds")
                 if getattr(a, n) != ap.get_default(n)]  # fmt: skip
    if replaying:
        ap.error(f"--runs reports saved runs: {', '.join(replaying)} would choose runs to replay, give none")
    for path in a.runs:
        if not path.is_file():
            ap.error(f"--runs {path}: no such file")
    try:
        runs = saved_runs(a.runs, a.budget)
    except ValueError as e:
        ap.error(f"--runs: {e}")
    runs = runs[runs.searcher.isin(a.searcher)] if a.searcher else runs
    if runs.empty:
        ap.error(f"--runs: no run of {', '.join(a.searcher)} in the files")
    return runs


def parser() -> argparse.ArgumentParser:
    """This command's options (benchmarks.replay_check reads a committed README's command with them)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # --budget defaults to None, so that a given 200 differs from none: BUDGET for a replay, the files' for --runs.
    add_replay_args(ap, budget=None, screen=True, out_help="A folder for runs.csv and README.md.")
    ap.add_argument("--at", type=int, action="append", help=f"Evaluations to count misses after (default {AT}).")
    ap.add_argument("--searcher", action="append", choices=SEARCHERS, metavar="SEARCHER",
                    help="Only these searchers (repeatable; default the first four): "
                    + ", ".join(SEARCHERS).replace("%", "%%")  # argparse formats help with %
                    + f"; '{VARIANT}NAME' is the GP without priors changed as benchmarks.search_variants names it.")
    ap.add_argument("--set", action="append", choices=list(SETS), help="Only these sets of landscapes (repeatable).")
    ap.add_argument("--landscape", action="append", help="Instead of the sets: this recorded table, every problem key "
                    "of it, or FILE::PROBLEM_KEY for one (repeatable; each file is a set of its own).")
    ap.add_argument("--runs", action="append", type=Path, help="Instead of replaying: report this runs.csv of an "
                    "earlier command, pooled with the others given (repeatable; --budget must be theirs).")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    check_replay_args(ap, a)
    at = sorted(set(a.at or AT))
    if at[0] < 1:
        ap.error(f"--at counts evaluations: at least 1, got {at[0]}")
    if a.landscape and a.set:
        ap.error("--landscape and --set both choose the landscapes: give one of them")
    runs = saved(ap, a) if a.runs else collect(
        given_sets(ap, a.landscape) if a.landscape else {k: v for k, v in SETS.items() if not a.set or k in a.set},
        a.searcher or [c for c, *_ in VARIANTS], seeds=a.seeds, seed_start=a.seed_start, budget=a.budget or BUDGET,
        noise=a.noise, jobs=a.jobs, screen=a.screen)  # fmt: skip
    command = "python -m benchmarks.miss_rate " + shlex.join(sys.argv[1:] if argv is None else argv)
    text = report(runs, int(runs.budget.iloc[0]), at, command)
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        if not a.runs:  # saved runs stay in the files the command names
            runs.to_csv(a.out / "runs.csv", index=False)
        (a.out / "README.md").write_text(f"# Runs missing 2% of the best, by budget\n\n{text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
