"""Search: declarative spaces, the resource pre-filter, searchers (GP, random, grid) and replay.

`make_searcher(name, space, ...)` builds any searcher by name; all are `ray.tune.search.Searcher`s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raytune_attn.kernels.resources import Prefilter
from raytune_attn.problem import Problem
from raytune_attn.tune.search.base import DiscreteSearcher
from raytune_attn.tune.search.baselines import GridSearcher, RandomSearcher
from raytune_attn.tune.search.gp import GPSearcher
from raytune_attn.tune.search.space import SearchSpace, SpaceError, load_space

SEARCHERS: dict[str, type[DiscreteSearcher]] = {"gp": GPSearcher, "random": RandomSearcher, "grid": GridSearcher}


def make_searcher(
    name: str,
    space: SearchSpace,
    *,
    metric: str = "tflops",
    mode: str = "max",
    seed: int = 0,
    prefilter: Prefilter | None = None,
    problem: Problem | Mapping[str, Any] | None = None,
    **options: Any,
) -> DiscreteSearcher:
    """A searcher by name ("gp", "random" or "grid") for `problem` (a Problem, a mapping of some of its fields, or
    None: the GP's priors read it, the baselines ignore it); `options` go to its constructor (for gp: n_initial,
    warm_start, priors, cost_aware)."""
    if name not in SEARCHERS:
        raise ValueError(f"unknown searcher {name!r}; choose from {', '.join(SEARCHERS)}")
    return SEARCHERS[name](space, metric=metric, mode=mode, seed=seed, prefilter=prefilter, problem=problem,
                           **options)


__all__ = [
    "SEARCHERS", "DiscreteSearcher", "GPSearcher", "GridSearcher", "Prefilter", "RandomSearcher", "SearchSpace",
    "SpaceError", "load_space", "make_searcher",
]  # fmt: skip
