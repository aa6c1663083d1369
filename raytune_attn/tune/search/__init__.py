"""Search: declarative spaces, searchers (GP, random, grid) and replay.

`make_searcher(name, space, ...)` builds any searcher by name; all are `ray.tune.search.Searcher`s. The searchers
load on first use: reading and checking a space file (space.py) needs neither Ray nor scikit-optimize, so a sweep
refuses a bad --space before it pays for importing them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from raytune_attn.tune.search.space import SearchSpace, SpaceError, load_space

if TYPE_CHECKING:
    from raytune_attn.problem import Problem
    from raytune_attn.tune.search.base import DiscreteSearcher

_SEARCHERS = {"gp": ("raytune_attn.tune.search.gp", "GPSearcher"),
              "random": ("raytune_attn.tune.search.baselines", "RandomSearcher"),
              "grid": ("raytune_attn.tune.search.baselines", "GridSearcher"),
              "tpe": ("raytune_attn.tune.search.baselines", "TPESearcher")}  # needs optuna (the tpe extra)
SEARCHERS = tuple(_SEARCHERS)  # the names make_searcher takes


def searcher_class(name: str) -> type[DiscreteSearcher]:
    """The searcher class of `name` ("gp", "random", "grid" or "tpe"), imported now."""
    import importlib

    if name not in _SEARCHERS:
        raise ValueError(f"unknown searcher {name!r}; choose from {', '.join(_SEARCHERS)}")
    module, cls = _SEARCHERS[name]
    return getattr(importlib.import_module(module), cls)


def make_searcher(
    name: str,
    space: SearchSpace,
    *,
    metric: str = "tflops",
    mode: str = "max",
    seed: int = 0,
    prefilter: Any = None,
    problem: Problem | Mapping[str, Any] | None = None,
    **options: Any,
) -> DiscreteSearcher:
    """A searcher by name ("gp", "random", "grid" or "tpe") for `problem` (a Problem, a mapping of some of its
    fields, or None: the GP's priors read it, the baselines ignore it); `prefilter` (e.g.
    `raytune_attn.validation.Screen`) drops candidates that cannot run; `options` go to its constructor (for gp:
    n_initial, warm_start, priors, cost_aware; for tpe: n_startup)."""
    return searcher_class(name)(space, metric=metric, mode=mode, seed=seed, prefilter=prefilter, problem=problem,
                                **options)


__all__ = ["SEARCHERS", "SearchSpace", "SpaceError", "load_space", "make_searcher", "searcher_class"]
