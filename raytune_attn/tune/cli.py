"""The `raytune-attn` command line. Each command imports its implementation lazily so that `--help` stays fast.

A user's mistake (bad flag, file or value) exits with code 2 and a one-line message, never a traceback:
implementations raise `UsageError` (or ValueError/FileNotFoundError for bad input) and `main` maps them.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import typer

app = typer.Typer(
    name="raytune-attn",
    help="Bayesian-optimization autotuner for Triton flash-attention kernels, built on Ray Tune.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
space_app = typer.Typer(help="Inspect search-space files and compile them for a GPU target.", no_args_is_help=True)
app.add_typer(space_app, name="space")


class UsageError(Exception):
    """A user's mistake: printed as one line, exit code 2."""


@app.command("export")
def export_cmd(
    results_path: str = typer.Argument(..., metavar="RESULTS", help="Trials Parquet file or results directory."),
    output: str = typer.Option("best_configs.json", "-o", "--output",
                               help="Artifact JSON to write (in a directory: its best_configs.json)."),
    accelerator_type: str = typer.Option(None, "--accelerator-type", help="Keep only this accelerator type."),
):
    """Build the best-configs JSON artifact (winning config per accelerator type and problem) from trial results."""
    from raytune_attn import artifact
    from raytune_attn.tune import results, winners

    output = _file_out(output, "best_configs.json", "-o/--output")
    df = results.read_trials(results_path)
    if accelerator_type:
        df = results.of_type(df, accelerator_type, results_path)
    art = winners.build_artifact(df)
    if not art["entries"]:
        raise UsageError(f"{results_path}: no trial with status ok to export")
    artifact.write(art, output)
    print(artifact.summary(art))
    print(f"wrote {output}")


