"""Do the searches of one sweep gain from each other's results? A lockstep replay of every problem of a table.

A sweep tunes many problems at once (the Llama-3-8B prefill set: 15 shapes), one search each. Here the GP without
the space files' priors runs on every problem key of a recorded table in lockstep rounds (each search one
evaluation a round, as a sweep's searches advance side by side), in four modes:

- `alone`: every search by itself (what a sweep does today);
- `siblings`: after each round, every search is given the other searches' results of the round, as
  `tune --share-results` gives them (gp.GPSearcher.add_related: read as a warm-start table is, each problem scaled
  by its best so far and weighted by its likeness to this search's problem); with as many earlier successes as
  its design has configs, it skips its design;
- `siblings after design`: the same, but each search first measures its own space-filling design.
- `near siblings`: as `siblings`, from the problems within NEAR of log weight only (warm.group_log_weight: one of
  head dim, mask or dtype differing at the same lengths, or twice or half both lengths; on the Llama set, the same
  length): a config measured only by far problems otherwise enters at its relative speed there.

Per problem key: median / worst evaluations (rounds) to 98% of the key's best over the seeds, and the seeds within
2% by the budget; then the geometric mean of the medians and the keys where every seed got within 2%.

    python -m benchmarks.sibling_replay --landscape tests/data/heldout/h100_llama_exhaustive.parquet \
        --seeds 10 --budget 30 --noise 0.02 --jobs 2
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks.replay_args import add_replay_args, check_replay_args
from benchmarks.replay_table import runs_cell, summary_cell
from benchmarks.search_table import landscapes
from raytune_attn.problem import Problem
from raytune_attn.tune.search.gp import GPSearcher
from raytune_attn.tune.search.landscape import load_landscape, read_table
from raytune_attn.tune.search.replay import noise_factors, tell
from raytune_attn.tune.search.warm import group_log_weight

MODES = ("alone", "siblings", "siblings after design", "near siblings")
NEAR = -16.0  # `near siblings`: the problems whose log weight (warm.group_log_weight) is at least this


class _KeepDesign(GPSearcher):
    """`siblings after design`: the other problems' results never replace the search's own design."""

    def _skip_design_if_known(self) -> None:
        pass


def lockstep(path: Path, mode: str, seed: int, budget: int, noise: float) -> dict[str, int]:
    """Problem key -> evaluations to 98% of its best (budget + 1: not reached) in one lockstep run."""
    from raytune_attn.tune.sweep.searcher import related_row

    keys = [k for _, k in landscapes([path], 0)]
    df = read_table(path)
    lands = {k: load_landscape(df[df["problem_key"].astype(str) == k]) for k in keys}
    cls = _KeepDesign if mode == "siblings after design" else GPSearcher
    searchers = {k: cls(land.space, seed=seed, priors=False, problem=land.problem or None)
                 for k, land in lands.items()}  # fmt: skip
    factors = {k: noise_factors(land, noise, seed) if noise else None for k, land in lands.items()}
    if mode == "near siblings":
        among = {k: {j for j in keys if j != k and group_log_weight(_fields(j), _fields(k)) >= NEAR} for k in keys}
    else:
        among = {k: set(keys) - {k} for k in keys}
    reached = dict.fromkeys(keys, budget + 1)
    built: dict[str, set] = {k: set() for k in keys}  # configs each search compiled: a second build is a cache load
    for r in range(budget):
        rows = []  # this round's results, as a sweep that shares them sends them on (--share-results)
        for k, s in searchers.items():
            land, tid = lands[k], f"t{r:04d}"
            cfg = s.suggest(tid)
            if cfg is None or cfg == s.FINISHED:
                continue
            v, result = tell(s, land, tid, cfg, built[k], factors[k])
            if v >= 0.98 * land.best and reached[k] > budget:  # NaN (a failure) compares false
                reached[k] = r + 1
            rows.append(related_row(k, cfg, result, land.objective))
        if mode != "alone":
            for k, s in searchers.items():
                s.add_related([row for row in rows if row["problem_key"] in among[k]])
    return reached


def _fields(key: str) -> dict:
    return dataclasses.asdict(Problem.from_key(key))


def _lockstep(args):
    return args, lockstep(*args)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--landscape", type=Path, required=True, help="A recorded table of several problem keys.")
    add_replay_args(ap, budget=30, seed_start=False)
    ap.add_argument("--mode", action="append", choices=MODES, help="Only these columns (repeatable).")
    a = ap.parse_args(argv)
    if not a.landscape.is_file():
        ap.error(f"--landscape {a.landscape}: no such file")
    check_replay_args(ap, a)
    modes = a.mode or list(MODES)
    jobs = [(a.landscape, m, seed, a.budget, a.noise) for m in modes for seed in range(a.seeds)]
    with ProcessPoolExecutor(a.jobs) as pool:
        results = dict(pool.map(_lockstep, jobs))
    keys = list(results[jobs[0]])
    lines = ["| problem | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
    per_mode = {m: [] for m in modes}
    for k in keys:
        for m in modes:
            ev = [results[(a.landscape, m, s, a.budget, a.noise)][k] for s in range(a.seeds)]
            per_mode[m].append((float(np.median(ev)), max(ev), sum(e <= a.budget for e in ev)))
        lines.append(f"| {k} | " + " | ".join(runs_cell(per_mode[m][-1], a.seeds) for m in modes) + " |")
    lines.append(f"| geometric mean, every seed within 2% on (of {len(keys)}) | "
                 + " | ".join(summary_cell(per_mode[m], a.seeds) for m in modes) + " |")  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(header(a) + text + "\n")
    return 0


def header(a: argparse.Namespace) -> str:
    """What the table is and the command that measures it (the options that change a figure)."""
    cmd = (f"python -m benchmarks.sibling_replay --landscape {a.landscape} --seeds {a.seeds} --budget {a.budget}"
           + (f" --noise {a.noise:g}" if a.noise else "") + "".join(f" --mode '{m}'" for m in a.mode or []))
    return (f"Lockstep replays of every problem of a recorded table, the GP without priors (deterministic, no GPU), "
            f"measured by `{cmd}`: median / worst evaluations to 98% of each problem's best (budget + 1 = not "
            f"reached), in brackets the seeds within 2% by the budget.\n\n")


if __name__ == "__main__":
    raise SystemExit(main())
