"""The sweep's MLflow logging in its own process: a `TrackingHost` Ray actor on the driver's node that owns the
`tracking.SweepTracker` and each search's parent run.

Why a process and not a thread of the driver: a child run is SQLAlchemy and sqlite work in Python (profiled on
an H200 x2 sweep: 0.13 s a trial under cProfile), so at 15 trials a second a logging thread never idles,
and it holds the driver's GIL against Tune's loop, which hands every rung's result back to its trial. In its own
process it costs the loop one actor call per trial. The actor runs on the driver's node because an embedded
`sqlite:///` store is a file there; calls from the driver reach it in order, so `drain()` (one call answered after
all earlier ones) waits for every child run.
"""

from __future__ import annotations

import logging
from typing import Any

import ray

log = logging.getLogger(__name__)


class TrackingHost:
    """Holds a SweepTracker; the driver names a search's parent run by its search key."""

    def __init__(self, experiment: str, tracking_uri: str | None):
        from raytune_attn.tune.tracking import SweepTracker  # the one module that imports mlflow

        self.tracker = SweepTracker(experiment, tracking_uri=tracking_uri)
        self.handles: dict[str, Any] = {}
        self.warnings: list[str] = []

    def start_search(self, key: str, accel: str, problem: dict, provenance: dict, settings: dict) -> str:
        from raytune_attn.problem import Problem

        h = self.tracker.start_search(accel, Problem.from_dict(problem), provenance, settings)
        self.handles[key] = h
        return h.run_id

    def log_trial(self, key: str, row: dict, rung_metrics: list | None) -> None:
        try:
            self.tracker.log_trial(self.handles[key], row, rung_metrics=rung_metrics)
        except Exception as e:  # noqa: BLE001 - tracking trouble must not stop the sweep
            self._warn(f"MLflow logging failed for {key}: {e}")

    def finish_search(self, key: str, best: dict | None, baselines: dict, trials_df, artifact_path: str) -> None:
        try:
            self.tracker.finish_search(self.handles[key], best, baselines, trials_df, artifact_path)
        except Exception as e:  # noqa: BLE001 - tracking trouble must not lose the sweep's files
            self._warn(f"MLflow finish failed for {key}: {e}")

    def drain(self) -> list[str]:
        """Answered after every call sent before it: the warnings so far."""
        return list(self.warnings)

    def _warn(self, msg: str) -> None:
        self.warnings.append(msg)  # the driver logs them (drain): this actor's output does not reach it
        log.warning("%s", msg)


class RemoteTracker:
    """The driver's side: starts the actor, sends it calls without waiting, and `drain()`s at the end."""

    def __init__(self, experiment: str, tracking_uri: str | None):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        cls = ray.remote(num_cpus=0, max_restarts=0)(TrackingHost)
        self.actor = cls.options(scheduling_strategy=here).remote(experiment, tracking_uri)
        self.tracking_uri = tracking_uri
        self.keys: set[str] = set()

    def start_searches(self, searches: dict[str, tuple]) -> None:
        """Each search's parent run ({key: (accel, problem dict, provenance, settings)}), created before the sweep
        starts: a tracking store that refuses (a bad URI, a plain file store) stops it here with MLflow's reason."""
        refs = [self.actor.start_search.remote(k, *args) for k, args in searches.items()]
        try:
            ray.get(refs)
        except ray.exceptions.RayError as e:
            raise ValueError(f"MLflow tracking at {self.tracking_uri} could not start: {_cause(e)} (another "
                             "--tracking-uri, or --no-mlflow)") from None
        self.keys |= set(searches)

    def log_trial(self, key: str, row: dict, rung_metrics: list | None = None) -> None:
        if key in self.keys:
            self.actor.log_trial.remote(key, row, rung_metrics)

    def finish_search(self, key: str, best: dict | None, baselines: dict, trials_df, artifact_path) -> None:
        if key in self.keys:
            self.actor.finish_search.remote(key, best, baselines, trials_df, str(artifact_path))

    def drain(self, timeout_s: float = 600.0) -> list[str]:
        """Wait until every call sent so far is done; returns the actor's warnings (or why it did not answer)."""
        try:
            return ray.get(self.actor.drain.remote(), timeout=timeout_s)
        except (ray.exceptions.RayError, TimeoutError) as e:
            return [f"MLflow logging did not finish: {_cause(e)}"]


def _cause(e: Exception) -> str:
    cause = getattr(e, "cause", None)
    return str(cause if cause is not None else e).strip().splitlines()[-1][:1000]
