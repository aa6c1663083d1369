"""Why a run misses the best: what the GP without priors believed of the landscape's best config at each of its picks.

Bar (b) of issue #36 counts a run as a miss when it is not within 2% of the landscape's best after 50 evaluations. This
replays the GP without priors (the kept code, seeded as in every replay) on each landscape and seed, and at each
model-based pick of a run that misses reads the model's view of the best config (the config the table records best):

- whether the best was among the pick's candidates (the local steps' neighbourhood, or every feasible free config on a
  global step), and its rank there by the pick's own acquisition (1 = picked);
- the model's mean for it over the best config measured so far, as a fraction (exp of the difference of log TFLOP/s),
  beside the truth (the table's best over that measured config's value);
- z = (mean - best measured score) / sd in log units: how sure the model was that the step loses;
- the root mean square of the model's leave-one-out z-scores on the measured configs (closed form,
  `search_variants.loo_z`): about 1 when the model errs on its own points by as much as its sd says;
- the root mean square of the true z-scores, (log recorded TFLOP/s - mean) / sd, of the pick's candidates that ran
  (the truth clipped at a tenth of the best measured, as the GP clips the scores it is fitted on): how far the model's
  sd holds where it ranks, on the configs it has not measured.

A model that is unsure of the best (z near 0) but never ranks it first is under-exploring; a model sure it loses (z of
-3 or less) while calibrated on its own points (leave-one-out RMS about 1) and on the candidates it ranks (true RMS
about 1) is wrong in one place only, where the data it has do not show the interaction that makes the best.

    python -m benchmarks.miss_trace --screen --seeds 10 --budget 50 --jobs 2 \
        --landscape tests/data/heldout/h100_fp16_d128_causal.parquet --out docs/benchmarks/search/miss_trace

`--landscape FILE` or FILE::KEY (repeatable; FILE alone: its first problem key). `--out DIR` writes `picks.csv` (one
row per model-based pick of a missing run) and `README.md` (the table printed, and the command).
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.replay_args import add_replay_args, check_replay_args
from benchmarks.search_table import landscapes, load_cell
from benchmarks.search_variants import loo_z
from raytune_attn.tune.search.gp import _FLOOR_RATIO, GPSearcher
from raytune_attn.tune.search.landscape import Landscape
from raytune_attn.tune.search.replay import run_seeds

BAR = 0.98  # within 2% of the best


class TracedGP(GPSearcher):
    """The GP without priors, unchanged, that records at each model-based pick what it believed of config `target`
    (a key of the space) in `self.views`: evaluations told, where, rank, predicted fraction, z, the leave-one-out RMS
    and, `truth` giving every config's recorded value, the RMS of the pick's candidates' true z-scores."""

    def __init__(self, space, *, target: tuple, truth: Mapping[tuple, float], **kw):
        super().__init__(space, **kw)
        self._target = self._index.get(tuple(target))
        self._row = {row.tobytes(): i for i, row in enumerate(self._F)}  # a candidate by its GP inputs
        self._true = np.array([math.log(v) if v > 0 else math.nan for v in
                               (truth.get(self.space.key(c), math.nan) for c in self.candidates)])  # fmt: skip
        self.views: list[dict] = []

    def _local_acquisition(self, gp, Xl):
        a = super()._local_acquisition(gp, Xl)
        self._view(gp, Xl, a, "local")
        return a

    def _global_acquisition(self, gp, Xa, y, available):
        a = super()._global_acquisition(gp, Xa, y, available)
        self._view(gp, Xa, a, "global")
        return a

    def _view(self, gp, X, a, where: str) -> None:
        if self._target is None or self._target in self._scores:
            return
        x = self._F[self._target]
        hit = np.flatnonzero((X == x).all(axis=1))
        mu, sd = (float(v[0]) for v in gp.predict(x[None], return_std=True))
        best = max(s for s in self._scores.values() if s is not None)
        z = loo_z(gp)[: sum(s is not None for s in self._scores.values())]
        pool_mu, pool_sd = gp.predict(X, return_std=True)
        true = np.maximum(self._true[[self._row[row.tobytes()] for row in X]], best + math.log(_FLOOR_RATIO))
        true_z = (true - pool_mu) / np.maximum(pool_sd, 1e-12)  # the truth clipped where the GP clips its scores
        true_z = true_z[np.isfinite(true_z)]  # failed configs have no value
        self.views.append({
            "told": len(self._obs), "where": where if len(hit) else "not a candidate",
            "rank": int((a > a[hit[0]]).sum()) + 1 if len(hit) else None, "candidates": len(X),
            "predicted": math.exp(mu - best), "z": (mu - best) / max(sd, 1e-12),
            "loo_rms": float(np.sqrt(np.mean(z**2))) if len(z) else math.nan,
            "true_rms": float(np.sqrt(np.mean(true_z**2))) if len(true_z) else math.nan,
        })  # fmt: skip


