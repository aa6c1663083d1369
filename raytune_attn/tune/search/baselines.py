"""Baselines through the same Searcher interface: random search without replacement, and exhaustive grid."""

from __future__ import annotations

import numpy as np

from raytune_attn.tune.search.base import DiscreteSearcher


class RandomSearcher(DiscreteSearcher):
    """Feasible configs in a random order fixed by the seed; each is suggested at most once."""

    name = "random"

    def __init__(self, space, **kw):
        super().__init__(space, **kw)
        self._rank = np.random.default_rng(self.seed).permutation(len(self.candidates))

    def _pick(self, available: np.ndarray) -> int:
        return int(available[np.argmin(self._rank[available])])

    def set_state(self, state: dict) -> None:
        self._rank = np.random.default_rng(state["seed"]).permutation(len(self.candidates))
        super().set_state(state)


class GridSearcher(DiscreteSearcher):
    """Every feasible config once, in the space's order (the product of the parameters' values)."""

    name = "grid"

    def _pick(self, available: np.ndarray) -> int:
        return int(available[0])
