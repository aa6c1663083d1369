"""Do the searches of one sweep gain from each other's results? A lockstep replay of every problem of a table.

A sweep tunes many problems at once (the Llama-3-8B prefill set: 15 shapes), one search each. Here the GP without
the space files' priors runs on every problem key of a recorded table in lockstep rounds (each search one
evaluation a round, as a sweep's searches advance side by side), in three modes:

- `alone`: every search by itself (what a sweep does today);
- `siblings`: before each round, every search takes the other searches' results so far as its warm start (the
  table read as `tune --warm-start` reads one: warm.prior_scores, each problem scaled by its best so far and
  weighted by its likeness to this search's problem); with as many earlier successes as its design, it skips its
  design (gp.py);
- `siblings after design`: the same, but each search first measures its own space-filling design.
- `near siblings`: as `siblings`, from the problems within NEAR of log weight only (at most twice or half the
  sequence length, the same head dim, mask and dtype): a config measured only by far problems otherwise enters at
  its relative speed there.

Per problem key: median / worst evaluations (rounds) to 98% of the key's best over the seeds, and the seeds within
2% by the budget; then the geometric mean of the medians and the keys where every seed got within 2%.

    python -m benchmarks.sibling_replay --landscape tests/data/heldout/h100_llama_exhaustive.parquet \
        --seeds 10 --budget 30 --noise 0.02 --jobs 2
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.search_table import landscapes
from raytune_attn.problem import Problem
from raytune_attn.tune.search.gp import GPSearcher
from raytune_attn.tune.search.landscape import load_landscape, read_table
from raytune_attn.tune.search.replay import check_noise, noise_factors
from raytune_attn.tune.search.warm import group_log_weight

MODES = ("alone", "siblings", "siblings after design", "near siblings")
NEAR = -16.0  # `near siblings`: only the problems whose log weight (warm.group_log_weight) is at least this


def lockstep(path: Path, mode: str, seed: int, budget: int, noise: float) -> dict[str, int]:
    """Problem key -> evaluations to 98% of its best (budget + 1: not reached) in one lockstep run."""
    keys = [k for _, k in landscapes([path], 0)]
    df = read_table(path)
    lands = {k: load_landscape(df[df["problem_key"].astype(str) == k]) for k in keys}
    searchers = {k: GPSearcher(land.space, seed=seed, priors=False, problem=land.problem or None)
                 for k, land in lands.items()}  # fmt: skip
    factors = {k: noise_factors(land, noise, seed) if noise else None for k, land in lands.items()}
    near = {k: {j for j in keys if j != k and group_log_weight(_fields(j), _fields(k)) >= NEAR} for k in keys}
    rows: list[dict] = []
    reached = dict.fromkeys(keys, budget + 1)
    for r in range(budget):
        if mode != "alone" and rows:
            share(searchers, pd.DataFrame(rows), keep_design=mode == "siblings after design",
                  among=near if mode == "near siblings" else None)  # fmt: skip
        for k, s in searchers.items():
            land, tid = lands[k], f"t{r:04d}"
            cfg = s.suggest(tid)
            if cfg is None or cfg == s.FINISHED:
                continue
            v = land.value(cfg)
            if np.isfinite(v):
                value = v * factors[k][land.space.key(cfg)] if factors[k] else v
                s.on_trial_complete(tid, {land.objective: value, "status": "ok", "config": cfg})
                rows.append({"problem_key": k, **cfg, land.objective: value, "status": "ok"})
                if v >= 0.98 * land.best and reached[k] > budget:
                    reached[k] = r + 1
            else:
                s.on_trial_complete(tid, {"status": "invalid", "config": cfg})
                rows.append({"problem_key": k, **cfg, land.objective: math.nan, "status": "invalid"})
    return reached


def share(searchers: dict[str, GPSearcher], told: pd.DataFrame, *, keep_design: bool = False,
          among: dict[str, set[str]] | None = None) -> None:
    """Each search's warm start replaced by the other searches' results in `told` (a table with `problem_key`),
    or by those of the problems `among[key]` only; `keep_design`: a search keeps the rest of its own design."""
    for k, s in searchers.items():
        design = list(s._design)
        s._warm = []
        others = told[told["problem_key"] != k]
        if among is not None:
            others = others[others["problem_key"].isin(among[k])]
        if (others["status"] == "ok").any():
            s.add_warm_start(others)
        if keep_design:
            s._design = design


def _fields(key: str) -> dict:
    return dataclasses.asdict(Problem.from_key(key))


def _lockstep(args):
    return args, lockstep(*args)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--landscape", type=Path, required=True, help="A recorded table of several problem keys.")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=int, default=30)
    ap.add_argument("--noise", type=float, default=0.0, help="Run-to-run spread told to the searchers (0.02: 2%%).")
    ap.add_argument("--jobs", type=int, default=1, help="Runs at once (processes).")
    ap.add_argument("--mode", action="append", choices=MODES, help="Only these columns (repeatable).")
    ap.add_argument("--out", type=Path, help="Write the table (markdown) here.")
    a = ap.parse_args(argv)
    if not a.landscape.is_file():
        ap.error(f"--landscape {a.landscape}: no such file")
    if a.seeds < 1 or a.budget < 1 or a.jobs < 1:
        ap.error("--seeds, --budget and --jobs must be at least 1")
    try:
        check_noise(a.noise)
    except ValueError as e:
        ap.error(str(e))
    modes = a.mode or list(MODES)
    jobs = [(a.landscape, m, seed, a.budget, a.noise) for m in modes for seed in range(a.seeds)]
    with ProcessPoolExecutor(a.jobs) as pool:
        results = dict(pool.map(_lockstep, jobs))
    keys = list(results[jobs[0]])
    lines = ["| problem | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
    summary = {}
    for k in keys:
        cells = []
        for m in modes:
            ev = [results[(a.landscape, m, s, a.budget, a.noise)][k] for s in range(a.seeds)]
            cells.append(f"{np.median(ev):g} / {max(ev)} ({sum(e <= a.budget for e in ev)}/{a.seeds})")
            summary.setdefault(m, []).append((float(np.median(ev)), all(e <= a.budget for e in ev)))
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines.append(f"| geometric mean, every seed within 2% on (of {len(keys)}) | "
                 + " | ".join(f"{math.exp(np.mean([math.log(x) for x, _ in summary[m]])):.1f}, "
                              f"{sum(e for _, e in summary[m])}" for m in modes) + " |")  # fmt: skip
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