def _file_out(path: str, name: str, flag: str) -> str:
    """An output file flag's path (an existing directory means the file `name` in it), checked writable before the
    command's work: the nearest existing folder above it must be a writable directory (the writers create the
    folders below it)."""
    from raytune_attn.tune.out_paths import existing_base

    path = str(Path(path) / name) if Path(path).is_dir() else path
    base = existing_base(Path(path).parent)
    if not base.is_dir():
        raise UsageError(f"{flag} {path}: {base} is a file, not a directory")
    if not os.access(base, os.W_OK | os.X_OK) or (Path(path).exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{flag} {path}: cannot write there (permission denied)")
    return path


@app.command("bench")
def bench_cmd(
    grid: str = typer.Option("auto", help="standard (bf16 H100 grid), tiny (interpreter) or auto (by device)."),
    head_dim: list[int] = typer.Option(None, "--head-dim", help="Restrict the grid to these head dims."),
    seqlen: list[int] = typer.Option(None, "--seqlen", help="Restrict the grid to these sequence lengths."),
    causal: str = typer.Option("both", help="both, causal or full."),
    dtype: str = typer.Option(None, help="float16 or bfloat16 (standard grid; default bfloat16)."),
    config: list[str] = typer.Option(None, "--config", help="Kernel config as JSON (repeatable); default if none."),
    out: str = typer.Option("bench.parquet", "--out", help="Parquet file (in a directory: its bench.parquet); a "
                            "markdown table is written beside it."),
    rep_ms: float = typer.Option(100.0, "--rep-ms", help="Milliseconds of repetitions per timing."),
):
    """Time the kernel against PyTorch SDPA's flash, cuDNN and efficient backends on a grid of shapes."""
    import json

    from raytune_attn.config import validate_config
    from raytune_attn.tune.measure.compile_pool import interpret_without_gpu

    if grid not in ("auto", "standard", "tiny"):
        raise UsageError(f"--grid must be auto, standard or tiny, got {grid!r}")
    if causal not in ("both", "causal", "full"):
        raise UsageError(f"--causal must be both, causal or full, got {causal!r}")
    if not 0 < rep_ms < math.inf:
        raise UsageError(f"--rep-ms must be > 0 and finite, got {rep_ms}")
    interpreting = interpret_without_gpu()  # as the sweep's actors do, before the kernel's module is imported
    from raytune_attn.tune.measure import bench

    out = _file_out(out, "bench.parquet", "--out")
    if Path(out).suffix == ".md":  # the markdown table goes beside the Parquet file, as .md: it would replace it
        raise UsageError(f"--out {out}: name the Parquet file (e.g. bench.parquet); the markdown table is written "
                         "beside it as .md")
    masks = {"both": (False, True), "causal": (True,), "full": (False,)}[causal]
    problems = _bench_cells(grid, head_dim, seqlen, dtype, masks, interpreting)
    configs = []
    for c in config or []:
        try:
            configs.append(json.loads(c))
        except json.JSONDecodeError as e:
            raise UsageError(f"--config {c!r} is not JSON: {e}") from None
        validate_config(configs[-1])  # InvalidConfig names the bad knob (exit 2)
    df = bench.run_bench(problems, configs, out, rep_ms=rep_ms)
    print(bench.markdown_table(df))
    print(f"wrote {out} and {Path(out).with_suffix('.md')}")


def _bench_cells(grid: str, head_dims, seqlens, dtype: str | None, masks: tuple, interpreting: bool) -> list:
    """The problems `bench` times: the tiny grid as it is, or the standard grid's cells the flags select (each
    flag refused where it cannot select one)."""
    from raytune_attn.tune.measure import bench

    if grid == "auto":
        grid = "tiny" if interpreting else "standard"
    if grid == "tiny":
        given = [f for f, v in (("--head-dim", head_dims), ("--seqlen", seqlens), ("--dtype", dtype)) if v]
        if given:
            raise UsageError(f"{', '.join(given)}: only with --grid standard (the tiny grid is fixed: float32, D=32, "
                             "S=64 and 128)")
        return [p for p in bench.tiny_grid() if p.causal in masks]
    if interpreting:
        raise UsageError("--grid standard needs a GPU: the Triton interpreter would take hours on its shapes "
                         "(--grid tiny runs without one)")
    if dtype not in (None, "float16", "bfloat16"):
        raise UsageError(f"--dtype must be float16 or bfloat16, got {dtype!r}")
    for flag, values, total, what in (("--head-dim", head_dims, bench.GRID_WIDTH, "H*D"),
                                      ("--seqlen", seqlens, bench.GRID_TOKENS, "B*S")):
        for v in values or ():
            if v < 1 or total % v:
                raise UsageError(f"{flag} {v}: the standard grid keeps {what} = {total}, so it must divide {total}")
    return bench.standard_grid(head_dims=tuple(head_dims or bench.GRID_HEAD_DIMS),
                               seqlens=tuple(seqlens or bench.GRID_SEQLENS), dtype=dtype or "bfloat16", causal=masks)


@app.command("tune")
def tune_cmd(
    problems: str = typer.Option(None, "--problems", help="Problem-set YAML (or a name under pipelines/problems/); "
                                 "default: standard with a GPU, cpu_smoke without."),
    searcher: str = typer.Option("gp", "--searcher", help="gp, random, grid or tpe (Optuna: the tpe extra)."),
    budget: int = typer.Option(None, "--budget", help="Trials per search (default 40, 75 with --no-priors; 6 "
                               "without a GPU)."),
    out: str = typer.Option(None, "--out", help="Output directory (default ./raytune-results/<name>/)."),
    address: str = typer.Option(None, "--address", help="Join this Ray cluster ('auto': the running one); default: "
                                "start a local one."),
    name: str = typer.Option(None, "--name", help="Sweep name (the MLflow experiment); default sweep-<UTC time>."),
    seed: int = typer.Option(0, "--seed", help="Searcher seed (search i of a problem set takes seed + i)."),
    resume: bool = typer.Option(False, "--resume", help="Finish an interrupted sweep (needs --name or --out); every "
                                "other flag comes from its sweep.json, except --address, --num-cpus, "
                                "--compile-workers."),
    space: str = typer.Option(None, "--space", help="Search-space YAML for every accelerator type (default: "
                              "search_spaces/<vendor>/<arch>.yaml of each type)."),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help="MLflow tracking URI (default "
                                     "$MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)."),
    no_mlflow: bool = typer.Option(False, "--no-mlflow", help="Do not log to MLflow."),
    compile_workers: int = typer.Option(None, "--compile-workers", help="Compile processes per node (default: CPUs "
                                        "- 1 with a GPU; 0 = compile in the benchmark actor)."),
    compile_timeout: float = typer.Option(120.0, "--compile-timeout", help="Seconds per compile; over it a config "
                                          "is invalid."),
    compile_timeout_x: float = typer.Option(10.0, "--compile-timeout-x", help="Also cut a compile at this many "
                                            "times the node's median compile (at least 30 s; 0: only "
                                            "--compile-timeout)."),
    no_early_stop: bool = typer.Option(False, "--no-early-stop", help="Run every config through every rung (FIFO)."),
    no_baselines: bool = typer.Option(False, "--no-baselines", help="Do not measure SDPA's backends on each problem "
                                      "(best_configs.json then has no speed-ups)."),
    rungs: str = typer.Option("10,30,60", "--rungs", help="Milliseconds of repetitions per timing rung, increasing."),
    reduction_factor: float = typer.Option(2.0, "--reduction-factor", help="ASHA reduction factor (> 1)."),
    top_k: int = typer.Option(4, "--top-k", help="Configs per search re-measured before naming the winner (0: no "
                              "re-measure, nor of the siblings' winners)."),
    final_rep_ms: float = typer.Option(200.0, "--final-rep-ms", help="Repetitions (ms) of the final re-measure."),
    family_k: int = typer.Option(2, "--family-k", help="Configs per search that the final re-measure adds: the "
                                 "winners of the nearest problems with the same heads, head dim, mask and dtype."),
    trials_per_gpu: int = typer.Option(None, "--trials-per-gpu", help="Trials in flight per GPU; their compiles "
                                       "run ahead (default 16 with a GPU, 3 without)."),
    num_cpus: int = typer.Option(None, "--num-cpus", help="CPUs of the embedded local cluster."),
    cpu_actors: int = typer.Option(1, "--cpu-actors", help="Benchmark actors without a GPU (interpreter)."),
    no_priors: bool = typer.Option(False, "--no-priors", help="The GP without the space files' start, moves and "
                                   "coupled pairs: it learns from the candidates and its measurements alone "
                                   "(default --budget 75: docs/search.md, 'Without priors')."),
    warm_start: str = typer.Option(None, "--warm-start", help="Earlier results (a trials.parquet, a sweep directory "
                                   "or a landscape: other shapes, another GPU) as a prior: the GP's model takes "
                                   "them, other searchers start from their best configs."),
    share_results: bool = typer.Option(False, "--share-results", help="Each search's GP also models the other "
                                       "problems' results of this sweep on its GPU type as they come, weighted by "
                                       "their likeness (as --warm-start's)."),
):
    """Tune the flash-attention kernel with Ray Tune: one search per (accelerator type, problem), trials on
    long-lived GPU actors, early stopping over timing rungs. Without --address it starts a local Ray cluster.
    Inputs are checked before Ray starts; exit 3: interrupted (finish it with --resume)."""
    flags = {k: v for k, v in locals().items() if k != "rungs"}  # the flags, named as SweepConfig's fields
    from raytune_attn.tune.sweep import driver
    from raytune_attn.tune.sweep.config import SweepConfig, parse_rungs
    from raytune_attn.tune.sweep.progress import show_log

    config = SweepConfig(**flags, rungs_ms=parse_rungs(rungs))
    show_log()
    rc = driver.tune(config)
    if rc:
        raise typer.Exit(rc)


