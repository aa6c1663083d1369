"""`raytune-attn tune`: the sweep driver (see docs/sweep.md).

    start or join Ray -> find the GPU nodes and their accelerator types -> one BenchActor per GPU, one
    CompileActor per node, one Broker per type -> one search per (accelerator type, problem) in a single Tune
    experiment (SweepSearcher + PerSearchScheduler) -> rows, MLflow runs and progress as trials finish -> re-measure
    the top configs of each search -> trials.parquet, best_configs.json, summary.json.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import math
import os
import sys
import time
from pathlib import Path

CPU_NOTE = ("NOTE: no GPU in this Ray cluster: the sweep runs the Triton interpreter on the CPU with tiny problems. "
            "Its timings are NOT representative of any GPU; it exercises the pipeline only.")
_RESUME_KEEP = ("address", "tracking_uri", "resume", "out", "name", "compile_workers", "num_cpus", "no_mlflow")


class SweepUsageError(ValueError):
    """A user's mistake in the sweep's flags: one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """A user's mistake in a flag: one line and exit code 2, as every other raytune-attn command."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="raytune-attn tune", description=(
        "Tune the flash-attention kernel with Ray Tune: one search per (accelerator type, problem), trials on "
        "long-lived GPU actors, early stopping over timing rungs. Without --address it starts a local Ray cluster."))
    ap.add_argument("--problems", help="problem-set YAML (or a name under pipelines/problems/); default: standard "
                    "with a GPU, cpu_smoke without")
    ap.add_argument("--searcher", default="gp", choices=("gp", "random", "grid"))
    ap.add_argument("--budget", type=int, default=None, help="trials per search (default 40; 6 without a GPU)")
    ap.add_argument("--out", help="output directory (default ./raytune-results/<name>/)")
    ap.add_argument("--address", default=None, help="join this Ray cluster ('auto': the running one); default: "
                    "start a local one")
    ap.add_argument("--name", help="sweep name (the MLflow experiment); default sweep-<UTC time>")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resume", action="store_true", help="finish an interrupted sweep (needs --name or --out)")
    ap.add_argument("--space", help="search-space YAML for every accelerator type (default: "
                    "search_spaces/<vendor>/<arch>.yaml of each type)")
    ap.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (default $MLFLOW_TRACKING_URI, else "
                    "sqlite:///mlflow.db)")
    ap.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    ap.add_argument("--compile-workers", type=int, default=None, help="compile processes per node (default: CPUs "
                    "- 1 with a GPU; 0 = compile in the benchmark actor)")
    ap.add_argument("--compile-timeout", type=float, default=120.0, help="seconds per compile; over it a config "
                    "is invalid")
    ap.add_argument("--no-early-stop", action="store_true", help="run every config through every rung (FIFO)")
    ap.add_argument("--no-baselines", action="store_true", help="do not measure SDPA's backends on each problem "
                    "(about 40 s of GPU time for the Llama set; best_configs.json then has no speed-ups)")
    ap.add_argument("--rungs", default="10,30,60", help="milliseconds of repetitions per timing rung")
    ap.add_argument("--reduction-factor", type=float, default=2.0, help="ASHA reduction factor")
    ap.add_argument("--top-k", type=int, default=4, help="configs per search re-measured before naming the winner")
    ap.add_argument("--final-rep-ms", type=float, default=200.0, help="repetitions (ms) of the final re-measure")
    ap.add_argument("--family-k", type=int, default=2, help="configs per search that the final re-measure adds: "
                    "the winners of the nearest problems with the same heads, head dim, mask and dtype (0: none)")
    ap.add_argument("--trials-per-gpu", type=int, default=None, help="trials in flight per GPU; their compiles run "
                    "ahead, so it bounds how far compilation gets ahead of the GPU (default 16 with a GPU, 3 without)")
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs of the embedded local cluster")
    ap.add_argument("--cpu-actors", type=int, default=1, help="benchmark actors without a GPU (interpreter)")
    return ap


def parse_args(argv: list[str]) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    try:
        args.rungs_ms = [float(x) for x in str(args.rungs).split(",") if x.strip()]
    except ValueError:
        raise SweepUsageError(f"--rungs must be comma-separated milliseconds, got {args.rungs!r}") from None
    if not args.rungs_ms or any(r <= 0 for r in args.rungs_ms):
        raise SweepUsageError(f"--rungs must be positive milliseconds, got {args.rungs!r}")
    if args.family_k < 0:
        raise SweepUsageError(f"--family-k must be >= 0, got {args.family_k}")
    if args.budget is not None and args.budget < 1:
        raise SweepUsageError(f"--budget must be >= 1, got {args.budget}")
    if args.resume and not (args.name or args.out):
        raise SweepUsageError("--resume needs --name or --out of the sweep to finish")
    return args


# ------------------------------------------------------------------------------------------------ cluster

def discover() -> dict[str, list[dict]]:
    """Accelerator type -> GPU nodes [{node_id, gpus, typed}] of the running cluster ({} without GPUs)."""
    import ray

    groups: dict[str, list[dict]] = {}
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = n.get("Resources", {})
        gpus = int(res.get("GPU", 0))
        if gpus <= 0:
            continue
        types = sorted(k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:"))
        accel = types[0] if types else "GPU"
        groups.setdefault(accel, []).append({"node_id": n["NodeID"], "gpus": gpus, "typed": bool(types)})
    return groups


def _hook_env() -> dict:
    return {k: v for k, v in os.environ.items() if k.startswith("RAYTUNE_ATTN_") or k == "TRITON_INTERPRET"}


def start_actors(groups: dict, args, cpu_mode: bool):
    """BenchActors (one per GPU), CompileActors (one per node) and a Broker per accelerator type."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from raytune_attn.tune.sweep import prefetch
    from raytune_attn.tune.sweep.actors import BenchActor, Broker, CompileActor
    from raytune_attn.tune.sweep.trial import broker_name

    env = _hook_env()
    if cpu_mode:
        env["TRITON_INTERPRET"] = "1"
    runtime_env = {"env_vars": env} if env else None
    actors: dict[str, list] = {}
    compilers: dict[str, list] = {}
    workers = args.compile_workers
    if workers is None:
        workers = 0 if cpu_mode else max(1, (os.cpu_count() or 2) - 1)
    node_compiler: dict[str, object] = {}
    actor_nodes: dict[str, list] = {}  # accelerator type -> node id of each of its benchmark actors
    for accel, nodes in groups.items():
        for node in nodes:
            strat = NodeAffinitySchedulingStrategy(node["node_id"], soft=False) if node["node_id"] else None
            if workers > 0 and node["node_id"] not in node_compiler:
                # Threads for every request in flight: trials' compiles, the start's prefetches and the searches'
                # speculative builds (at most 5 each: prefetch.Speculator) waiting for a worker.
                node_compiler[node["node_id"]] = CompileActor.options(
                    num_cpus=0, max_concurrency=workers + prefetch.MAX_QUEUED + 512, scheduling_strategy=strat,
                    runtime_env=runtime_env,
                ).remote(workers, args.compile_timeout)
            for _ in range(node["gpus"]):
                opts = {"num_cpus": 0, "num_gpus": 0 if cpu_mode else 1, "runtime_env": runtime_env}
                if node.get("typed"):
                    opts["resources"] = {f"accelerator_type:{accel}": 0.001}
                if strat is not None:
                    opts["scheduling_strategy"] = strat
                actors.setdefault(accel, []).append(BenchActor.options(**opts).remote(accel))
                compilers.setdefault(accel, []).append(node_compiler.get(node["node_id"]))
                actor_nodes.setdefault(accel, []).append(node["node_id"])
    brokers = {accel: Broker.options(name=broker_name(accel), lifetime=None, runtime_env=runtime_env).remote(
        actors[accel], compilers[accel], actor_nodes[accel]) for accel in actors}
    infos = {accel: ray.get([a.info.remote() for a in acts], timeout=600) for accel, acts in actors.items()}
    return actors, brokers, infos, node_compiler


