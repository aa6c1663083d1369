"""The driver's Tune callback: every finished trial becomes a results row (written at once, so an interrupted
sweep loses none), an MLflow child run, and a progress line.

MLflow logging runs in its own process (`tracking_host.TrackingHost`): a child run cost 0.13 s of database
commits (sqlite) under cProfile on an H200 x2 sweep, and the Tune loop calls this callback between handing rungs'
results back to their trials.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from ray.tune import Callback

from raytune_attn.tune import results
from raytune_attn.tune.sweep.progress import Progress
from raytune_attn.tune.sweep.stack import on_host


def row_from_result(trial_id: str, cfg: dict, last: dict | None, n_rungs: int, prov: dict, meta: dict,
                    wall_time_s: float | None = None, error: str | None = None) -> dict:
    """One results row from a trial's config (as the searcher made it) and its last reported result. A trial
    handed out deferred (sweep/searcher.py) reported its knobs (`knobs_json`); `cfg["config"]` may be given by the
    caller from the searcher when it ended before reporting."""
    last = dict(last or {})
    knobs = cfg.get("config")
    if knobs is None:
        knobs = json.loads(last["knobs_json"]) if last.get("knobs_json") else {}
    status = str(last.get("status") or ("error" if error or not last else "ok"))
    reason = str(last.get("reason") or error or ("" if last else "trial ended without a result"))
    rung = int(last.get("rung") or 0)
    if status == "ok" and rung < n_rungs:
        status, reason = "stopped", f"early-stopped after rung {rung} of {n_rungs}"
        if last.get("capped"):
            reason += " (first runs over 10x the best latency seen: rung capped)"
    tf = last.get("tflops")
    ok = status in ("ok", "stopped") and tf is not None and math.isfinite(float(tf)) and float(tf) > 0
    metrics = {
        "status": status, "reason": reason, "rung": rung,
        "tflops": float(tf) if ok else None, "latency_ms": float(last["latency_ms"]) if ok else None,
        "compile_s": last.get("compile_s"), "bench_s": last.get("bench_s"),
        "wall_time_s": wall_time_s, "timestamp": time.time(),
    }
    for k in ("rel_err", "gpu"):  # the last rung's GPU measured the row's value
        if last.get(k) is not None:
            metrics[k] = last[k]
    return results.trial_row(cfg["problem"], knobs, metrics, on_host(prov, last.get("host")), trial_id=trial_id,
                             **meta)


_LIVE: dict[str, SweepState] = {}


class SweepCallback(Callback):
    """Tune pickles its callbacks with the experiment; this one only names the live `SweepState` of the driver
    (registered under the sweep's name), so a restored experiment reports to the new driver's state."""

    def __init__(self, key: str):
        self.key = key

    def _state(self) -> SweepState:
        return _LIVE[self.key]

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self._state().on_result(trial, result)

    def on_step_end(self, iteration, trials, **info):
        self._state().clock["loop_end"] = time.time()  # the last step's end is where Tune's loop stopped

    def on_experiment_end(self, trials, **info):
        self._state().clock["experiment_end"] = time.time()  # after Tune stopped its trial processes

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._state().finish(trial)

    def on_trial_error(self, iteration, trials, trial, **info):
        msg = str(getattr(trial, "error_msg", "") or "see Ray logs")[:300]
        self._state().finish(trial, error=f"trial raised: {msg}")


class SweepState:
    def __init__(self, *, out_dir: Path, n_rungs: int, provenance: dict, meta: dict, progress: Progress,
                 tracker=None, brokers: dict | None = None, t0: float | None = None,
                 config_of=None):
        self.out_dir = Path(out_dir)
        self.n_rungs = n_rungs
        self.provenance = provenance  # accel type -> provenance dict
        self.meta = meta
        self.progress = progress
        self.tracker = tracker  # tracking_host.RemoteTracker, or None
        self.brokers = brokers or {}
        self.config_of = config_of  # trial id -> knobs of a deferred trial (SweepSearcher.config_of), or None
        self.t0 = t0 or time.time()
        self.rungs: dict[str, list[dict]] = {}
        self.rows: list[dict] = []
        self.seen: set[str] = set()
        # Where Tune's own time goes at the start and end of its run (summary's tune_phases_s), and how many trial
        # processes it started: Tune reports each result's process id.
        self.clock: dict[str, float] = {}
        self.pids: set = set()

    def register(self, key: str) -> SweepCallback:
        _LIVE[key] = self
        return SweepCallback(key)

    def on_result(self, trial, result):
        if result.get("pid") is not None:
            self.pids.add((result.get("node_ip"), result["pid"]))
        if result.get("status") == "ok" and result.get("rung"):
            self.rungs.setdefault(trial.trial_id, []).append(
                {"rung": int(result["rung"]), "tflops": result.get("tflops"), "latency_ms": result.get("latency_ms")})

    def finish(self, trial, error: str | None = None):
        if trial.trial_id in self.seen or "search" not in trial.config:
            return
        self.seen.add(trial.trial_id)
        self.clock.setdefault("first_trial_end", time.time())
        self.clock["last_trial_end"] = time.time()
        cfg = trial.config
        if "config" not in cfg and not (trial.last_result or {}).get("knobs_json") and self.config_of is not None:
            cfg = {**cfg, "config": self.config_of(trial.trial_id) or {}}  # deferred and ended before reporting
        broker = self.brokers.get(cfg["accel"])
        if broker is not None:
            broker.release_trial.remote(trial.trial_id)
        row = row_from_result(trial.trial_id, cfg, trial.last_result, self.n_rungs, self.provenance[cfg["accel"]],
                              self.meta, wall_time_s=time.time() - self.t0, error=error)
        results.write_trials([row], self.out_dir / "trials")
        self.rows.append(row)
        if self.tracker is not None:
            self.tracker.log_trial(cfg["search"], row, self.rungs.get(trial.trial_id) or None)
        self.progress.trial_done(cfg["search"], row["status"], row["tflops"])

    def phases(self, t_fit: float, t_return: float) -> dict:
        """Tune's fixed costs around the trials: fit() to the first trial's end, the last trial's end to the end
        of Tune's loop, the loop's end to the experiment's end (the final state save, then Tune stopping its trial
        processes), and from there to fit() returning."""
        c = self.clock
        marks = [t_fit, c.get("first_trial_end"), c.get("last_trial_end"), c.get("loop_end"), c.get("experiment_end"),
                 t_return]
        names = ["to_first_trial_end", "first_to_last_trial_end", "last_trial_to_loop_end",
                 "loop_end_to_experiment_end", "to_fit_return"]
        return {n: (b - a if a is not None and b is not None else None)
                for n, a, b in zip(names, marks[:-1], marks[1:], strict=True)}
