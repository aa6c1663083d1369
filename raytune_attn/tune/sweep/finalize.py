"""The sweep's last phase: every trial's row, the final re-measure, the baselines, then trials.parquet,
best_configs.json (winners.build_artifact), summary.json and each search's MLflow parent run."""

from __future__ import annotations

import json
import logging
import shutil
import time

from raytune_attn.tune.sweep.cluster import actor_stats
from raytune_attn.tune.sweep.remeasure import actor_per_search, remeasure
from raytune_attn.tune.sweep.run import Fit, Sweep, meta

log = logging.getLogger(__name__)


def finalize(sweep: Sweep, fit: Fit) -> dict:
    """Write the sweep's files and finish its tracking; returns summary.json's content."""
    from raytune_attn import artifact
    from raytune_attn.tune import results, winners
    from raytune_attn.tune.sweep.summary import summarize

    plan = sweep.plan
    logged = _trial_rows(sweep, fit)
    rows = [r for r in logged if r.get("status") != results.INTERRUPTED]
    # Final re-measure of each search's top configs with more repetitions; the winner comes from these.
    final_rows = remeasure(sweep, rows)
    # Baselines (PyTorch SDPA's backends) last, once per search, spread over the type's actors. Measured before
    # the sweep, they slowed it: two GPUs ran 11 configs/s after them and 16-19 without, each rung's host-side
    # steps (launches, graph replays) taking 2-5x longer; a process that ran them alone timed its rungs as fast
    # after as before, so the cause is not that process's state alone, and is not pinned down.
    base_rows = [] if plan.config.no_baselines else _baselines(sweep)
    path = results.write_file(logged + final_rows + base_rows, plan.out / "trials.parquet")
    # trials/ was the log of rows as trials ended; trials.parquet now holds each of them (marks included): one copy.
    shutil.rmtree(plan.out / "trials", ignore_errors=True)
    df = results.read_trials(path)
    art_path = artifact.write(winners.build_artifact(df), plan.out / "best_configs.json")
    stats = {accel: actor_stats(acts) for accel, acts in sweep.cluster.actors.items()}
    summary = summarize(sweep, fit, df, stats, time.time() - sweep.t0)
    summary["trials_expected"] = sum(s.budget for s in sweep.searches)
    if summary["trials"] < summary["trials_expected"]:
        summary["incomplete"] = True  # interrupted: --resume finishes it
    (plan.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    if sweep.tracker is not None:
        _finish_tracking(sweep, df, art_path)
    return summary


def _trial_rows(sweep: Sweep, fit: Fit) -> list[dict]:
    """Every trial's row, one each: those written as trials finished (this driver's, in trials/) and by earlier
    drivers of the sweep (trials.parquet of a finalized attempt), the interrupted marks included, plus any finished
    trial whose row an interruption lost."""
    from raytune_attn.tune.sweep.callbacks import row_from_result
    from raytune_attn.tune.sweep.resume import logged_trials

    out, n_rungs, prov = sweep.plan.out, len(sweep.plan.config.rungs_ms), sweep.state.provenance
    rows = logged_trials(out)
    have = {r["trial_id"] for r in rows}
    for res in fit.grid:
        tid = (res.metrics or {}).get("trial_id")
        cfg = res.config or {}
        if tid and tid not in have and "search" in cfg and res.metrics:
            rows.append(row_from_result(tid, cfg, res.metrics, n_rungs, prov[cfg["accel"]], meta(sweep.plan)))
    return list({r["trial_id"]: r for r in rows}.values())


def _baselines(sweep: Sweep) -> list[dict]:
    """PyTorch SDPA's backends on each search's problem (a resume keeps the ones its first run measured)."""
    import ray

    from raytune_attn.tune import results

    plan, prov = sweep.plan, sweep.state.provenance
    if plan.config.resume and (plan.out / "trials.parquet").exists():
        df = results.read_trials(plan.out / "trials.parquet")
        return df[df["kind"] == "baseline"].to_dict("records")
    acts = actor_per_search(sweep.cluster.actors, sweep.searches)
    futures = [(s, act.baselines.remote(s.problem)) for s, act in zip(sweep.searches, acts, strict=True)]
    rows = []
    for s, f in futures:
        try:
            got = ray.get(f)
        except Exception as e:  # noqa: BLE001 - a baseline that fails is reported, the sweep goes on
            log.warning("baselines of %s failed: %s", s.key, e)
            continue
        rows += [results.baseline_row(s.problem, impl, m, prov[s.accel], sweep_id=plan.name, sweep_name=plan.name)
                 for impl, m in got.items()]
    return rows


def _finish_tracking(sweep: Sweep, df, art_path) -> None:
    """Each search's parent run gets its winner, baselines and trials; every run is written before this returns."""
    from raytune_attn.problem import Problem
    from raytune_attn.tune import results, winners

    best_rows = winners.winners(df)
    for s in sweep.searches:
        pk = Problem.from_dict(s.problem).key
        g = df[(df["accelerator_type"] == s.accel) & (df["problem_key"] == pk)]
        b = best_rows.get((s.accel, pk))
        best = None if b is None else {"config": results.row_config(b), "tflops": float(b["tflops"]),
                                       "latency_ms": float(b["latency_ms"]), "trial_id": str(b["trial_id"])}
        base = {r["impl"]: r["tflops"] for r in g[g["kind"] == "baseline"].to_dict("records")}
        sweep.tracker.finish_search(s.key, best, base, g, art_path)  # its failure is a warning: the files exist
    for warning in sweep.tracker.drain():
        log.warning("%s", warning)
