"""`raytune-attn tune`: the sweep driver (see docs/sweep.md), three phases over one frozen `SweepConfig`:

    plan      (plan.py, before Ray)  the problem sets, the --space file, the tracking URI's form and the output
                                     directory checked; then sweep.json written
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
    from raytune_attn.tune.sweep.plan import make_plan, write_plan
    from raytune_attn.tune.sweep.run import run_tune, start_searches

    plan = make_plan(config)
    write_plan(plan)
    t0 = time.time()
    with ray_session(plan) as session:
        cluster = start_cluster(plan, session)
        sweep = start_searches(plan, cluster, t0)
        fit = run_tune(sweep)
        return finalize(sweep, fit)


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


def main(argv: list[str] | None = None) -> int:
    """`raytune-attn tune ARGS` (also `python -m raytune_attn.tune.sweep ARGS`, `pipelines/sweep.py`)."""
    import sys

    from raytune_attn.tune.cli import main as cli_main

    return cli_main(["tune", *(sys.argv[1:] if argv is None else argv)])
