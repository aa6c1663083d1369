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
2% by the budget; then the geometric mean of the medians and the keys where every seed got within 2%. A second table
counts the seeds whose sweep would name a winner within 2% of the key's best: after the budget, `tune`'s final
re-measure (sweep/remeasure.py, `final_candidates`, with tune's default --top-k and --family-k) times again each
search's own best configs by the values it was told and the winners of its nearest siblings of the same kernel
(heads, head dim, mask, dtype) that it did not measure; a long re-measure ranks them by their speed, here the recorded
value.

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
from types import SimpleNamespace

import numpy as np

from benchmarks.replay_args import add_replay_args, check_replay_args
from benchmarks.replay_table import runs_cell, summary_cell
from benchmarks.search_table import landscapes
from raytune_attn.problem import Problem
from raytune_attn.tune.search.gp import GPSearcher
from raytune_attn.tune.search.landscape import load_landscape, read_table
from raytune_attn.tune.search.replay import noise_factors, sweep_screen, tell
from raytune_attn.tune.search.warm import group_log_weight
from raytune_attn.tune.sweep.config import SweepConfig
from raytune_attn.tune.sweep.remeasure import config_key, final_candidates

MODES = ("alone", "siblings", "siblings after design", "near siblings")
_TUNE = SweepConfig()  # tune's defaults: --top-k and --family-k of the final re-measure
NEAR = -16.0  # `near siblings`: the problems whose log weight (warm.group_log_weight) is at least this


class _KeepDesign(GPSearcher):
    """`siblings after design`: the other problems' results never replace the search's own design."""

    def _skip_design_if_known(self) -> None:
        pass


@dataclasses.dataclass(frozen=True)
class KeyRun:
    """One problem's search in one lockstep run."""

    evals: int  # evaluations to 98% of the key's best (budget + 1: not reached)
    named: float  # the recorded value of the config the final re-measure names, over the key's best


def lockstep(path: Path, mode: str, seed: int, budget: int, noise: float, screen: bool = False) -> dict[str, KeyRun]:
    """Problem key -> its search's evaluations to 98% of its best and the final re-measure's pick, in one lockstep
    run. `screen`: each search's candidates as a sweep on the table's GPU screens them (replay.sweep_screen)."""
    from raytune_attn.tune.sweep.searcher import related_row

    keys = [k for _, k in landscapes([path], 0)]
    df = read_table(path)
    lands = {k: load_landscape(df[df["problem_key"].astype(str) == k]) for k in keys}
    cls = _KeepDesign if mode == "siblings after design" else GPSearcher
    searchers = {k: cls(land.space, seed=seed, priors=False, problem=land.problem or None,
                        prefilter=sweep_screen(land) if screen else None)
                 for k, land in lands.items()}  # fmt: skip
    factors = {k: noise_factors(land, noise, seed) if noise else None for k, land in lands.items()}
    if mode == "near siblings":
        among = {k: {j for j in keys if j != k and group_log_weight(_fields(j), _fields(k)) >= NEAR} for k in keys}
    else:
        among = {k: set(keys) - {k} for k in keys}
    reached = dict.fromkeys(keys, budget + 1)
    built: dict[str, set] = {k: set() for k in keys}  # configs each search compiled: a second build is a cache load
    told: dict[str, list] = {k: [] for k in keys}  # each search's (config, value told or None for a failure)
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
            told[k].append((cfg, result.get(land.objective)))
        if mode != "alone":
            for k, s in searchers.items():
                s.add_related([row for row in rows if row["problem_key"] in among[k]])
    named = final_picks(lands, told)
    return {k: KeyRun(reached[k], named[k]) for k in keys}


def final_picks(lands: dict, told: dict[str, list]) -> dict[str, float]:
    """Problem key -> the best recorded value, over the key's best, among the configs the final re-measure times for
    its search (remeasure.final_candidates: ranked by the values told, as the rungs rank them). A sibling's winner
    that failed on this key's table, or that the table did not record (a table with fewer configs for some keys),
    cannot be named: the re-measure would fail it, or the replay cannot time it."""
    searches = [SimpleNamespace(key=k, accel="replay", problem=_fields(k)) for k in lands]
    ranked = {k: sorted(({**cfg, "tflops": v} for cfg, v in told[k] if v is not None), key=lambda r: -r["tflops"])
              for k in lands}  # fmt: skip
    measured = {k: {config_key(cfg) for cfg, _ in told[k]} for k in lands}
    out = {}
    for s in searches:
        land = lands[s.key]
        picks = final_candidates(s, searches, ranked, measured, _TUNE.top_k, _TUNE.family_k)
        values = (land.values.get(land.space.key(r), math.nan) for _, r in picks)  # key() skips "tflops"
        out[s.key] = max((v for v in values if math.isfinite(v)), default=0.0) / land.best
    return out


def _fields(key: str) -> dict:
    return dataclasses.asdict(Problem.from_key(key))


def _lockstep(args):
    return args, lockstep(*args)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--landscape", type=Path, required=True, help="A recorded table of several problem keys.")
    add_replay_args(ap, budget=30, seed_start=False, screen=True)
    ap.add_argument("--mode", action="append", choices=MODES, help="Only these columns (repeatable).")
    a = ap.parse_args(argv)
    if not a.landscape.is_file():
        ap.error(f"--landscape {a.landscape}: no such file")
    check_replay_args(ap, a)
    if a.screen:  # a table the sweep's screen cannot read is refused here, not in a worker after the pool starts
        df = read_table(a.landscape)
        try:
            for k in df["problem_key"].astype(str).unique():
                sweep_screen(load_landscape(df[df["problem_key"].astype(str) == k]))
        except ValueError as e:
            ap.error(f"--screen: {e}")
    modes = a.mode or list(MODES)
    jobs = [(a.landscape, m, seed, a.budget, a.noise, a.screen) for m in modes for seed in range(a.seeds)]
    with ProcessPoolExecutor(a.jobs) as pool:
        results = dict(pool.map(_lockstep, jobs))
    runs = {m: [results[(a.landscape, m, s, a.budget, a.noise, a.screen)] for s in range(a.seeds)] for m in modes}
    text = evaluations_table(runs, a.budget) + "\n\n" + named_table(runs)
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(header(a) + text + "\n")
    return 0


def evaluations_table(runs: dict[str, list[dict[str, KeyRun]]], budget: int) -> str:
    """Per key and mode: median / worst evaluations to 98% of the best, and the seeds within 2% by the budget."""
    modes = list(runs)
    keys, seeds = list(runs[modes[0]][0]), len(runs[modes[0]])
    lines = ["| problem | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
    per_mode = {m: [] for m in modes}
    for k in keys:
        for m in modes:
            ev = [run[k].evals for run in runs[m]]
            per_mode[m].append((float(np.median(ev)), max(ev), sum(e <= budget for e in ev)))
        lines.append(f"| {k} | " + " | ".join(runs_cell(per_mode[m][-1], seeds) for m in modes) + " |")
    lines.append(f"| geometric mean, every seed within 2% on (of {len(keys)}) | "
                 + " | ".join(summary_cell(per_mode[m], seeds) for m in modes) + " |")  # fmt: skip
    return "\n".join(lines)


def named_table(runs: dict[str, list[dict[str, KeyRun]]]) -> str:
    """Per key and mode: the seeds whose final re-measure names a config within 2% of the best, and the worst named
    (fraction of the best)."""
    modes = list(runs)
    keys, seeds = list(runs[modes[0]][0]), len(runs[modes[0]])
    lines = ["| named by the final re-measure | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
    totals = dict.fromkeys(modes, 0)
    for k in keys:
        cells = []
        for m in modes:
            named = [run[k].named for run in runs[m]]
            within = sum(v >= 0.98 for v in named)
            totals[m] += within
            cells.append(f"{within}/{seeds}, worst {_floor3(min(named)):.3f}")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines.append(f"| runs within 2% (of {len(keys) * seeds}) | " + " | ".join(str(totals[m]) for m in modes) + " |")
    return "\n".join(lines)


def _floor3(v: float) -> float:
    """Rounded down to 3 decimals: a pick just short of 98% does not print as 0.980."""
    return math.floor(v * 1000) / 1000


def header(a: argparse.Namespace) -> str:
    """What the table is and the command that measures it (the options that change a figure)."""
    cmd = (f"python -m benchmarks.sibling_replay --landscape {a.landscape} --seeds {a.seeds} --budget {a.budget}"
           + (f" --noise {a.noise:g}" if a.noise else "") + (" --screen" if a.screen else "")
           + "".join(f" --mode '{m}'" for m in a.mode or []))
    return (f"Lockstep replays of every problem of a recorded table, the GP without priors (deterministic, no GPU), "
            f"measured by `{cmd}`: median / worst evaluations to 98% of each problem's best (budget + 1 = not "
            f"reached), in brackets the seeds within 2% by the budget; then the seeds whose final re-measure (its own "
            f"top {_TUNE.top_k} and the winners of its {_TUNE.family_k} nearest siblings of the same "
            f"kernel, tune's defaults) names a config within 2% of the best, and the worst it names.\n\n")


if __name__ == "__main__":
    raise SystemExit(main())