# ------------------------------------------------------------------------------------------------ the sweep

def _space_for(args, info: dict, cpu_mode: bool):
    from raytune_attn.tune.search.space import load_space

    if args.space:
        return load_space(args.space)
    if cpu_mode or info.get("arch") == "interpreter":
        return load_space("cpu/interpreter")
    try:
        return load_space(f"{info['vendor']}/{info['arch']}")
    except FileNotFoundError:
        raise SweepUsageError(f"no search space for {info['vendor']} {info['arch']} ({info.get('name')}): "
                              "pass --space FILE") from None


def run(args) -> dict:
    import ray
    from ray import tune

    from raytune_attn import artifact, provenance
    from raytune_attn.kernels.resources import ARCHS
    from raytune_attn.tune import results
    from raytune_attn.tune.search import Prefilter, make_searcher
    from raytune_attn.tune.sweep import prefetch
    from raytune_attn.tune.sweep.callbacks import SweepState, row_from_result
    from raytune_attn.tune.sweep.problems import load_problems
    from raytune_attn.tune.sweep.progress import Progress, hms
    from raytune_attn.tune.sweep.searcher import PerSearchScheduler, Search, SweepSearcher, search_key, start_hosts
    from raytune_attn.tune.sweep.trial import run_trial

    name = args.name or ("sweep-" + _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S"))
    out = Path(args.out or Path("raytune-results") / name).resolve()
    saved = out / "sweep.json"
    if args.resume:
        if not saved.exists():
            raise SweepUsageError(f"--resume: {saved} does not exist (no sweep to finish there)")
        old = json.loads(saved.read_text())
        for k, v in old["args"].items():
            if k not in _RESUME_KEEP:
                setattr(args, k, v)
        name = old["name"]
    elif (out / "ray" / name).exists():
        raise SweepUsageError(f"{out} already holds sweep {name!r}: pass --resume to finish it, or another --name")
    out.mkdir(parents=True, exist_ok=True)
    if not args.resume:
        saved.write_text(json.dumps({"name": name, "args": {k: v for k, v in vars(args).items()}}, indent=1,
                                    default=str))
    namespace = f"raytune-attn-{name}"
    t0 = time.time()

    if args.address:
        ray.init(address=args.address, namespace=namespace, log_to_driver=False)
    else:
        ray.init(address="local", num_cpus=args.num_cpus, namespace=namespace, include_dashboard=False,
                 log_to_driver=False)  # "local": a new cluster even when RAY_ADDRESS is set
    actors = {}
    try:
        groups = discover()
        cpu_mode = not groups
        if cpu_mode:
            print(CPU_NOTE, flush=True)
            groups = {"CPU": [{"node_id": ray.get_runtime_context().get_node_id(), "gpus": args.cpu_actors,
                               "typed": False}]}
        problems = load_problems(args.problems or ("cpu_smoke" if cpu_mode else "standard"))
        # The search actors start now, beside the GPU actors, and get their searchers once the GPUs' architectures
        # are known: Tune's first trial then waits for neither.
        hosts = [] if args.resume else start_hosts(len(groups) * len(problems))
        actors, brokers, infos, compilers = start_actors(groups, args, cpu_mode)
        for accel, inf in infos.items():
            i = inf[0]
            print(f"[tune] {accel}: {len(inf)} benchmark actor(s), {i['vendor']} {i['arch']} {i['name']}", flush=True)
        budget = args.budget or (6 if cpu_mode else 40)
        per_gpu = args.trials_per_gpu or (3 if cpu_mode else 16)
        prov = {accel: provenance.collect(inf[0]) for accel, inf in infos.items()}
        rungs_ms = list(args.rungs_ms)
        spec = {"namespace": namespace, "rungs_ms": rungs_ms}
        searches = []
        for accel, inf in infos.items():
            space = _space_for(args, inf[0], cpu_mode)
            for n, p in enumerate(problems):
                arch = space.arch if space.arch in ARCHS else inf[0]["arch"]
                pre = Prefilter.for_problem(arch, p.head_dim, p.dtype) if arch in ARCHS else None
                # The GP starts from the kernel's default config for this head dim and sequence lengths (tiles no
                # taller than the sequences) and screens its neighbours (and, for short causal problems, a tile half
                # as tall).
                opts = ({"head_dim": p.head_dim, "seqlen_q": p.seqlen_q, "seqlen_k": p.seqlen_k, "causal": p.causal}
                        if args.searcher == "gp" else {})
                # One seed per problem (seed + its index in the set): with one seed, searches of one head dim
                # would ask for the same screening configs in the same order, so at the start every search waits
                # on the same slow compile while the GPU idles; their own orders let the GPU take whichever
                # config is built first.
                s = make_searcher(args.searcher, space, seed=args.seed + n, prefilter=pre, **opts)
                # A type's in-flight trials are shared by its searches: a GP search with many configs in flight
                # picks them against lies (constant liar), so each search gets its share, at least 2.
                share = max(2, -(-len(actors[accel]) * per_gpu // len(problems)))
                searches.append(Search(search_key(accel, p.key), accel, p.to_dict(), s,
                                       budget=min(budget, len(s.candidates)), max_concurrent=share))
        by_key = {s.key: s for s in searches}
        concurrency = sum(len(a) for a in actors.values()) * per_gpu

        tracker = None
        if not args.no_mlflow:
            from raytune_attn.tune.sweep.tracking_host import RemoteTracker
            from raytune_attn.tune.tracking_uri import resolve_tracking_uri

            tracker = RemoteTracker(name, resolve_tracking_uri(args.tracking_uri))  # as this driver sees it
            settings = {"searcher": args.searcher, "seed": args.seed, "budget": budget, "rungs_ms": args.rungs,
                        "early_stop": not args.no_early_stop, "space": args.space or "auto"}
            tracker.start_searches({s.key: (s.accel, s.problem, prov[s.accel], settings) for s in searches})
        searcher = None if args.resume else SweepSearcher(
            searches, spec, remote=True, speculators=prefetch.speculators(searches, compilers, groups), hosts=hosts)
        if searcher is not None:
            # While Tune starts: compile the searches' initial designs and their neighbourhoods on every node
            # (prefetch.py), and ask each search actor for its first suggestion.
            design, speculative = prefetch.submit(searches, compilers, groups)
            searcher.start()
            if design or speculative:
                print(f"[tune] compiling ahead: {design} initial-design configs, then {speculative} of their "
                      "neighbours while no trial waits for a compile", flush=True)
            # Tune starts once every search has its first suggestion, so that no first trial waits on a search
            # actor (run 11: ready 0.2 s after the GPU actors).
            t_ready = time.time()
            waiting = searcher.wait_ready(timeout_s=300)
            print(f"[tune] search actors ready in {time.time() - t_ready:.1f} s"
                  + (f" ({waiting} still starting)" if waiting else ""), flush=True)

        done_before = {}
        if args.resume and (out / "trials").exists():
            old = results.read_trials(out / "trials")
            old = old[old["kind"] == "trial"]
            for (accel, key), g in old.groupby(["accelerator_type", "problem_key"]):
                done_before[search_key(str(accel), key)] = g["trial_id"].nunique()
        progress = Progress({s.key: s.budget for s in searches}, done=done_before)
        meta = {"sweep_id": name, "sweep_name": name, "searcher": args.searcher, "seed": args.seed}
        state = SweepState(out_dir=out, n_rungs=len(rungs_ms), provenance=prov, meta=meta, progress=progress,
                           tracker=tracker, brokers=brokers, t0=t0,
                           config_of=searcher.config_of if searcher is not None else None)
        callback = state.register(name)

        # Tune's default per-trial CSV/JSON/TensorBoard loggers write files on every report: ours are the Parquet
        # rows and MLflow, so turn them off (they cost the Tune loop milliseconds per result).
        os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
        # Without those files the ResultGrid warns once per trial that it found no metrics file (hundreds of lines);
        # the rows it would read are ours already.
        logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
        trainable = tune.with_resources(run_trial, {"cpu": 0.01})
        storage = out / "ray"
        t_fit = time.time()
        if args.resume and tune.Tuner.can_restore(str(storage / name)):
            print(f"[tune] resuming {storage / name}", flush=True)
            tuner = tune.Tuner.restore(str(storage / name), trainable=trainable, resume_unfinished=True,
                                       resume_errored=False)
        else:
            searcher = searcher or SweepSearcher(searches, spec, remote=True)
            scheduler = (tune.schedulers.FIFOScheduler() if args.no_early_stop else
                         PerSearchScheduler(max_t=len(rungs_ms), reduction_factor=args.reduction_factor,
                                            keep_processes=concurrency))
            tuner = tune.Tuner(
                trainable,
                tune_config=tune.TuneConfig(search_alg=searcher, scheduler=scheduler, metric="tflops", mode="max",
                                            num_samples=searcher.total_budget, max_concurrent_trials=concurrency,
                                            reuse_actors=True),
                run_config=tune.RunConfig(name=name, storage_path=str(storage), callbacks=[callback], verbose=0,
                                          failure_config=tune.FailureConfig(max_failures=0)),
            )
        grid = tuner.fit()
        t_return = time.time()
        fit_wall = t_return - t_fit
        lanes = {accel: ray.get(b.stats.remote()) for accel, b in brokers.items()}
        firsts = [ray.get(b.firsts.remote()) for b in brokers.values()]
        # Tune's start-up: from fit() to the first trial reaching a broker, and to the first rung on a GPU.
        startup = {k: min((f[k] for f in firsts if f[k]), default=t_fit) - t_fit for k in ("assign", "rung")}
        at_fit = [x for acts in actors.values() for x in ray.get([a.stats.remote() for a in acts])]
        fit_busy = sum(x["busy_s"] - x["baseline_s"] for x in at_fit)  # (a resumed sweep's baselines ran before)

        # Rows: those written as trials finished, plus any finished trial whose row an interruption lost.
        rows = results.read_trials(out / "trials").to_dict("records") if (out / "trials").exists() else []
        have = {r["trial_id"] for r in rows}
        for res in grid:
            tid = (res.metrics or {}).get("trial_id")
            cfg = res.config or {}
            if tid and tid not in have and "search" in cfg and res.metrics:
                rows.append(row_from_result(tid, cfg, res.metrics, len(rungs_ms), prov[cfg["accel"]], meta))
        dedup = {}
        for r in rows:
            dedup[r["trial_id"]] = r
        rows = list(dedup.values())

        # Final re-measure of each search's top-k configs with more repetitions; the winner comes from these.
        final_rows = _remeasure(actors, by_key, rows, prov, meta, args)
        # Baselines (PyTorch SDPA's backends) last, once per search, spread over the type's actors. Measured before
        # the sweep, they slowed it: in mid-sweep two GPUs ran 11 configs/s after them and 16-19 without, one GPU
        # 8.3 against 10.7, each rung's host-side steps (launches, graph replays) taking 2-5x longer (run 10 call 5,
        # run 11). A process that ran them alone timed its rungs as fast after as before (baseline_pollution.py):
        # the cause is not that process state alone, and is not pinned down.
        base_rows = [] if args.no_baselines else _baselines(actors, searches, prov, name, resume=args.resume,
                                                            out=out)
        all_rows = rows + final_rows + base_rows
        trials_path = results.write_file(all_rows, out / "trials.parquet")
        df = results.read_trials(trials_path)
        art = _artifact(df, artifact)
        art_path = artifact.write(art, out / "best_configs.json")
        stats = {accel: ray.get([a.stats.remote() for a in acts]) for accel, acts in actors.items()}
        summary = _summary(name, out, df, searches, stats, lanes, fit_busy, fit_wall, time.time() - t0, cpu_mode,
                           args, hms)
        summary["tune_to_first_trial_s"], summary["tune_to_first_rung_s"] = startup["assign"], startup["rung"]
        summary["tune_phases_s"] = state.phases(t_fit, t_return)
        summary["trial_processes"] = len(state.pids)  # distinct trial processes that reported (actor reuse)
        summary["trials_deferred"] = searcher.n_deferred if searcher is not None else None
        summary["state_saves_s"] = [round(x, 3) for x in searcher.saves_s] if searcher is not None else None
        summary["rungs_capped"] = sum(f["capped"] for f in firsts)
        summary["rungs_requeued"] = sum(f.get("requeued", 0) for f in firsts)  # queued behind a crash, run again
        summary["actor_info"] = infos
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        if tracker is not None:
            for s in searches:
                _finish_tracking(tracker, s, df, art_path, results)
            tracker.drain()  # every child run and parent run written before the command returns
        print(format_summary(summary), flush=True)
        print(f"[tune] wrote {out / 'trials.parquet'}, {art_path}, {out / 'summary.json'}", flush=True)
        if cpu_mode:
            print(CPU_NOTE, flush=True)
        expected = sum(s.budget for s in searches)
        if summary["trials"] < expected:
            summary["incomplete"] = True
            print(f"[tune] sweep incomplete: {summary['trials']} of {expected} trials finished (interrupted?); "
                  f"finish it with: raytune-attn tune --resume --out {out}", flush=True)
        return summary
    finally:
        for c in (locals().get("compilers") or {}).values():
            try:
                ray.get(c.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass
        if not args.address:
            ray.shutdown()


def _problem(d: dict):
    from raytune_attn.problem import Problem

    return Problem.from_dict(d)


def _actor_per_search(actors: dict, searches) -> list:
    """Each search's benchmark actor for its once-per-search work (baselines, the final re-measure): the searches
    of an accelerator type in turn over that type's actors, so that the work spreads over its GPUs."""
    counters: dict[str, int] = {}
    out = []
    for s in searches:
        i = counters.get(s.accel, 0)
        counters[s.accel] = i + 1
        out.append(actors[s.accel][i % len(actors[s.accel])])
    return out


def _baselines(actors, searches, prov, name, *, resume: bool, out: Path) -> list[dict]:
    import ray

    from raytune_attn.tune import results

    if resume and (out / "trials.parquet").exists():
        df = results.read_trials(out / "trials.parquet")
        return df[df["kind"] == "baseline"].to_dict("records")
    acts = _actor_per_search(actors, searches)
    futures = [(s, act.baselines.remote(s.problem)) for s, act in zip(searches, acts, strict=True)]
    rows = []
    for s, f in futures:
        try:
            got = ray.get(f)
        except Exception as e:  # noqa: BLE001 - a baseline that fails is reported, the sweep goes on
            print(f"[tune] warning: baselines of {s.key} failed: {e}", flush=True)
            continue
        for impl, m in got.items():
            rows.append(results.baseline_row(s.problem, impl, m, prov[s.accel], sweep_id=name, sweep_name=name))
    return rows


def _family(problem: dict) -> tuple:
    """Problems whose kernels differ only in sizes (batch, sequence lengths): one family shares good configs."""
    return tuple(problem.get(k) for k in ("hq", "hkv", "head_dim", "causal", "dtype", "varlen"))


def _nearest_siblings(s, searches) -> list:
    """The other searches of s's accelerator type and problem family, nearest sequence length first (then nearest
    token count)."""
    def dist(o) -> tuple:
        q, oq = s.problem, o.problem
        return (abs(math.log2(q["seqlen_q"] / oq["seqlen_q"])),
                abs(math.log2(q["batch"] * q["seqlen_q"] / (oq["batch"] * oq["seqlen_q"]))), o.key)
    same = [o for o in searches if o is not s and o.accel == s.accel and _family(o.problem) == _family(s.problem)]
    return sorted(same, key=dist)


def _remeasure(actors, by_key, rows, prov, meta, args) -> list[dict]:
    """Each search's top `--top-k` configs by their rungs, plus the winners of its `--family-k` nearest sibling
    searches that it did not measure, re-measured with `--final-rep-ms` of runs on one GPU; the winner comes from
    these. Searches of one family climb to the same few configs, but a budget of 24-30 trials over the Hopper space
    does not always get there: in run 10's bf16 grid, D=256 full S=16384 stopped at 440 TFLOP/s on 64x32 tiles
    while S=8192 had found 531 on 128x64 with 8 warps, late in both searches, too late to pass it on during the
    sweep. Their binaries are shared (sizes are not specialized on), so the extra candidates cost runs, not
    compiles."""
    import ray

    from raytune_attn.tune import results

    n_rungs = len(args.rungs_ms)
    jobs = []
    searches = list(by_key.values())
    cfg_key = lambda r: json.dumps(results.row_config(r), sort_keys=True)  # noqa: E731
    ranked, measured = {}, {}
    for s in searches:
        key = _problem(s.problem).key
        own = [r for r in rows
               if r["kind"] == "trial" and r["problem_key"] == key and str(r["accelerator_type"]) == s.accel]
        measured[s.key] = {cfg_key(r) for r in own}
        # Candidates include trials that early stopping ended: a rung of a few runs is noisy, and a config stopped
        # on one unlucky rung may still be the best; the longer re-measure decides.
        ranked[s.key] = sorted((r for r in own if r["status"] in ("ok", "stopped") and r.get("tflops")),
                               key=lambda r: -float(r["tflops"]))
    for n, (s, act) in enumerate(zip(searches, _actor_per_search(actors, searches), strict=True)):
        family = []
        for o in _nearest_siblings(s, searches)[: args.family_k]:
            win = ranked[o.key][0] if ranked[o.key] else None
            if win is not None and cfg_key(win) not in measured[s.key] | {cfg_key(r) for _, r in family}:
                family.append((o, win))
        # One search's candidates are all re-measured on the same GPU: the winner is picked by comparing their
        # latencies, and two GPUs of one type differ by a few percent (clocks, a neighbour's heat), as much as
        # the candidates do. Searches, not candidates, are spread over the GPUs.
        for origin, r in [(None, r) for r in ranked[s.key][: args.top_k]] + family:
            cfg = results.row_config(r)
            jobs.append((s, r, origin, n, cfg, act.run.remote(s.problem, cfg, n_rungs + 1, args.final_rep_ms, True)))
    out = []
    for s, r, origin, n, cfg, f in jobs:
        try:
            m = ray.get(f)
        except Exception as e:  # noqa: BLE001 - the actor died: the config keeps its rung results
            m = {"status": "error", "reason": f"final re-measure failed: {type(e).__name__}"}
        if m.get("status") != "ok":
            continue
        metrics = {"status": "ok", "reason": "final re-measure", "rung": n_rungs + 1, "tflops": m["tflops"],
                   "latency_ms": m["latency_ms"], "bench_s": m.get("bench_s"), "compile_s": r.get("compile_s"),
                   "timestamp": time.time(), "final_of": r["trial_id"], "gpu": m.get("gpu")}
        tid = f"{r['trial_id']}-final"
        if origin is not None:  # a sibling's winner: its trial id names the config, this search's index the row
            metrics.update(reason=f"final re-measure of the winner of {origin.key}", family_of=origin.key)
            tid = f"{r['trial_id']}-for{n}-final"
        out.append(results.trial_row(s.problem, cfg, metrics, prov[s.accel], trial_id=tid, **meta))
    return out


def _artifact(df, artifact):
    """Winners from the final re-measure where a search has one; n_trials counts the search's real trials."""
    import pandas as pd

    final = df["trial_id"].astype(str).str.endswith("-final")
    parts = []
    for (_, _), g in df[df["kind"] == "trial"].groupby(["accelerator_type", "problem_key"]):
        f = g[g["trial_id"].astype(str).str.endswith("-final")]
        parts.append(f if len(f) else g)
    pick = pd.concat(parts + [df[df["kind"] == "baseline"]]) if parts else df
    art = artifact.build(pick)
    counts = df[(df["kind"] == "trial") & ~final].groupby(["accelerator_type", "problem_key"]).size()
    for e in art["entries"]:
        e["n_trials"] = int(counts.get((e["accelerator_type"], e["problem_key"]), e["n_trials"]))
    art.pop("checksum", None)
    art["checksum"] = artifact.checksum(art)
    return art


def _summary(name, out, df, searches, stats, lanes, fit_busy, fit_wall, wall, cpu_mode, args, hms) -> dict:
    from raytune_attn.tune import results

    trials = df[(df["kind"] == "trial") & ~df["trial_id"].astype(str).str.endswith("-final")]
    per = []
    for s in searches:
        pk = _problem(s.problem).key
        g = trials[(trials["accelerator_type"] == s.accel) & (trials["problem_key"] == pk)]
        fin = df[(df["kind"] == "trial") & (df["accelerator_type"] == s.accel) & (df["problem_key"] == pk)
                 & df["trial_id"].astype(str).str.endswith("-final")]
        pool = fin if len(fin) else g[g["status"] == "ok"]
        best = pool.loc[pool["tflops"].idxmax()] if len(pool) and pool["tflops"].notna().any() else None
        base = df[(df["kind"] == "baseline") & (df["accelerator_type"] == s.accel) & (df["problem_key"] == pk)]
        per.append({
            "search": s.key, "accelerator_type": s.accel, "problem_key": pk, "trials": int(len(g)),
            **{st: int((g["status"] == st).sum()) for st in ("ok", "stopped", "invalid", "error")},
            "best_tflops": None if best is None else float(best["tflops"]),
            "best_latency_ms": None if best is None else float(best["latency_ms"]),
            "best_config": None if best is None else results.row_config(best.to_dict()),
            "baselines": {r["impl"]: float(r["tflops"]) for r in base.to_dict("records") if r["tflops"] == r["tflops"]},
            "compile_s_sum": float(g["compile_s"].fillna(0).sum()),
            "bench_s_sum": float(g["bench_s"].fillna(0).sum()),
        })
    n_act = sum(len(v) for v in stats.values())
    busy = sum(x["busy_s"] for v in stats.values() for x in v)
    baseline = sum(x.get("baseline_s", 0.0) for v in stats.values() for x in v)
    cwait = sum(x["compile_wait_s"] for v in stats.values() for x in v)
    n_trials = max(1, int(len(trials)))
    gpu_time = fit_wall * max(1, n_act)
    seen = {k: sum(x[k] for v in lanes.values() for x in v) for k in ("run", "compile", "pipeline")}
    return {
        "name": name, "out": str(out), "cpu_mode": cpu_mode,
        "timings_representative": not cpu_mode,
        "searcher": args.searcher, "budget_per_search": max((s.budget for s in searches), default=0),
        "early_stop": not args.no_early_stop, "rungs_ms": args.rungs_ms,
        "wall_s": wall, "tune_wall_s": fit_wall, "wall": hms(wall), "benchmark_actors": n_act,
        "trials": int(len(trials)), "gpu_busy_s": busy, "baseline_busy_s": baseline,
        "search_gpu_s": busy - baseline,  # checks, rungs and final re-measures: what early stopping saves on
        # Of the Tune run's wall time x GPUs, the share the GPUs spent running the search's kernels.
        "gpu_busy_fraction": fit_busy / gpu_time if gpu_time else None, "gpu_busy_in_tune_s": fit_busy,
        "compile_wait_s": cwait,
        # Idle GPU seconds while no trial of it was compiling (Tune starting/continuing trials, lease hand-offs),
        # per trial: the pipeline's own cost. Idle seconds while trials were still compiling are compile-bound.
        "overhead_per_trial_s": seen["pipeline"] / n_trials, "idle_compile_bound_s": seen["compile"],
        "idle_pipeline_s": seen["pipeline"], "lease_run_s": seen["run"],
        "configs_per_s": n_trials / fit_wall if fit_wall else None,
        "bench_s_sum": float(trials["bench_s"].fillna(0).sum()),
        "actors": stats, "searches": per,
    }


def _finish_tracking(tracker, s, df, art_path, results):
    pk = _problem(s.problem).key
    g = df[(df["accelerator_type"] == s.accel) & (df["problem_key"] == pk)]
    t = g[(g["kind"] == "trial") & (g["status"] == "ok")]
    fin = t[t["trial_id"].astype(str).str.endswith("-final")]
    pool = fin if len(fin) else t
    best = None
    if len(pool) and pool["tflops"].notna().any():
        b = pool.loc[pool["tflops"].idxmax()]
        best = {"config": results.row_config(b.to_dict()), "tflops": float(b["tflops"]),
                "latency_ms": float(b["latency_ms"]), "trial_id": str(b["trial_id"])}
    base = {r["impl"]: r["tflops"] for r in g[g["kind"] == "baseline"].to_dict("records")}
    tracker.finish_search(s.key, best, base, g, art_path)  # its failure is a warning: the files are written


def format_summary(summary: dict) -> str:
    lines = [f"sweep {summary['name']}: {summary['trials']} trials in {summary['wall']} "
             f"(tune {summary['tune_wall_s']:.1f} s, {summary['configs_per_s'] or 0:.2f} configs/s) on "
             f"{summary['benchmark_actors']} benchmark actor(s); GPU busy fraction {summary['gpu_busy_fraction']:.2f}; "
             f"GPU idle waiting on compiles {summary['idle_compile_bound_s']:.1f} s; overhead per trial "
             f"{summary['overhead_per_trial_s']:.3f} s; first rung {summary.get('tune_to_first_rung_s') or 0:.1f} s "
             f"after Tune started; early stopping {'on' if summary['early_stop'] else 'off'}"]
    for s in summary["searches"]:
        best = "no valid config" if s["best_tflops"] is None else \
            f"best {s['best_tflops']:.4g} TFLOP/s ({s['best_latency_ms']:.4g} ms) {json.dumps(s['best_config'])}"
        base = ", ".join(f"{k} {v:.4g}" for k, v in s["baselines"].items()) or "none"
        lines.append(f"  {s['search']}: {s['trials']} trials (ok {s['ok']}, stopped {s['stopped']}, invalid "
                     f"{s['invalid']}, error {s['error']}); {best}; baselines: {base}")
    if not summary["timings_representative"]:
        lines.append("  (Triton interpreter on CPU: timings are not representative)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`raytune-attn tune ARGS` (also `python -m raytune_attn.tune.sweep ARGS`, `pipelines/sweep.py`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parse_args(argv)
        summary = run(args)
        if summary.get("incomplete"):
            return 3
    except SystemExit as e:  # argparse: --help (0) or a bad flag (2), already printed
        return int(e.code or 0)
    except (ValueError, FileNotFoundError) as e:
        print(f"raytune-attn tune: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("raytune-attn tune: interrupted; finish it with --resume", file=sys.stderr)
        return 130
    return 0

