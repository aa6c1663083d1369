"""`raytune-attn tune`: the sweep driver (see docs/sweep.md), three phases over one frozen `SweepConfig`:

    plan      (plan.py, before Ray)  the problem sets, the --space file, the tracking URI (its form; a server
                                     answers) and the output directory checked (another sweep's: refused); then
                                     the directory's lock taken (lock.py) and sweep.json written
    run       (cluster.py, run.py)   start or join Ray -> the GPU nodes and their accelerator types -> one BenchActor
                                     per GPU, one CompileActor per node, one Broker per type -> one search per
                                     (accelerator type, problem) in a single Tune experiment -> rows, MLflow runs
                                     and progress as trials finish
    finalize  (finalize.py)          re-measure the top configs of each search -> trials.parquet,
                                     best_configs.json, summary.json
"""

from __future__ import annotations

import logging
import time

from raytune_attn.tune.sweep.config import SweepConfig

log = logging.getLogger(__name__)
EXIT_INCOMPLETE = 3  # interrupted: --resume finishes the sweep
EXIT_INTERRUPTED = 130


def run(config: SweepConfig) -> dict:
    """The whole sweep; returns summary.json's content. Bad input raises before Ray starts, writing nothing."""
    from raytune_attn.tune.sweep.cluster import ray_session, start_cluster
    from raytune_attn.tune.sweep.finalize import finalize
    from raytune_attn.tune.sweep.lock import SweepLock
    from raytune_attn.tune.sweep.plan import make_out, make_plan, write_plan
    from raytune_attn.tune.sweep.run import run_tune, start_searches
    from raytune_attn.tune.tracking_uri import apply_http_env

    plan = make_plan(config)
    if plan.config.resume:
        log.info("resuming sweep %s in %s (attempt %d): %d trial(s) finished before, %d were in flight",
                 plan.name, plan.out, plan.prior.attempt, sum(len(v) for v in plan.prior.done.values()),
                 len(plan.prior.interrupted))
    if plan.tracking_uri is not None:
        apply_http_env()  # before Ray starts: a local cluster's workers inherit it
    make_out(plan)
    with SweepLock(plan.out):  # released however this ends; the kernel releases it if the process is killed
        write_plan(plan)
        _mark_interrupted(plan)
        t0 = time.time()
        with ray_session(plan) as session:
            cluster = start_cluster(plan, session)
            sweep = start_searches(plan, cluster, t0)
            try:
                fit = run_tune(sweep)
                return finalize(sweep, fit)
            except BaseException:
                _end_tracking(sweep)
                raise


def _mark_interrupted(plan) -> None:
    """A resume's row for each trial its predecessors left in flight (resume.interrupted_rows)."""
    from raytune_attn.tune import results
    from raytune_attn.tune.sweep.resume import interrupted_rows
    from raytune_attn.tune.sweep.run import meta

    rows = interrupted_rows(plan.prior, meta(plan))
    if rows:
        results.write_trials(rows, plan.out / "trials")
        log.info("%d trial(s) were in flight when the sweep's last driver ended: marked interrupted, their configs "
                 "free again", len(rows))


def _end_tracking(sweep) -> None:
    """The parent runs of a sweep that ends by an exception: KILLED now, not RUNNING until a resume ends them."""
    if sweep.tracker is None or not sweep.tracker.runs:
        return
    try:
        sweep.tracker.end_runs(list(sweep.tracker.runs.values()), "KILLED", reason="the sweep's driver stopped")
    except Exception:  # noqa: BLE001 - the exception on its way out is the one to report
        log.debug("could not end the MLflow runs", exc_info=True)


def report(summary: dict) -> None:
    """The sweep's end for the user: the summary table, the files, and how to finish an interrupted sweep."""
    from raytune_attn.tune.sweep.cluster import CPU_NOTE
    from raytune_attn.tune.sweep.summary import format_summary

    print(format_summary(summary), flush=True)
    out = summary["out"]
    log.info("wrote %s/trials.parquet, %s/best_configs.json, %s/summary.json", out, out, out)
    if summary["cpu_mode"]:
        log.warning(CPU_NOTE)
    if summary.get("incomplete"):
        log.warning("sweep incomplete: %d of %d trials finished (interrupted?); finish it with: raytune-attn tune "
                    "--resume --out %s", summary["trials"], summary["trials_expected"], out)


def tune(config: SweepConfig) -> int:
    """`raytune-attn tune`: run the sweep and report it; the command's exit code."""
    try:
        summary = run(config)
    except KeyboardInterrupt:
        log.warning("interrupted; finish it with --resume")
        return EXIT_INTERRUPTED
    report(summary)
    return EXIT_INCOMPLETE if summary.get("incomplete") else 0
