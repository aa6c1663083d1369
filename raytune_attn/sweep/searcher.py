"""One Tune experiment for the whole sweep, one search per (accelerator type, problem) inside it.

`SweepSearcher` owns one `make_searcher(...)` searcher per search and interleaves their suggestions, so the GPUs
of every accelerator type stay busy with all problems' trials at once. A trial's config is
`{"search": key, "accel": X, "problem": {...}, "config": {knobs}, "sweep": {...}}`; results go back to the search
that suggested it. `PerSearchScheduler` keeps one ASHA scheduler per search, so early stopping only ever compares
a config with configs of the same problem on the same accelerator type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ray.tune.schedulers import AsyncHyperBandScheduler, FIFOScheduler, TrialScheduler
from ray.tune.search import Searcher

from raytune_attn.search.base import StatefulSearcher


def search_key(accel: str, problem_key: str) -> str:
    return f"{accel}/{problem_key}"


@dataclass
class Search:
    key: str
    accel: str
    problem: dict
    searcher: Searcher
    budget: int
    max_concurrent: int
    suggested: int = 0
    completed: int = 0
    live: set = field(default_factory=set)
    finished: bool = False  # the inner searcher ran out of candidates


class SweepSearcher(StatefulSearcher):
    def __init__(self, searches: list[Search], sweep_spec: dict, metric: str = "tflops", mode: str = "max"):
        super().__init__(metric=metric, mode=mode)
        self.searches = {s.key: s for s in searches}
        self.order = [s.key for s in searches]
        self.sweep_spec = dict(sweep_spec)
        self.trial_search: dict[str, str] = {}
        self._rr = 0

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True

    @property
    def total_budget(self) -> int:
        return sum(s.budget for s in self.searches.values())

    def _open(self, s: Search) -> bool:
        return not s.finished and s.suggested < s.budget and len(s.live) < s.max_concurrent

    def suggest(self, trial_id: str):
        if all(s.finished or s.suggested >= s.budget for s in self.searches.values()):
            return Searcher.FINISHED
        # Searches of one accelerator type share its GPUs: hand out in turn, one suggestion at a time, so that
        # each search keeps at most its own share of trials in flight (a search's concurrency is its GPUs' share).
        n = len(self.order)
        for k in range(n):
            s = self.searches[self.order[(self._rr + k) % n]]
            if not self._open(s):
                continue
            cfg = s.searcher.suggest(trial_id)
            if cfg is None:
                continue
            if cfg == Searcher.FINISHED:
                s.finished = True
                continue
            self._rr = (self._rr + k + 1) % n
            s.suggested += 1
            s.live.add(trial_id)
            self.trial_search[trial_id] = s.key
            return {"search": s.key, "accel": s.accel, "problem": dict(s.problem), "config": dict(cfg),
                    "sweep": dict(self.sweep_spec)}
        if all(s.finished or s.suggested >= s.budget for s in self.searches.values()):
            return Searcher.FINISHED
        return None

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        pass

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        key = self.trial_search.get(trial_id)
        if key is None and result and isinstance(result.get("config"), dict):
            key = result["config"].get("search")
        s = self.searches.get(key)
        if s is None:
            return
        if trial_id in s.live:
            s.live.discard(trial_id)
            s.completed += 1
        inner = dict(result or {})
        if isinstance(inner.get("config"), dict) and "config" in inner["config"]:
            inner["config"] = inner["config"]["config"]
        s.searcher.on_trial_complete(trial_id, inner, error=error)

    # ---- state (Tune saves it with the experiment; Tuner.restore brings it back) ---------------------------------
    def get_state(self) -> dict:
        return {
            "searches": {k: {"state": s.searcher.get_state(), "suggested": s.suggested, "completed": s.completed,
                             "live": sorted(s.live), "finished": s.finished} for k, s in self.searches.items()},
            "trial_search": dict(self.trial_search),
            "rr": self._rr,
        }

    def set_state(self, state: dict) -> None:
        for k, st in state["searches"].items():
            s = self.searches.get(k)
            if s is None:
                continue
            s.searcher.set_state(st["state"])
            s.suggested, s.completed, s.finished = st["suggested"], st["completed"], st["finished"]
            s.live = set(st["live"])
        self.trial_search = dict(state["trial_search"])
        self._rr = state["rr"]


class PerSearchScheduler(FIFOScheduler):
    """ASHA per search (time_attr "rung"); FIFO order for starting trials."""

    def __init__(self, max_t: int, grace_period: int = 1, reduction_factor: float = 2, metric: str = "tflops",
                 mode: str = "max"):
        super().__init__()
        self._metric, self._mode = metric, mode
        self.opts = dict(time_attr="rung", metric=metric, mode=mode, max_t=max_t, grace_period=grace_period,
                         reduction_factor=reduction_factor)
        self.asha: dict[str, AsyncHyperBandScheduler] = {}

    def set_search_properties(self, metric, mode, **spec) -> bool:
        return True

    def _for(self, trial) -> AsyncHyperBandScheduler:
        key = trial.config.get("search", "")
        if key not in self.asha:
            self.asha[key] = AsyncHyperBandScheduler(**self.opts)
        return self.asha[key]

    def on_trial_add(self, tune_controller, trial):
        self._for(trial).on_trial_add(tune_controller, trial)

    def on_trial_result(self, tune_controller, trial, result):
        if result.get("status", "ok") != "ok":
            return TrialScheduler.CONTINUE  # a failed config ends by itself; keep it out of the rung statistics
        return self._for(trial).on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller, trial, result):
        if (result or {}).get("status", "ok") != "ok":
            self._for(trial).on_trial_remove(tune_controller, trial)  # failures are not rung statistics
        else:
            self._for(trial).on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller, trial):
        self._for(trial).on_trial_remove(tune_controller, trial)

    def on_trial_error(self, tune_controller, trial):
        self._for(trial).on_trial_error(tune_controller, trial)

    def debug_string(self) -> str:
        return f"ASHA per search over rungs ({len(self.asha)} searches)"
