"""The cells the replay benchmarks' markdown tables share (search_table, search_variants, warm_variants,
sibling_replay): one landscape's runs as "median / worst (seeds within 2%/seeds)", and a column's summary row as the
geometric mean of its medians and the landscapes where every seed got within 2%."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def runs_cell(res: Sequence, seeds: int) -> str:
    """`res` = (median, worst evaluations to 98% of the best, seeds within 2% by the budget) of `seeds` runs."""
    return f"{res[0]:g} / {res[1]} ({res[2]}/{seeds})"


def geomean(values: Sequence[float]) -> float:
    return math.exp(np.mean([math.log(v) for v in values]))


def summary_cell(results: Sequence[Sequence], seeds: int, digits: int = 1) -> str:
    """A column's `results` (each as in `runs_cell`): the geometric mean of the medians, then how many have every
    seed within 2%."""
    return f"{geomean([r[0] for r in results]):.{digits}f}, {sum(r[2] == seeds for r in results)}"
