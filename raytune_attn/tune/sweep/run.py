"""The sweep's second phase, on Ray: one search per (accelerator type, problem) in a single Tune experiment
(SweepSearcher + PerSearchScheduler), rows, MLflow runs and progress as trials finish."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from raytune_attn.tune.sweep.cluster import Cluster, actor_stats
from raytune_attn.tune.sweep.config import SweepUsageError
from raytune_attn.tune.sweep.plan import Plan

log = logging.getLogger(__name__)


@dataclass
class Sweep:
    """What the run phase built: the searches, their searcher, MLflow, and the state Tune's callback fills."""

    plan: Plan
    cluster: Cluster
    searches: list
    searcher: object | None
    tracker: object | None
    state: object
    t0: float


@dataclass(frozen=True)
class Fit:
    """Tune's run: its results, its wall time and what the brokers and actors saw during it."""

    grid: object
    t_fit: float
    t_return: float
    lanes: dict  # accelerator type -> each benchmark actor's lease times (Broker.stats)
    firsts: list  # each broker's first assignment and rung, capped and requeued rungs (Broker.firsts)
    busy_s: float  # benchmark actors' busy seconds in the fit, baselines left out

    @property
    def wall_s(self) -> float:
        return self.t_return - self.t_fit


# Trials per search when --budget is not given. Without the space file's priors a search needs more of them to come
# within 2% of the best as often (docs/search.md, "Budget without priors").
_BUDGET = 40
_BUDGET_NO_PRIORS = 75
_BUDGET_CPU = 6


def budget(plan: Plan, cpu_mode: bool) -> int:
    if plan.config.budget:
        return plan.config.budget
    if cpu_mode:
        return _BUDGET_CPU
    return _BUDGET_NO_PRIORS if plan.config.no_priors else _BUDGET


def trials_per_gpu(plan: Plan, cpu_mode: bool) -> int:
    return plan.config.trials_per_gpu or (3 if cpu_mode else 16)


def start_searches(plan: Plan, cluster: Cluster, t0: float) -> Sweep:
    """Every search, its searcher started (its first suggestion computed), MLflow's parent runs, the progress.
    SweepUsageError before any of them when a type's actors run different software, or a resume's rows another
    (stack.py)."""
    from raytune_attn.tune.sweep import stack

    prov = {accel: stack.type_provenance(accel, inf) for accel, inf in cluster.infos.items()}
    if plan.config.resume:
        stack.check_resumed(plan.prior.done, prov, plan.out)
    searches = [s for accel, inf in cluster.infos.items() for s in _searches_of(plan, cluster, accel, inf[0])]
    tracker = _start_tracking(plan, searches, prov, budget(plan, cluster.cpu_mode))
    searcher = _start_searcher(plan, cluster, searches)
    state = _sweep_state(plan, searches, prov, tracker, cluster.brokers, searcher, t0)
    return Sweep(plan, cluster, searches, searcher, tracker, state, t0)


def _space_for(plan: Plan, info: dict, cpu_mode: bool, problem=None):
    """--space, else the accelerator's shipped space. A paged problem (`kind` "paged") tunes the paged kernel: a
    --space of its knobs (NUM_SEGMENTS), else the space file beside its arch's, `<arch>_paged.yaml`."""
    from raytune_attn.tune.search.space import load_space

    suffix = "_paged" if getattr(problem, "kind", None) == "paged" else ""
    if plan.space is not None and ("NUM_SEGMENTS" in plan.space.names) == bool(suffix):
        return plan.space
    if cpu_mode or info.get("arch") == "interpreter":
        return load_space("cpu/interpreter" + suffix)
    try:
        return load_space(f"{info['vendor']}/{info['arch']}{suffix}")
    except FileNotFoundError:
        raise SweepUsageError(f"no search space for {info['vendor']} {info['arch']} ({info.get('name')}): "
                              "pass --space FILE") from None


