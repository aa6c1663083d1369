"""The GP's initial design: the priors' start, its neighbours and the priors' moves, then a Latin hypercube.

The start is what a user runs without tuning, so the search must beat it anyway; measuring it first also starts
the local steps from a config that is good everywhere instead of from a random corner. Its adjacent one-knob
neighbours (each knob one value up or down) are a one-factor-at-a-time screening: they measure every knob's local
effect, so the first model-based picks combine the moves that helped instead of guessing from a few random points.
Then each coupled pair's two-knob steps that keep its `keep` quantity nearest the start's (one-knob screening misses
them when both single steps are worse than the start), then the space file's moves in their order. Latin-hypercube
points in the encoded inputs, each snapped to the nearest free candidate, make up `n_initial` configs when that is
more. All seeded: the same seed gives the same design.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from raytune_attn.tune.search.priors import Priors, apply_move, start_config
from raytune_attn.tune.search.space import SearchSpace

MAXIMIN_TRIES = 30  # random Latin hypercubes the design without priors picks the most spread-out of


def pair_step(step: np.ndarray, a: int, b: int) -> np.ndarray:
    """Rows of `step` (value-index differences, one column per knob) that move knobs a and b one value each and
    no other knob: a coupled step."""
    return ((step != 0).sum(axis=1) == 2) & (np.abs(step[:, a]) == 1) & (np.abs(step[:, b]) == 1)


class Design:
    """The design over a searcher's candidates: `cat` holds each candidate's value indices (one column per knob),
    `X` its encoded inputs and `encode` encodes configs the same way."""

    def __init__(self, space: SearchSpace, candidates: Sequence[Mapping[str, Any]], index: Mapping[tuple, int],
                 cat: np.ndarray, X: np.ndarray, encode: Callable[[list], np.ndarray]):
        self.space, self.candidates, self.index = space, candidates, index
        self.cat, self.X, self.encode = cat, X, encode

    def build(self, priors: Priors | None, problem: Mapping[str, Any], n_initial: int, seed: int) -> list[int]:
        """Candidate indices in the order the search measures them; no priors: a maximin Latin hypercube alone."""
        n = min(n_initial, len(self.candidates))
        rng = np.random.default_rng(seed)
        d = self.X.shape[1]
        if n == 0 or d == 0:
            return list(range(n))
        if priors is None:
            return self._maximin(n, rng)
        chosen: list[int] = []
        i0 = self.start(priors, problem)
        if i0 is not None:
            chosen.append(i0)
            step = self.cat - self.cat[i0]
            adjacent = np.flatnonzero(((step != 0).sum(axis=1) == 1) & (np.abs(step).max(axis=1) == 1))
            chosen += [int(j) for j in rng.permutation(adjacent)]
            chosen += self._coupled(priors, i0, step, rng)
            moved = self._moves(priors, i0, problem)
            chosen += [j for j in moved if j not in chosen]
        return chosen + self._latin_hypercube(chosen, max(n - len(chosen), 0), rng)

    def start(self, priors: Priors, problem: Mapping[str, Any]) -> int | None:
        """The candidate the priors start from; the nearest candidate in the encoded inputs when that config is
        excluded (a constraint, the pre-filter, a table without it) but its values are all the space's."""
        cfg = start_config(priors, self.space.values, problem)
        if cfg is None:
            return None
        i = self.index.get(self.space.key(cfg))
        if i is not None:
            return i
        if not all(cfg[p.name] in p.values for p in self.space.params):
            return None
        return int(np.argmin(((self.X - self.encode([cfg])[0]) ** 2).sum(axis=1)))

    def _coupled(self, priors: Priors, i0: int, step: np.ndarray, rng: np.random.Generator) -> list[int]:
        """Each coupled pair's two-knob steps from the start that keep its `keep` nearest the start's value."""
        names = list(self.space.names)
        out: list[int] = []
        for pair in priors.coupled:
            a, b = pair.knobs
            if a not in names or b not in names:
                continue
            moves = np.flatnonzero(pair_step(step, names.index(a), names.index(b)))
            if not len(moves):
                continue
            f0 = pair.log_keep(self.candidates[i0])
            dev = np.array([abs(pair.log_keep(self.candidates[j]) - f0) for j in moves])
            out += [int(j) for j in rng.permutation(moves[dev <= dev.min() + 1e-9])]
        return out

    def _moves(self, priors: Priors, i0: int, problem: Mapping[str, Any]) -> list[int]:
        """The candidate each move makes of the start (its preferred form where that is a candidate)."""
        out = []
        for move in priors.moves:
            for cfg in apply_move(move, self.candidates[i0], self.space.values, problem):
                j = self.index.get(self.space.key(cfg))
                if j is not None:
                    out.append(j)
                    break
        return out

    def _maximin(self, n: int, rng: np.random.Generator, tries: int = MAXIMIN_TRIES) -> list[int]:
        """The Latin hypercube (snapped to candidates) whose closest two points are farthest apart, of `tries`.

        With few points in 5-10 dimensions a single random Latin hypercube often puts two points next to each
        other after snapping (the candidates are a coarse grid): a wasted evaluation. Maximin spreads them.
        """
        best, best_d = [], -1.0
        for _ in range(tries):
            pts = self._latin_hypercube([], n, rng)
            P = self.X[pts]
            d2 = ((P[:, None, :] - P[None, :, :]) ** 2).sum(axis=2)
            d = float(d2[np.triu_indices(len(pts), 1)].min()) if len(pts) > 1 else 0.0
            if d > best_d:
                best, best_d = pts, d
        return best

    def _latin_hypercube(self, chosen: list[int], n: int, rng: np.random.Generator) -> list[int]:
        free = np.ones(len(self.candidates), dtype=bool)
        free[chosen] = False
        d = self.X.shape[1]
        strata = np.stack([rng.permutation(n) for _ in range(d)], axis=1)
        pts = (strata + rng.random((n, d))) / n
        out = []
        for p in pts:
            j = int(np.argmin(np.where(free, ((self.X - p) ** 2).sum(axis=1), np.inf)))
            out.append(j)
            free[j] = False
        return out
