"""How sure a ratio of two searchers' bar (a) figures is: a percentile bootstrap (Efron & Tibshirani 1993, ch. 13)
over the runs' independent units (a replay's seeds, a live sweep), each searcher's units resampled on their own.

Bar (a)'s figure is, per problem, the median over the units of the evaluations to 98% of the best, then its
geometric mean over the problems; with 10 seeds or sweeps a searcher's median moves by a few evaluations from one
draw of seeds to the next, and the ratio with it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

_RESAMPLES = 2000


def ratio_interval(a: pd.DataFrame, b: pd.DataFrame, *, problem: Sequence[str], unit: str, value: str,
                   level: float = 0.95, resamples: int = _RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """The `level` percentile interval of the ratio of a's bar (a) figure (per `problem`, the median over `unit` of
    `value`; their geometric mean) to b's, when a's units and b's are each drawn again with replacement, as many as
    each has. Refuses a side with fewer than 2 units, a unit without a run of every problem (its draws would drop
    problems), two values of one unit and problem, or a value that is not positive."""
    if not 0 < level < 1:
        raise ValueError(f"level is a fraction in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    draws = [_draws(runs, problem=problem, unit=unit, value=value, resamples=resamples, rng=rng) for runs in (a, b)]
    lo, hi = np.percentile(draws[0] - draws[1], [50 * (1 - level), 50 * (1 + level)])
    return float(np.exp(lo)), float(np.exp(hi))


def _draws(runs: pd.DataFrame, *, problem: Sequence[str], unit: str, value: str, resamples: int,
           rng: np.random.Generator) -> np.ndarray:
    """`resamples` draws of the log of the figure, each over units drawn with replacement."""
    if (runs[value] <= 0).any() or runs[value].isna().any():
        raise ValueError(f"{value} must be positive in every run")
    if runs.duplicated([*problem, unit]).any():
        raise ValueError(f"a {unit} has two runs of one problem: one value per {unit} and problem")
    grid = runs.pivot(index=list(problem), columns=unit, values=value)
    if grid.shape[1] < 2:
        raise ValueError(f"a bootstrap over {unit} needs at least 2 of them, got {grid.shape[1]}")
    if grid.isna().any().any():
        *where, which = next(i for i, gap in grid.isna().stack().items() if gap)
        raise ValueError(f"{unit} {which} has no run of {' '.join(map(str, where))}: every {unit} must run every "
                         "problem")
    picks = rng.integers(0, grid.shape[1], size=(resamples, grid.shape[1]))
    medians = np.median(grid.to_numpy(float)[:, picks], axis=2)  # problems x resamples
    return np.log(medians).mean(axis=0)