def _searches_of(plan: Plan, cluster: Cluster, accel: str, info: dict) -> list:
    """One search per problem on this accelerator type, each with its share of the type's trials in flight."""
    from raytune_attn.tune.sweep.resume import relate_done, replay
    from raytune_attn.tune.sweep.searcher import Search, search_key

    problems = plan.problems_for(cluster.cpu_mode)
    # A type's in-flight trials are shared by its searches: a GP search with many configs in flight picks them
    # against lies (constant liar), so each search gets its share, at least 2.
    share = max(2, -(-len(cluster.actors[accel]) * trials_per_gpu(plan, cluster.cpu_mode) // len(problems)))
    out = []
    spaces: dict = {}  # problem kind -> its space, each file read once
    for n, p in enumerate(problems):
        kind = getattr(p, "kind", None)
        space = spaces[kind] = spaces.get(kind) or _space_for(plan, info, cluster.cpu_mode, p)
        s = _searcher(plan, space, info, p, n)
        key = search_key(accel, p.key)
        done = plan.prior.done.get(key, [])
        replay(s, done)  # a resume: what its earlier drivers measured, each counted once (resume.py)
        out.append(Search(key, accel, p.to_dict(), s, budget=min(budget(plan, cluster.cpu_mode), len(s.candidates)),
                          max_concurrent=share, suggested=len(done), completed=len(done)))
    if plan.config.share_results:
        relate_done(out, plan.prior.done)  # a resume: what the other problems' searches measured before
    return out


def _searcher(plan: Plan, space, info: dict, p, n: int):
    """The inner searcher of problem `p`, the `n`-th of the set.

    One seed per problem (seed + its index in the set): with one seed, searches of one head dim would ask for the
    same screening configs in the same order, so at the start every search waits on the same slow compile while
    the GPU idles; their own orders let the GPU take whichever config is built first."""
    from raytune_attn.kernels.resources import ARCHS
    from raytune_attn.tune.search import make_searcher
    from raytune_attn.validation import Screen

    arch = space.arch if space.arch in ARCHS else info["arch"]
    # The one validation screens the candidates: knob rules, shared memory on this arch, backend support.
    pre = Screen.for_problem(arch, p.head_dim, p.dtype, p.gqa_group) if arch in ARCHS else None
    # The GP reads the problem (head dim, sequence lengths, mask) for where it starts and what it screens.
    return make_searcher(plan.config.searcher, space, seed=plan.config.seed + n, prefilter=pre, problem=p,
                         **searcher_options(plan, space, p))


def searcher_options(plan: Plan, space, problem=None) -> dict:
    """The searcher's options from the flags: the GP's priors on or off, and earlier results (--warm-start) as the
    GP's model prior or, for the other searchers, the configs they start from (warm.warm_options), each earlier
    problem weighted by its likeness to `problem` (warm.group_weight)."""
    from raytune_attn.tune.search.warm import prior_scores, warm_options

    opts = {"priors": not plan.config.no_priors} if plan.config.searcher == "gp" else {}
    if plan.warm is not None:
        opts.update(warm_options(plan.config.searcher, prior_scores(plan.warm, space.names, problem=problem)))
    return opts


def _start_tracking(plan: Plan, searches: list, prov: dict, trials: int):
    """MLflow's parent run of each search (a store that refuses stops the sweep here), or None (--no-mlflow)."""
    if plan.tracking_uri is None:
        return None
    from raytune_attn.tune.sweep.tracking_host import RemoteTracker

    c, attempt = plan.config, plan.prior.attempt
    tracker = RemoteTracker(plan.name, plan.tracking_uri)
    if plan.prior.parents:  # the runs of the drivers this one replaces (resume.py): still RUNNING if killed
        ended = tracker.end_runs(list(plan.prior.parents), "KILLED",
                                 reason=f"its driver ended before the sweep did; resumed as attempt {attempt}")
        if ended:
            log.info("ended %d MLflow run(s) of the interrupted driver as KILLED", len(ended))
    settings = {"searcher": c.searcher, "seed": c.seed, "budget": trials, "attempt": attempt,
                "rungs_ms": c.rungs, "early_stop": not c.no_early_stop, "space": c.space or "auto"}
    runs = tracker.start_searches({s.key: (s.accel, s.problem, prov[s.accel], settings) for s in searches})
    plan.ledger.append({"kind": "parents", "attempt": attempt, "runs": runs})
    return tracker


def _start_searcher(plan: Plan, cluster: Cluster, searches: list):
    """The sweep's searcher, each search in its actor with its first suggestion computed; the initial designs and
    their neighbourhoods compiling on every node meanwhile (prefetch.py)."""
    from raytune_attn.tune.sweep import prefetch
    from raytune_attn.tune.sweep.searcher import SweepSearcher

    searcher = SweepSearcher(searches, _spec(plan), remote=True, hosts=cluster.hosts,
                             speculators=prefetch.speculators(searches, cluster.compilers, cluster.groups),
                             ledger=plan.ledger, attempt=plan.prior.attempt, share_results=plan.config.share_results)
    design, speculative = prefetch.submit(searches, cluster.compilers, cluster.groups)
    searcher.start()
    if design or speculative:
        log.info("compiling ahead: %d initial-design configs, then %d of their neighbours while no trial waits "
                 "for a compile", design, speculative)
    # Tune starts once every search has its first suggestion, so that no first trial waits on a search actor.
    t_ready = time.time()
    waiting = searcher.wait_ready(timeout_s=300)
    log.info("search actors ready in %.1f s%s", time.time() - t_ready,
             f" ({waiting} still starting)" if waiting else "")
    return searcher


def _spec(plan: Plan) -> dict:
    """What every trial reads from its config's "sweep" entry."""
    return {"namespace": plan.namespace, "rungs_ms": list(plan.config.rungs_ms)}


def meta(plan: Plan) -> dict:
    """Columns every row of this sweep carries."""
    return {"sweep_id": plan.name, "sweep_name": plan.name, "searcher": plan.config.searcher, "seed": plan.config.seed}


def _sweep_state(plan: Plan, searches, prov, tracker, brokers, searcher, t0: float):
    from raytune_attn.tune.sweep.callbacks import SweepState
    from raytune_attn.tune.sweep.progress import Progress

    progress = Progress({s.key: s.budget for s in searches}, done={s.key: s.completed for s in searches})
    return SweepState(out_dir=plan.out, n_rungs=len(plan.config.rungs_ms), provenance=prov, meta=meta(plan),
                      progress=progress, tracker=tracker, brokers=brokers, t0=t0, config_of=searcher.config_of)


def remaining(sweep: Sweep) -> int:
    """Trials still to run: each search's budget less what it ran (a resume: its earlier drivers too)."""
    return sum(max(0, s.budget - s.suggested) for s in sweep.searches if not s.finished)


def _tuner(sweep: Sweep, callback):
    """This driver's Tune experiment: a new one, also for a resume (resume.py says why), over the trials left."""
    from ray import tune

    from raytune_attn.tune.sweep.searcher import PerSearchScheduler
    from raytune_attn.tune.sweep.trial import run_trial

    plan, c = sweep.plan, sweep.plan.config
    trainable = tune.with_resources(run_trial, {"cpu": 0.01})
    concurrency = sweep.cluster.n_actors * trials_per_gpu(plan, sweep.cluster.cpu_mode)
    scheduler = (tune.schedulers.FIFOScheduler() if c.no_early_stop else
                 PerSearchScheduler(max_t=len(c.rungs_ms), reduction_factor=c.reduction_factor,
                                    keep_processes=concurrency))
    return tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(search_alg=sweep.searcher, scheduler=scheduler, metric="tflops", mode="max",
                                    num_samples=remaining(sweep), max_concurrent_trials=concurrency,
                                    reuse_actors=True),
        run_config=tune.RunConfig(name=plan.tune_name, storage_path=str(plan.out / "ray"), callbacks=[callback],
                                  verbose=0, failure_config=tune.FailureConfig(max_failures=0)),
    )


def run_tune(sweep: Sweep) -> Fit:
    """Tune's run to its end (or an interruption), and what the brokers and benchmark actors saw of it."""
    import ray

    # Tune's default per-trial CSV/JSON/TensorBoard loggers write files on every report: ours are the Parquet rows
    # and MLflow, so turn them off (they cost the Tune loop milliseconds per result).
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    # Without those files the ResultGrid warns once per trial that it found no metrics file; the rows it would
    # read are ours already.
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    # Tune pickles its callbacks with the experiment: this one only names the live state (callbacks.py).
    t_fit = time.time()
    if remaining(sweep):
        grid = _tuner(sweep, sweep.state.register(sweep.plan.name)).fit()
    else:
        grid = []  # a resume of a sweep whose trials all ran: only the last phase is left
        log.info("every search has run its budget: finishing the sweep")
    t_return = time.time()
    brokers = sweep.cluster.brokers.values()
    at_fit = [x for acts in sweep.cluster.actors.values() for x in actor_stats(acts)]
    return Fit(grid=grid, t_fit=t_fit, t_return=t_return,
               lanes={accel: ray.get(b.stats.remote()) for accel, b in sweep.cluster.brokers.items()},
               firsts=[ray.get(b.firsts.remote()) for b in brokers],
               busy_s=sum(x["busy_s"] - x["baseline_s"] for x in at_fit))  # a resume's baselines ran before
