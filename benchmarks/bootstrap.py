"""How sure a ratio of two searchers' bar (a) figures is: a percentile bootstrap (Efron & Tibshirani 1993, ch. 13)
over the runs' independent units (a replay's seeds, a live sweep).

Bar (a)'s figure is, per problem, the median over the units of the evaluations to 98% of the best, then its
geometric mean over the problems; with 10 seeds or sweeps a searcher's median moves by a few evaluations from one
draw of seeds to the next, and the ratio with it. Two searchers measured apart (the GP's seeds and TPE's, live sweeps)
have their units drawn each on their own (`ratio_interval`); two variants of one searcher replayed on the same seeds,
which share their first configs, have the same seeds drawn for both (`paired_ratio_interval`), a tighter interval."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from benchmarks.replay_table import geomean

_RESAMPLES = 2000


def figure(runs: pd.DataFrame, *, problem: Sequence[str], value: str) -> float:
    """Bar (a)'s figure of `runs`: per `problem`, the median of `value` over its runs; their geometric mean."""
    return geomean(runs.groupby(list(problem))[value].median())


def ratio_interval(a: pd.DataFrame, b: pd.DataFrame, *, problem: Sequence[str], unit: str, value: str,
                   level: float = 0.95, resamples: int = _RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """The `level` percentile interval of the ratio of a's bar (a) figure (per `problem`, the median over `unit` of
    `value`; their geometric mean) to b's, when a's units and b's are each drawn again with replacement, as many as
    each has. Refuses a side with fewer than 2 units, a unit without a run of every problem (its draws would drop
    problems), two values of one unit and problem, or a value that is not positive."""
    _check_level(level)
    rng = np.random.default_rng(seed)
    logs = []
    for runs in (a, b):
        grid = _grid(runs, problem=problem, unit=unit, value=value)
        logs.append(_log_figures(grid, rng.integers(0, grid.shape[1], size=(resamples, grid.shape[1]))))
    return _interval(logs[0] - logs[1], level)


def paired_ratio_interval(a: pd.DataFrame, b: pd.DataFrame, *, problem: Sequence[str], unit: str, value: str,
                          level: float = 0.95, resamples: int = _RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """As `ratio_interval` for runs of the same units and problems on both sides (a variant and its base on the same
    seeds): each draw takes the same units for a and b. Refuses sides that differ in their units or problems."""
    _check_level(level)
    ga, gb = (_grid(runs, problem=problem, unit=unit, value=value) for runs in (a, b))
    if not (ga.index.equals(gb.index) and ga.columns.equals(gb.columns)):
        raise ValueError(f"a paired interval needs the same {unit}s and problems on both sides")
    picks = np.random.default_rng(seed).integers(0, ga.shape[1], size=(resamples, ga.shape[1]))
    return _interval(_log_figures(ga, picks) - _log_figures(gb, picks), level)


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level is a fraction in (0, 1), got {level}")


def _interval(log_ratios: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.percentile(log_ratios, [50 * (1 - level), 50 * (1 + level)])
    return float(np.exp(lo)), float(np.exp(hi))


def _grid(runs: pd.DataFrame, *, problem: Sequence[str], unit: str, value: str) -> pd.DataFrame:
    """`value` as a problems x units table, sorted both ways; ValueError for what `ratio_interval` refuses."""
    if (runs[value] <= 0).any() or runs[value].isna().any():
        raise ValueError(f"{value} must be positive in every run")
    if runs.duplicated([*problem, unit]).any():
        raise ValueError(f"a {unit} has two runs of one problem: one value per {unit} and problem")
    grid = runs.pivot(index=list(problem), columns=unit, values=value).sort_index().sort_index(axis=1)
    if grid.shape[1] < 2:
        raise ValueError(f"a bootstrap over {unit} needs at least 2 of them, got {grid.shape[1]}")
    if grid.isna().any().any():
        *where, which = next(i for i, gap in grid.isna().stack().items() if gap)
        raise ValueError(f"{unit} {which} has no run of {' '.join(map(str, where))}: every {unit} must run every "
                         "problem")
    return grid


def _log_figures(grid: pd.DataFrame, picks: np.ndarray) -> np.ndarray:
    """The log of `figure` for each row of `picks` (the units drawn, as column positions), on arrays."""
    medians = np.median(grid.to_numpy(float)[:, picks], axis=2)  # problems x resamples
    return np.log(medians).mean(axis=0)
