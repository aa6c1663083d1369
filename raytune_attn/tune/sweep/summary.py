"""summary.json of a sweep and the table printed at its end. Winners and trial counts come from winners.py, as in
best_configs.json and `raytune-attn export`/`report`."""

from __future__ import annotations

import json

from raytune_attn.problem import Problem
from raytune_attn.tune import results, winners
from raytune_attn.tune.sweep.progress import hms


def _per_search(s, df, counts: dict, best_rows: dict) -> dict:
    pk = Problem.from_dict(s.problem).key
    mine = df[(df["kind"] == "trial") & (df["accelerator_type"] == s.accel) & (df["problem_key"] == pk)]
    final = mine["trial_id"].map(winners.is_final)
    g = mine[~final]
    best = best_rows.get((s.accel, pk))
    base = df[(df["kind"] == "baseline") & (df["accelerator_type"] == s.accel) & (df["problem_key"] == pk)]
    return {
        "search": s.key, "accelerator_type": s.accel, "problem_key": pk, "trials": counts.get((s.accel, pk), 0),
        **{st: int((g["status"] == st).sum()) for st in ("ok", "stopped", "invalid", "error")},
        "remeasured": int((final & (mine["status"] == "ok")).sum()),
        "best_tflops": None if best is None else float(best["tflops"]),
        "best_latency_ms": None if best is None else float(best["latency_ms"]),
        "best_config": None if best is None else results.row_config(best),
        "baselines": {r["impl"]: float(r["tflops"]) for r in base.to_dict("records") if r["tflops"] == r["tflops"]},
        "compile_s_sum": float(g["compile_s"].fillna(0).sum()),
        "bench_s_sum": float(g["bench_s"].fillna(0).sum()),
    }


def _actor_time(stats: dict, lanes: dict, fit, n_trials: int) -> dict:
    """Where the benchmark actors' time went: busy, waiting on compiles, idle between trials."""
    n_act = sum(len(v) for v in stats.values())
    busy = sum(x["busy_s"] for v in stats.values() for x in v)
    baseline = sum(x.get("baseline_s", 0.0) for v in stats.values() for x in v)
    gpu_time = fit.wall_s * max(1, n_act)
    seen = {k: sum(x[k] for v in lanes.values() for x in v) for k in ("run", "compile", "pipeline")}
    return {
        "benchmark_actors": n_act, "gpu_busy_s": busy, "baseline_busy_s": baseline,
        "search_gpu_s": busy - baseline,  # checks, rungs and final re-measures: what early stopping saves on
        # Of the Tune run's wall time x GPUs, the share the GPUs spent running the search's kernels.
        "gpu_busy_fraction": fit.busy_s / gpu_time if gpu_time else None, "gpu_busy_in_tune_s": fit.busy_s,
        "compile_wait_s": sum(x["compile_wait_s"] for v in stats.values() for x in v),
        # Idle GPU seconds while no trial of it was compiling (Tune starting/continuing trials, lease hand-offs),
        # per trial: the pipeline's own cost. Idle seconds while trials were still compiling are compile-bound.
        "overhead_per_trial_s": seen["pipeline"] / max(1, n_trials), "idle_compile_bound_s": seen["compile"],
        "idle_pipeline_s": seen["pipeline"], "lease_run_s": seen["run"],
        "configs_per_s": n_trials / fit.wall_s if fit.wall_s else None,
    }


def _tune_time(sweep, fit) -> dict:
    """Tune's own costs: start-up to the first trial and rung, its phases, processes, deferrals."""
    startup = {k: min((f[k] for f in fit.firsts if f[k]), default=fit.t_fit) - fit.t_fit for k in ("assign", "rung")}
    searcher = sweep.searcher
    return {
        "tune_to_first_trial_s": startup["assign"], "tune_to_first_rung_s": startup["rung"],
        "tune_phases_s": sweep.state.phases(fit.t_fit, fit.t_return),
        "trial_processes": len(sweep.state.pids),  # distinct trial processes that reported (actor reuse)
        "trials_deferred": searcher.n_deferred if searcher is not None else None,
        "rungs_capped": sum(f["capped"] for f in fit.firsts),
        "rungs_requeued": sum(f.get("requeued", 0) for f in fit.firsts),  # queued behind a crash, run again
    }


