"""MLflow tracking of sweeps: the ONLY module of raytune-attn that imports mlflow. It does not import Ray.

Layout: one MLflow experiment per sweep name; one parent run per (accelerator type, problem) search; one nested
child run per trial (tag `mlflow.parentRunId`), so the UI's run table groups trials under their search and
"Compare" works on either level.

- child run: params = config knobs; metrics `tflops` and `latency_ms` per rung (step = rung), `compile_s`,
  `bench_s`, `wall_time_s`; tags `status`, `reason`, `trial_id`, `problem_key`, `accelerator_type`.
- parent run: tags = provenance (gpu, vendor, arch, driver, cuda/rocm, triton, torch, raytune-attn versions,
  kernel source hash, hostname) and `searcher` + `searcher.<setting>`; params = problem fields and searcher
  settings; metric `best_tflops_so_far` (step = trials so far) while the search runs; at the end params
  `best.<knob>`, metrics `best_tflops`, `best_latency_ms`, `baseline_tflops.<impl>`, `best_baseline_tflops`,
  `speedup_vs_baseline`, `n_trials`, `n_ok`, ...; artifacts `best_config.json`, `convergence.png` (best so far
  against trials and wall time), `trials.parquet` (this search's rows) and the best-configs artifact.

All calls go through `MlflowClient` with explicit run ids (no global active run), from the driver: a sweep calls
`log_trial` when Ray reports a trial finished, never inside the benchmark.

Tracking URI: the `tracking_uri` argument, else $MLFLOW_TRACKING_URI, else `sqlite:///mlflow.db` in the working
directory (embedded, artifacts in ./mlruns).

Every HTTP call has a timeout and few retries (`tracking_uri.apply_http_env`, where the environment sets none). Two
processes opening one new SQLite store at once both run MLflow's schema migration and one fails; opening a SQLite
store is therefore serialized by an `flock` on `<db>.init-lock` beside it, and a store that still refuses is
reported in words (`StoreError`), not by SQLAlchemy's link alone.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from raytune_attn.artifact import float_or_none
from raytune_attn.config import KNOBS
from raytune_attn.problem import Problem
from raytune_attn.tune.report import config_str
from raytune_attn.tune.results import row_config
from raytune_attn.tune.tracking_uri import (  # noqa: F401 - DEFAULT_DB is part of this module's API
    DEFAULT_DB,
    apply_http_env,
    error_words,
    resolve_tracking_uri,
    sqlite_file,
)

_MAX_TAG = 5000
_MAX_PARAM = 6000
INIT_LOCK_WAIT_S = 120.0  # another process migrating a new SQLite store's schema takes seconds


class StoreError(RuntimeError):
    """A tracking store that cannot be opened, said in words."""


@contextmanager
def _opening(tracking_uri: str):
    """Held while a store is first opened: an flock beside a SQLite database (see the module doc); anything else
    opens as it is. Errors come out as StoreError naming the store."""
    fd = None
    db = sqlite_file(tracking_uri)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(db.with_name(db.name + ".init-lock"), os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + INIT_LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise StoreError(f"MLflow store {tracking_uri}: another process has been opening it for "
                                     f"{INIT_LOCK_WAIT_S:g} s") from None
                time.sleep(0.1)
    try:
        yield
    except mlflow.exceptions.MlflowException:
        raise
    except Exception as e:  # noqa: BLE001 - SQLAlchemy, alembic, sqlite3: said in words below
        hint = (" (another sweep writing this SQLite store at the same moment? for concurrent sweeps use a tracking "
                "server: mlflow server --backend-store-uri ...)" if fd is not None else "")
        raise StoreError(f"MLflow store {tracking_uri} could not be opened: {type(e).__name__}: "
                         f"{error_words(e)}{hint}") from e
    finally:
        if fd is not None:
            os.close(fd)


def download_artifact(uri: str, dst: str | os.PathLike | None = None, tracking_uri: str | None = None) -> str:
    """Download a `runs:/`, `models:/` or `mlflow-artifacts:/` URI to a local path (used by `runtime`)."""
    dst = str(dst) if dst is not None else tempfile.mkdtemp(prefix="raytune-attn-configs-")
    apply_http_env()
    return mlflow.artifacts.download_artifacts(
        artifact_uri=uri, dst_path=dst, tracking_uri=resolve_tracking_uri(tracking_uri)
    )


def _ms() -> int:
    return int(time.time() * 1000)


def _s(v: Any, limit: int = _MAX_TAG) -> str:
    s = "" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
    return s[:limit]


@dataclass
class SearchHandle:
    """A running search: its parent run and what `log_trial` accumulates for it."""

    run_id: str
    experiment_id: str
    accelerator_type: str
    problem: Problem
    t0: float = field(default_factory=time.time)
    n_trials: int = 0
    best_tflops: float | None = None
    trial_runs: dict[str, str] = field(default_factory=dict)  # trial_id -> child run id


_STATUS_TO_RUN = {"ok": "FINISHED", "stopped": "FINISHED", "invalid": "FINISHED", "error": "FAILED"}


class SweepTracker:
    """Logs a sweep to MLflow. `experiment` is the sweep name."""

    def __init__(self, experiment: str, tracking_uri: str | None = None):
        apply_http_env()
        self.tracking_uri = resolve_tracking_uri(tracking_uri)
        self.experiment = experiment
        with _opening(self.tracking_uri):
            self.client = MlflowClient(tracking_uri=self.tracking_uri)  # MLflow opens (and migrates) the store here
            self.experiment_id = self._experiment_id(experiment)

    def _experiment_id(self, name: str) -> str:
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                self.client.restore_experiment(exp.experiment_id)
            return exp.experiment_id
        location = None
        db = sqlite_file(self.tracking_uri)
        if db is not None and not os.environ.get("MLFLOW_ARTIFACT_ROOT"):
            # Embedded store: keep artifacts next to the database instead of wherever the process runs.
            location = (db.parent / "mlruns").resolve().as_uri()
        try:
            return self.client.create_experiment(name, artifact_location=location)
        except mlflow.exceptions.MlflowException:  # created concurrently by another driver
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    # ------------------------------------------------------------------------------------------ a search

    def start_search(
        self,
        accel_type: str,
        problem: Problem | str,
        provenance: Mapping[str, Any],
        searcher_settings: Mapping[str, Any] | None = None,
        *,
        run_name: str | None = None,
    ) -> SearchHandle:
        """Open the parent run of one (accelerator type, problem) search."""
        p = problem if isinstance(problem, Problem) else Problem.from_key(problem)
        settings = dict(searcher_settings or {})
        tags = {k: _s(v) for k, v in provenance.items()}
        tags.update({
            "accelerator_type": accel_type,
            "problem_key": p.key,
            "raytune_attn.role": "search",
            "searcher": _s(settings.get("searcher", settings.get("name", ""))),
        })
        tags.update({f"searcher.{k}": _s(v) for k, v in settings.items()})
        run = self.client.create_run(self.experiment_id, tags=tags, run_name=run_name or f"{accel_type}/{p.key}")
        fields = {**p.to_dict(), "problem_key": p.key}  # a paged problem's dict names its key already
        params = [Param(k, _s(v, _MAX_PARAM)) for k, v in fields.items()]
        params += [Param(f"searcher.{k}", _s(v, _MAX_PARAM)) for k, v in settings.items()]
        self.client.log_batch(run.info.run_id, params=params)
        return SearchHandle(run.info.run_id, self.experiment_id, accel_type, p)

    def log_trial(
        self,
        handle: SearchHandle,
        row: Mapping[str, Any],
        rung_metrics: Iterable[Mapping[str, Any]] | Mapping[int, Mapping[str, Any]] | None = None,
    ) -> str:
        """Log one finished trial as a child run; returns its run id.

        `row` is a `results.trial_row(...)` dict (or any mapping with the knob, status and metric keys);
        `rung_metrics` the per-rung results, as `[{"rung": 0, "tflops": ..., "latency_ms": ...}, ...]` or
        `{0: {"tflops": ..., "latency_ms": ...}, ...}`; without it, the row's final values are logged at its rung.
        """
        now = _ms()
        trial_id = _s(row.get("trial_id")) or f"trial-{handle.n_trials}"
        status = _s(row.get("status")) or "ok"
        tags = {
            "mlflow.parentRunId": handle.run_id,
            "raytune_attn.role": "trial",
            "trial_id": trial_id,
            "status": status,
            "reason": _s(row.get("reason")),
            "problem_key": handle.problem.key,
            "accelerator_type": handle.accelerator_type,
        }
        # The config in the name: a search's trials, listed under it in the UI, read as what they tried.
        name = f"{trial_id} {config_str(row_config(row), short=True)}"
        run = self.client.create_run(handle.experiment_id, tags=tags, run_name=name)
        run_id = run.info.run_id
        params = [Param(k, _s(row[k])) for k in KNOBS if row.get(k) is not None and row.get(k) == row.get(k)]
        metrics = []
        if rung_metrics is None:
            step = row.get("rung")
            step = 0 if step is None or step != step else int(step)
            rung_metrics = [{"rung": step, "tflops": row.get("tflops"), "latency_ms": row.get("latency_ms")}]
        elif isinstance(rung_metrics, Mapping):
            rung_metrics = [{"rung": r, **m} for r, m in rung_metrics.items()]
        for m in rung_metrics:
            step = int(m.get("rung", 0))
            for name in ("tflops", "latency_ms"):
                v = float_or_none(m.get(name))
                if v is not None:
                    metrics.append(Metric(name, v, now, step))
        for name in ("compile_s", "bench_s", "wall_time_s"):
            v = float_or_none(row.get(name))
            if v is not None:
                metrics.append(Metric(name, v, now, 0))
        self.client.log_batch(run_id, metrics=metrics, params=params)
        self.client.set_terminated(run_id, _STATUS_TO_RUN.get(status, "FINISHED"))
        handle.n_trials += 1
        handle.trial_runs[trial_id] = run_id
        tf = float_or_none(row.get("tflops"))
        if status == "ok" and tf is not None and (handle.best_tflops is None or tf > handle.best_tflops):
            handle.best_tflops = tf
        if handle.best_tflops is not None:
            self.client.log_batch(handle.run_id, metrics=[
                Metric("best_tflops_so_far", handle.best_tflops, now, handle.n_trials)
            ])
        return run_id

    def finish_search(
        self,
        handle: SearchHandle,
        best: Mapping[str, Any] | None,
        baselines: Mapping[str, Any] | None,
        trials_df=None,
        artifact_path: str | os.PathLike | None = None,
        *,
        status: str = "FINISHED",
    ) -> None:
        """Close the parent run: the best config and its tflops, the baselines (impl -> tflops), the convergence
        plot and the trials Parquet (from `trials_df`, this search's rows), and the best-configs artifact.

        `best` is `winners.described(...)`: `{"config": {...}, "tflops": x, "latency_ms": y, "trial_id": ...}`, or
        None (no valid trial).
        """
        from raytune_attn.tune import results

        rid = handle.run_id
        now = _ms()
        metrics, params, tags = _best_entries(best, now)
        base_metrics, base_tags = _baseline_entries(baselines, best, now)
        metrics += base_metrics + _count_metrics(trials_df, now)
        metrics.append(Metric("search_wall_s", time.time() - handle.t0, now, 0))
        self.client.log_batch(rid, metrics=metrics, params=params, tags=tags + base_tags)
        with tempfile.TemporaryDirectory(prefix="raytune-attn-mlflow-") as tmp:
            tmp = Path(tmp)
            if best:
                (tmp / "best_config.json").write_text(json.dumps(dict(best), indent=2, sort_keys=True, default=str))
                self.client.log_artifact(rid, str(tmp / "best_config.json"))
            if trials_df is not None and len(trials_df):
                results.write_file(trials_df, tmp / "trials.parquet")
                self.client.log_artifact(rid, str(tmp / "trials.parquet"))
                results.plot_convergence(trials_df, tmp / "convergence.png",
                                         title=f"{handle.accelerator_type} {handle.problem.key}")
                self.client.log_artifact(rid, str(tmp / "convergence.png"))
        if artifact_path is not None:
            self.client.log_artifact(rid, str(artifact_path))
        self.client.set_terminated(rid, status)

    def end_runs(self, run_ids: Iterable[str], status: str = "KILLED", reason: str = "") -> list[str]:
        """End the runs of `run_ids` still RUNNING, and their child runs still RUNNING, as `status` (a resume ends
        the parent runs of the driver it replaces); returns the ids it ended."""
        ended = []
        for rid in run_ids:
            run = self.client.get_run(rid)
            children = self.client.search_runs(
                [run.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{rid}' and "
                "attributes.status = 'RUNNING'")
            for r in [run, *children]:
                if r.info.status == "RUNNING":
                    if reason:
                        self.client.set_tag(r.info.run_id, "end_reason", _s(reason))
                    self.client.set_terminated(r.info.run_id, status)
                    ended.append(r.info.run_id)
        return ended

    def abort_search(self, handle: SearchHandle, reason: str = "") -> None:
        """Mark a search that ended by an exception as FAILED."""
        if reason:
            self.client.set_tag(handle.run_id, "abort_reason", _s(reason))
        self.client.set_terminated(handle.run_id, "FAILED")

    # ------------------------------------------------------------------------------------------ after the fact

    def log_results(
        self,
        trials_df,
        *,
        searcher_settings: Mapping[str, Any] | None = None,
        artifact_path: str | os.PathLike | None = None,
    ) -> dict[tuple[str, str], str]:
        """Log a whole results table (`results.read_trials`): one search per (accelerator type, problem key), its
        trial rows as children, its baseline rows as baselines. Returns {(accel, problem_key): parent run id}."""
        from raytune_attn.tune import results, winners

        out = {}
        df = trials_df
        for (accel, key), g in df.groupby(["accelerator_type", "problem_key"], sort=True, dropna=False):
            trials = g[g["kind"] == "trial"]
            if "timestamp" in trials.columns:
                trials = trials.sort_values("timestamp", kind="stable")
            recs = trials.to_dict("records")
            prov = {c: recs[0].get(c) if recs else g.iloc[0][c] for c in results.PROVENANCE_COLUMNS}
            prov = {k: ("" if v is None or v != v else v) for k, v in prov.items()}
            settings = dict(searcher_settings or {})
            if recs and "searcher" not in settings and recs[0].get("searcher") == recs[0].get("searcher"):
                settings["searcher"] = recs[0].get("searcher")
            h = self.start_search(str(accel), key, prov, settings)
            for r in recs:
                if not winners.is_final(r.get("trial_id")):  # re-measures are not trials (the sweep logs none)
                    self.log_trial(h, r)
            best = winners.described(winners.pick(recs))
            bl = g[(g["kind"] == "baseline") & (g["status"] == "ok")]
            baselines = {}
            for r in bl.to_dict("records"):
                v = float_or_none(r.get("tflops"))
                if v is not None and v > baselines.get(r["impl"], -1.0):
                    baselines[r["impl"]] = v
            self.finish_search(h, best, baselines, g, artifact_path)
            out[(str(accel), key)] = h.run_id
        return out


def _best_entries(best: Mapping[str, Any] | None, now: int) -> tuple[list, list, list]:
    """A search's winner as MLflow entries: its config as `best.<knob>` params, best_tflops and best_latency_ms
    metrics, the best_trial_id tag."""
    metrics, params, tags = [], [], []
    if best:
        params += [Param(f"best.{k}", _s(v)) for k, v in dict(best.get("config") or {}).items()]
        for name in ("tflops", "latency_ms"):
            v = float_or_none(best.get(name))
            if v is not None:
                metrics.append(Metric(f"best_{name}", v, now, 0))
        if best.get("trial_id"):
            tags.append(RunTag("best_trial_id", _s(best["trial_id"])))
    return metrics, params, tags


def _baseline_entries(baselines: Mapping[str, Any] | None, best: Mapping[str, Any] | None,
                      now: int) -> tuple[list, list]:
    """Each baseline's tflops, the fastest of them (metric and tag), and the winner's speedup over it."""
    base = {k: float_or_none(v) for k, v in dict(baselines or {}).items()}
    base = {k: v for k, v in base.items() if v is not None}
    metrics = [Metric(f"baseline_tflops.{impl}", v, now, 0) for impl, v in base.items()]
    if not base:
        return metrics, []
    impl, v = max(base.items(), key=lambda kv: kv[1])
    metrics.append(Metric("best_baseline_tflops", v, now, 0))
    bt = float_or_none(best.get("tflops")) if best else None
    if bt is not None and v > 0:
        metrics.append(Metric("speedup_vs_baseline", bt / v, now, 0))
    return metrics, [RunTag("best_baseline_impl", impl)]


def _count_metrics(trials_df, now: int) -> list:
    """n_trials and a count per status over a search's trial rows (its final re-measures are not trials)."""
    from raytune_attn.tune import results, winners

    if trials_df is None or not len(trials_df):
        return []
    t = trials_df[trials_df["kind"] == "trial"] if "kind" in trials_df.columns else trials_df
    metrics = [Metric("n_trials", float(winners.count(t.to_dict("records"))), now, 0)]
    real = t[~t["trial_id"].map(winners.is_final).astype(bool)]
    return metrics + [Metric(f"n_{st}", float((real["status"] == st).sum()), now, 0) for st in results.STATUSES]
