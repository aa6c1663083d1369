"""Shared bookkeeping of the discrete searchers: a Ray Tune `Searcher` over the feasible configs of a space.

The candidates are every config of the space that passes its constraints and the resource pre-filter, in the
space's order. Every searcher takes the `problem` it tunes (a Problem, a mapping of some of its fields, or
None); the baselines ignore it. Each `suggest` returns a candidate that is neither measured nor in flight (so N
concurrent trials get N distinct configs), or `Searcher.FINISHED` when none is left. Subclasses only choose
which one (`_pick`) and may learn from each outcome (`_observe`).

A trial fails when it errored, returned no result, a result whose `status` is not "ok", or a metric that is
missing, not finite or not positive (0 TFLOP/s is how a failed benchmark reports). A failed config is never
suggested again; the GP also learns it as a bad result.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Mapping
from typing import Any

import numpy as np
from ray.tune.search import Searcher

from raytune_attn.kernels.resources import Prefilter
from raytune_attn.tune.search.priors import problem_fields
from raytune_attn.tune.search.space import SearchSpace


class StatefulSearcher(Searcher):
    """A Searcher whose checkpoint is its `get_state()`, pickled: Tune saves it with the experiment and
    `Tuner.restore` brings it back through `set_state`."""

    def get_state(self) -> dict:
        raise NotImplementedError

    def set_state(self, state: dict) -> None:
        raise NotImplementedError

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.get_state(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.set_state(pickle.load(f))


class DiscreteSearcher(StatefulSearcher):
    name = "discrete"

    def __init__(
        self,
        space: SearchSpace,
        *,
        metric: str = "tflops",
        mode: str = "max",
        seed: int = 0,
        prefilter: Prefilter | None = None,
        problem: Any = None,
        initial: Any = (),
    ):
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        super().__init__(metric=metric, mode=mode)
        self.space, self.seed, self.prefilter = space, int(seed), prefilter
        # The problem's fields, None where unknown (priors.problem_fields): what the priors' conditions read.
        self.problem = problem_fields(problem)
        self.candidates = [c for c in space.configs() if prefilter is None or prefilter.accepts(c)]
        if not self.candidates:
            raise ValueError(f"no config of {space.source} passes its constraints and the resource pre-filter")
        self._index = {space.key(c): i for i, c in enumerate(self.candidates)}
        self._taken = np.zeros(len(self.candidates), dtype=bool)  # measured or in flight
        self._live: dict[str, int] = {}  # trial_id -> candidate index
        self._obs: list[tuple[int, float | None]] = []  # (candidate index, value or None = failed), told order
        # Configs to suggest first, in order (warm.py: the best of earlier results); each a full or partial config,
        # served by the first free candidate that matches it.
        self._initial = [dict(c) for c in initial]

    @classmethod
    def check_dependencies(cls) -> None:
        """Raises ImportError naming what to install when this searcher cannot be built here; a sweep asks before
        Ray starts, so a missing optional dependency is not first met in a search actor."""

    # ---- Ray Tune interface -------------------------------------------------------------------------------------

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec) -> bool:
        if metric:
            self._metric = metric
        if mode:
            self._mode = mode
        return True

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        available = np.flatnonzero(~self._taken)
        if available.size == 0:
            return Searcher.FINISHED
        i = self._next_initial()
        i = int(self._pick(available)) if i is None else i
        assert not self._taken[i], "a searcher picked a measured or in-flight config"
        self._taken[i] = True
        self._live[trial_id] = i
        return dict(self.candidates[i])

    def _next_initial(self) -> int | None:
        """The first free candidate matching the next of the `initial` configs (unmatched ones are dropped)."""
        while self._initial:
            want = self._initial.pop(0)
            for i, c in enumerate(self.candidates):
                if not self._taken[i] and all(c.get(k) == v for k, v in want.items()):
                    return i
        return None

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        i = self._live.pop(trial_id, None)
        if i is None and result and isinstance(result.get("config"), Mapping):
            i = self._index.get(self._key_or_none(result["config"]))
        if i is None:
            return  # not ours (e.g. a trial of an earlier run that was never suggested here)
        if any(j == i for j, _ in self._obs):
            return  # a config is told once
        value = None if error else self.result_value(result)
        self._taken[i] = True
        self._obs.append((i, value))
        self._observe(i, value)

    def config_of(self, trial_id: str) -> dict[str, Any] | None:
        """The config suggested as `trial_id` while it is in flight, else None."""
        i = self._live.get(trial_id)
        return None if i is None else dict(self.candidates[i])

    def cancel(self, trial_id: str) -> None:
        """Forget a suggestion that never ran (a sweep's prefetched suggestion left over at a resume): its config
        is free again and no longer counts as in flight."""
        i = self._live.pop(trial_id, None)
        if i is not None and not any(j == i for j, _ in self._obs):
            self._taken[i] = False

    def result_value(self, result: Mapping | None) -> float | None:
        """The metric of a successful result, or None for a failed one (see the module docstring)."""
        if not result or str(result.get("status", "ok")) != "ok":
            return None
        v = result.get(self.metric)
        try:
            v = float(v)
        except (TypeError, ValueError):
            return None
        return v if math.isfinite(v) and v > 0 else None

    def _key_or_none(self, config: Mapping) -> tuple | None:
        try:
            return self.space.key(config)
        except KeyError:
            return None

    # ---- what subclasses choose ---------------------------------------------------------------------------------
    def _pick(self, available: np.ndarray) -> int:
        raise NotImplementedError

    def _observe(self, i: int, value: float | None) -> None:
        pass

    # ---- state --------------------------------------------------------------------------------------------------
    @property
    def observations(self) -> list[tuple[dict, float | None]]:
        return [(dict(self.candidates[i]), v) for i, v in self._obs]

    def get_state(self) -> dict:
        return {
            "searcher": self.name,
            "seed": self.seed,
            "metric": self.metric,
            "mode": self.mode,
            "obs": [(self.space.key(self.candidates[i]), v) for i, v in self._obs],
            "live": {t: self.space.key(self.candidates[i]) for t, i in self._live.items()},
        }

    def set_state(self, state: dict) -> None:
        if state.get("searcher") != self.name:
            raise ValueError(f"state of a {state.get('searcher')!r} searcher cannot restore a {self.name!r} one")
        self.seed, self._metric, self._mode = state["seed"], state["metric"], state["mode"]
        self._taken[:] = False
        self._obs, self._live = [], {}
        self._reset()
        for key, v in state["obs"]:
            i = self._index[tuple(key)]
            self._taken[i] = True
            self._obs.append((i, v))
            self._observe(i, v)
        for t, key in state["live"].items():
            i = self._index[tuple(key)]
            self._taken[i] = True
            self._live[t] = i

    def _reset(self) -> None:
        """Forget what `_observe` learned (restore replays the observations)."""

