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

    def end_runs(self, run_ids: list[str], status: str, reason: str) -> list[str]:
        return self.tracker.end_runs(run_ids, status, reason)

    def drain(self) -> list[str]:
        """Answered after every call sent before it: the warnings so far."""
        return list(self.warnings)

    def _warn(self, msg: str) -> None:
        self.warnings.append(msg)  # the driver logs them (drain): this actor's output does not reach it
        log.warning("%s", msg)


class RemoteTracker:
    """The driver's side: starts the actor, sends it calls without waiting, and `drain()`s at the end. Each call it
    waits for has a timeout (`CALL_TIMEOUT_S`), and the actor's MLflow HTTP requests have theirs
    (tracking_uri.http_env, passed in its environment)."""

    CALL_TIMEOUT_S = 180.0  # opening the store (a new SQLite schema: seconds) and the searches' parent runs

    def __init__(self, experiment: str, tracking_uri: str | None):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from raytune_attn.tune.tracking_uri import http_env

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        cls = ray.remote(num_cpus=0, max_restarts=0)(TrackingHost)
        self.actor = cls.options(scheduling_strategy=here, runtime_env={"env_vars": http_env()},
                                 ).remote(experiment, tracking_uri)
        self.tracking_uri = tracking_uri
        self.keys: set[str] = set()
        self.runs: dict[str, str] = {}  # search key -> its parent run id

    def start_searches(self, searches: dict[str, tuple]) -> dict[str, str]:
        """Each search's parent run ({key: (accel, problem dict, provenance, settings)}), created before the sweep
        starts: a tracking store that refuses (a bad URI, a plain file store) stops it here with MLflow's reason.
        Returns {key: parent run id}."""
        refs = [self.actor.start_search.remote(k, *args) for k, args in searches.items()]
        self.keys |= set(searches)
        runs = dict(zip(searches, self._wait(refs, "could not start"), strict=True))
        self.runs.update(runs)
        return runs

    def end_runs(self, run_ids: list[str], status: str = "KILLED", reason: str = "") -> list[str]:
        """End the given runs still RUNNING (and their running children) as `status`; returns those ended."""
        return self._wait([self.actor.end_runs.remote(list(run_ids), status, reason)], "could not end runs")[0]

    def _wait(self, refs: list, what: str) -> list:
        try:
            return ray.get(refs, timeout=self.CALL_TIMEOUT_S)
        except (ray.exceptions.RayError, TimeoutError) as e:
            raise ValueError(f"MLflow tracking at {self.tracking_uri} {what}: {_cause(e)} (another "
                             "--tracking-uri, or --no-mlflow)") from None

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
    from raytune_attn.tune.tracking_uri import error_words

    cause = getattr(e, "cause", None)
    if isinstance(e, TimeoutError):
        return f"no answer within {RemoteTracker.CALL_TIMEOUT_S:g} s"
    return error_words(cause if cause is not None else e)