@space_app.command("show")
def space_show_cmd(file: str = typer.Argument(..., metavar="FILE", help="Search-space YAML (or e.g. nvidia/sm90).")):
    """Print a search space's parameters and its size before and after constraints."""
    from raytune_attn.tune.search.space import load_space

    print(load_space(file).describe())


@space_app.command("compile")
def space_compile_cmd(
    space: str = typer.Argument(..., metavar="SPACE", help="Search-space YAML (or e.g. amd/gfx942)."),
    target: str = typer.Option(..., "--target", help="hip:gfx942, hip:gfx90a, cuda:80, cuda:90 or cuda:100."),
    problems: str = typer.Option(None, "--problems", help="Problem-set YAML (default: D 64/128/256, full and causal)."),
    sample: int = typer.Option(None, "--sample", help="A seeded sample of N configs instead of every one."),
    out: str = typer.Option(None, "--out", help="Write one Parquet row per config and problem here (in a directory: "
                            "its compile.parquet)."),
    workers: int = typer.Option(None, "--workers", help="Compile processes (default: the machine's cores)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sample."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds one compile may take."),
):
    """Compile a space's configs for a GPU target on this machine, no GPU needed: compiled, refused (why), failed
    (the compiler's message), spilling; shared memory, registers and the pre-filter's estimate per config."""
    from raytune_attn.tune.measure.cross_compile import space_compile_main

    out = _file_out(out, "compile.parquet", "--out") if out else None
    raise typer.Exit(space_compile_main(space, target, problems, sample, out, workers, seed=seed, timeout_s=timeout))


@app.command("replay")
def replay_cmd(
    landscape: str = typer.Option(..., "--landscape", help="Parquet file (one row per config or per trial) or a "
                                  "sweep's directory."),
    searcher: list[str] = typer.Option(None, "--searcher", help="gp, random, grid or tpe (Optuna; repeatable; "
                                       "default gp, random)."),
    budget: int = typer.Option(40, "--budget", help="Evaluations per run."),
    seeds: int = typer.Option(10, "--seeds", help="Runs per searcher (seeds S..S+N-1)."),
    seed_start: int = typer.Option(0, "--seed-start", help="First seed S (another set of runs: e.g. 10)."),
    objective: str = typer.Option("tflops", "--objective", help="Objective column, higher is better; NaN = failed."),
    params: list[str] = typer.Option(None, "--params", help="Parameter columns (repeatable; default: all but known)."),
    select: list[str] = typer.Option(None, "--select", help="Keep rows with COLUMN=VALUE (repeatable)."),
    concurrency: int = typer.Option(1, "--concurrency", help="Configs asked for before any is told (parallel)."),
    json_out: str = typer.Option(None, "--json", help="Write the summary as JSON here (in a directory: its "
                                 "replay.json)."),
    gp_option: list[str] = typer.Option(None, "--gp-option", help="GP option NAME=VALUE, e.g. cost_aware=false."),
    cold_compile: bool = typer.Option(False, "--cold-compile", help="Compile seconds: each config's largest over "
                                      "the whole table, ignoring --select (its cold build)."),
    no_priors: bool = typer.Option(False, "--no-priors", help="The GP without the space file's start, moves and "
                                   "coupled pairs: the candidate set only."),
    noise: float = typer.Option(0.0, "--noise", help="Run-to-run spread told to the searchers, e.g. 0.02: values "
                                "times exp(0.02 z), seeded; 98% is judged on the true values."),
    warm_start: str = typer.Option(None, "--warm-start", help="Earlier results (a trials Parquet file, a sweep "
                                   "directory or a landscape of other shapes or another GPU) as the searchers' prior."),
    warm_as: str = typer.Option("model", "--warm-as", help="model: the GP takes every earlier result into its model, "
                                "the others start from the 6 best; design: every searcher starts from the 6 best."),
    screen: bool = typer.Option(False, "--screen", help="Candidates as a sweep on the table's GPU screens them (the "
                                "validation for its arch, head dim and dtype): configs it knows cannot fit cost no "
                                "evaluation."),
):
    """Measure searchers on a recorded landscape, without a GPU: evaluations to reach 95%/98% of the best, and the
    compile seconds spent."""
    from raytune_attn.tune.search.replay import replay_command

    json_out = _file_out(json_out, "replay.json", "--json") if json_out else None
    print(replay_command(landscape, searcher or [], budget=budget, seeds=seeds, seed_start=seed_start,
                         objective=objective,
                         params=params or [], select=select or [], concurrency=concurrency, json_out=json_out,
                         gp_options=gp_option or [], cold_compile=cold_compile, no_priors=no_priors,
                         noise=noise, warm_start=warm_start, warm_as=warm_as, screen=screen))
    if json_out:
        print(f"wrote {json_out}")


@app.command("report")
def report_cmd(
    results_path: str = typer.Argument(..., metavar="RESULTS", help="Trials Parquet file or results directory."),
    plots_dir: str = typer.Option(None, "--plots-dir", help="Write the PNGs here instead of beside RESULTS."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Print the tables only."),
    accelerator_type: str = typer.Option(None, "--accelerator-type", help="Keep only this accelerator type."),
    problem: str = typer.Option(None, "--problem", help="Keep only problem keys containing this text."),
    fmt: str = typer.Option("table", "--format", help="table, markdown or json."),
):
    """Tables per problem (best config, tuned TFLOP/s, baselines, speed-up, trials, time) and PNG plots."""
    from raytune_attn.tune.report import report

    r = report(results_path, plots=not no_plots, plots_dir=plots_dir, accelerator_type=accelerator_type,
               problem=problem, fmt=fmt)
    print(r.text)
    for path in r.plots:
        print(f"wrote {path}", file=sys.stderr if fmt == "json" else sys.stdout)


@app.command("doctor")
def doctor_cmd(
    address: str = typer.Option("auto", "--address", help="Ray cluster: auto, HOST:PORT or http://HOST:8265."),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help="MLflow URI (default: $MLFLOW_TRACKING_URI)."),
    json_out: bool = typer.Option(False, "--json", help="Print the findings as JSON."),
    timeout: float = typer.Option(5.0, "--timeout", help="Seconds to wait for the Ray cluster and MLflow server."),
):
    """Check this machine and its cluster: GPUs and vendor, Triton/torch/Ray/MLflow versions, Ray, MLflow."""
    from raytune_attn.tune import doctor

    info = doctor.collect(address=address, tracking_uri=tracking_uri, timeout=timeout)
    print(doctor.to_json(info) if json_out else doctor.format_table(info))


def _click_exceptions():
    """click's exception classes: typer >= 0.20 vendors click as `typer._click`; older typer uses click itself."""
    mods = []
    try:
        from typer._click import exceptions as vendored

        mods.append(vendored)
    except ImportError:
        pass
    try:
        from click import exceptions as upstream

        mods.append(upstream)
    except ImportError:
        pass
    from typer import exceptions as typer_exc

    def pick(name):
        return tuple(getattr(m, name) for m in mods if hasattr(m, name))

    return (pick("NoArgsIsHelpError"), pick("ClickException"),
            pick("Abort") + (getattr(typer_exc, "Abort", KeyboardInterrupt),))


def main(argv: list[str] | None = None) -> int:
    no_args, click_error, abort = _click_exceptions()
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="raytune-attn")
    except no_args as e:  # `raytune-attn` or `raytune-attn space` alone: help, as `ray` and `mlflow` do
        print(e.format_message())
        return 0
    except abort:
        print("aborted", file=sys.stderr)
        return 130
    except click_error as e:  # bad flags and values: one line naming the command and the flag, no usage block
        ctx = getattr(e, "ctx", None)
        where = ctx.command_path if ctx is not None else "raytune-attn"
        msg = " ".join(e.format_message().split())
        print(f"{where}: error: {msg} (see '{where} --help')", file=sys.stderr)
        return 2
    except (UsageError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError, FileExistsError,
            ValueError) as e:
        msg = " ".join(str(e).split())
        print(f"raytune-attn: error: {msg}", file=sys.stderr)
        return 2
    return rv if isinstance(rv, int) and not isinstance(rv, bool) else 0


if __name__ == "__main__":
    sys.exit(main())