def summarize(sweep, fit, df, stats: dict, wall_s: float) -> dict:
    """summary.json: the sweep's settings, its time, each search's trials, winner and baselines."""
    plan, c, cpu_mode = sweep.plan, sweep.plan.config, sweep.cluster.cpu_mode
    counts = winners.trial_counts(df)
    n_trials = sum(counts.get((s.accel, Problem.from_dict(s.problem).key), 0) for s in sweep.searches)
    # A resume's Tune run measured only the trials its predecessors did not finish: its rates count those.
    n_here = max(0, n_trials - sum(len(v) for v in plan.prior.done.values()))
    trials = df[(df["kind"] == "trial") & ~df["trial_id"].map(winners.is_final)]
    best_rows = winners.winners(df)
    return {
        "name": plan.name, "out": str(plan.out), "cpu_mode": cpu_mode, "timings_representative": not cpu_mode,
        "searcher": c.searcher, "budget_per_search": max((s.budget for s in sweep.searches), default=0),
        "early_stop": not c.no_early_stop, "rungs_ms": list(c.rungs_ms),
        "wall_s": wall_s, "tune_wall_s": fit.wall_s, "wall": hms(wall_s), "trials": n_trials,
        # This driver's run of the sweep (2 on: resumed) and the trials its predecessors left in flight (resume.py).
        "attempt": plan.prior.attempt, "trials_interrupted": len(plan.prior.interrupted), "trials_this_attempt": n_here,
        **_actor_time(stats, fit.lanes, fit, n_here),
        "bench_s_sum": float(trials["bench_s"].fillna(0).sum()),
        **_tune_time(sweep, fit),
        "actors": stats, "searches": [_per_search(s, df, counts, best_rows) for s in sweep.searches],
        "actor_info": sweep.cluster.infos,
    }


def format_summary(summary: dict) -> str:
    """The table printed at the sweep's end: one line for the sweep, one per search."""
    here = summary.get("trials_this_attempt", summary["trials"])
    resumed = f" ({here} in this attempt)" if summary.get("attempt", 1) > 1 else ""
    lines = [f"sweep {summary['name']}: {summary['trials']} trials{resumed} in {summary['wall']} "
             f"(tune {summary['tune_wall_s']:.1f} s, {summary['configs_per_s'] or 0:.2f} configs/s) on "
             f"{summary['benchmark_actors']} benchmark actor(s); GPU busy fraction "
             f"{summary['gpu_busy_fraction'] or 0:.2f}; GPU idle waiting on compiles "
             f"{summary['idle_compile_bound_s']:.1f} s; overhead per trial {summary['overhead_per_trial_s']:.3f} s; "
             f"first rung {summary.get('tune_to_first_rung_s') or 0:.1f} s after Tune started; early stopping "
             f"{'on' if summary['early_stop'] else 'off'}"]
    for s in summary["searches"]:
        best = "no valid config" if s["best_tflops"] is None else \
            f"best {s['best_tflops']:.4g} TFLOP/s ({s['best_latency_ms']:.4g} ms) {json.dumps(s['best_config'])}"
        base = ", ".join(f"{k} {v:.4g}" for k, v in s["baselines"].items()) or "none"
        if s["best_tflops"] is not None and s.get("remeasured") == 0:
            best += " (by its rungs: no final re-measure succeeded)"
        lines.append(f"  {s['search']}: {s['trials']} trials (ok {s['ok']}, stopped {s['stopped']}, invalid "
                     f"{s['invalid']}, error {s['error']}); {best}; baselines: {base}")
    if not summary["timings_representative"]:
        lines.append("  (Triton interpreter on CPU: timings are not representative)")
    return "\n".join(lines)