def best_config(land: Landscape) -> tuple:
    """The key of the config the landscape records best (the one whose value is `land.best`)."""
    return max((k for k, v in land.values.items() if np.isfinite(v)), key=land.values.get)


def trace(path: Path, key: str | None, *, seeds: int, seed_start: int, budget: int, screen: bool) -> list[dict]:
    """One row per model-based pick of each seed's run that misses 2% of the best after `budget` evaluations."""
    land = load_cell(path, key)
    target = best_config(land)
    searchers: list[TracedGP] = []  # one per seed, in the order run_seeds builds them

    def make(space, **kw):
        searchers.append(TracedGP(space, target=target, truth=land.values, **kw))
        return searchers[-1]

    runs = run_seeds(land, "gp", budget=budget, seeds=seeds, seed_start=seed_start, options={"priors": False},
                     cls=make, screen=screen)  # fmt: skip
    rows = []
    for seed, run, searcher in zip(range(seed_start, seed_start + seeds), runs, searchers, strict=True):
        if run.evals_to(BAR * land.best, budget) <= budget:
            continue
        for view in searcher.views:  # truth: the best over the best measured when the pick was made
            rows.append({"landscape": path.stem, "problem_key": key or "", "seed": seed,
                         "truth": land.best / run.trace[view["told"] - 1], **view})  # fmt: skip
    return rows


def _trace(job):
    path, key, kw = job
    return trace(path, key, **kw)


def summary(picks: pd.DataFrame, seeds: int) -> str:
    """Per landscape: the missing runs and their model-based picks; for the local and the global steps, the picks with
    the best among the candidates and its median rank there; medians over those picks of the best's true and
    predicted fraction of the best measured so far and of z; the median leave-one-out and true RMS over every pick."""
    lines = ["| landscape | runs missing | model-based picks | best a local candidate: picks, median rank | a global "
             "candidate: picks, median rank | best / best measured: true, predicted | z | RMS: leave-one-out, "
             "candidates' true z |",
             "|---|---|---|---|---|---|---|---|"]
    for (land, key), g in picks.groupby(["landscape", "problem_key"], sort=False):
        cells = []
        for where in ("local", "global"):
            c = g[g["where"] == where]
            cells.append(f"{len(c)}, {c['rank'].median():.0f} of {c.candidates.median():.0f}" if len(c) else "0")
        cand = g[g["where"] != "not a candidate"]
        lines.append(f"| {land} {key} | {g.seed.nunique()} of {seeds} | {len(g)} | {cells[0]} | {cells[1]} | "
                     f"{cand.truth.median():.3f}, {cand.predicted.median():.3f} | {cand.z.median():.1f} | "
                     f"{g.loo_rms.median():.2f}, {g.true_rms.median():.2f} |")  # fmt: skip
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_replay_args(ap, budget=50, noise=False, screen=True, out_help="Write picks.csv and README.md here.")
    ap.add_argument("--landscape", action="append", required=True,
                    help="A recorded table, FILE (its first problem key) or FILE::KEY (repeatable).")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    check_replay_args(ap, a)
    cells = landscapes(a.landscape, 1)  # a missing file or key fails here, before any replay
    kw = {"seeds": a.seeds, "seed_start": a.seed_start, "budget": a.budget, "screen": a.screen}
    with ProcessPoolExecutor(a.jobs) as pool:
        rows = [r for part in pool.map(_trace, [(p, k, kw) for p, k in cells]) for r in part]
    picks = pd.DataFrame(rows, columns=["landscape", "problem_key", "seed", "truth", "told", "where", "rank",
                                        "candidates", "predicted", "z", "loo_rms", "true_rms"])  # fmt: skip
    text = summary(picks, a.seeds) if len(picks) else "No run misses 2% of the best."
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        picks.to_csv(a.out / "picks.csv", index=False)
        cmd = shlex.join(["python", "-m", "benchmarks.miss_trace", *(sys.argv[1:] if argv is None else argv)])
        (a.out / "README.md").write_text(
            f"# What the GP believed of the best config in the runs that miss it\n\nSeeds {a.seed_start}-"
            f"{a.seed_start + a.seeds - 1}, budget {a.budget}{', screened' if a.screen else ''}. Measured by:\n\n"
            f"    {cmd}\n\n{text}\n\nColumns: `benchmarks/miss_trace.py`'s docstring; every pick in `picks.csv`.\n"
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
