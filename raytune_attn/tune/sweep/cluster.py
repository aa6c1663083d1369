"""The sweep's Ray side: the session (start or join a cluster), its GPU nodes by accelerator type, and the
long-lived actors: one BenchActor per GPU (bench_actor.py), one CompileActor per node (compile_actor.py), one
Broker per type (broker.py)."""

from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from raytune_attn.tune.sweep.config import SweepUsageError
from raytune_attn.tune.sweep.plan import Plan

log = logging.getLogger(__name__)
CPU_NOTE = ("no GPU in this Ray cluster: the sweep runs the Triton interpreter on the CPU with tiny problems. "
            "Its timings are NOT representative of any GPU; it exercises the pipeline only.")


@dataclass
class Cluster:
    """What the sweep runs on. `compilers` (node id -> CompileActor) are closed when the session ends."""

    groups: dict  # accelerator type -> GPU nodes [{node_id, gpus, typed}]
    cpu_mode: bool  # no GPU in the cluster: benchmark actors run the Triton interpreter
    actors: dict = field(default_factory=dict)  # accelerator type -> BenchActors
    brokers: dict = field(default_factory=dict)  # accelerator type -> Broker
    infos: dict = field(default_factory=dict)  # accelerator type -> each actor's device info
    compilers: dict = field(default_factory=dict)
    hosts: list = field(default_factory=list)  # search actors started ahead (searcher.start_hosts)

    @property
    def n_actors(self) -> int:
        return sum(len(a) for a in self.actors.values())


# What an actor that cannot answer contributes to the sweep's accounting (summary.py reads these counters).
_NO_STATS = {"busy_s": 0.0, "baseline_s": 0.0, "compile_wait_s": 0.0, "calls": 0}


def actor_stats(actors: list, timeout_s: float = 120.0) -> list[dict]:
    """Each benchmark actor's counters (`stats`), in the actors' order. An actor that a config killed answers with
    ActorUnavailableError while Ray restarts it: it is waited for (its counters then start from the restart). One
    that is dead, or not back within `timeout_s` in all, gets zero counters and `unavailable`: a crash among the
    last rungs must not end the sweep before its files are written."""
    import ray

    deadline = time.monotonic() + timeout_s
    out = []
    for a in actors:
        while True:
            try:
                out.append(ray.get(a.stats.remote(), timeout=max(1.0, deadline - time.monotonic())))
                break
            except ray.exceptions.ActorUnavailableError:
                if time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                out.append({**_NO_STATS, "unavailable": "still restarting"})
                break
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as e:
                out.append({**_NO_STATS, "unavailable": type(e).__name__})
                break
    return out


@contextmanager
def ray_session(plan: Plan):
    """Ray for the sweep: join `--address`, else a new local cluster ("local": even when RAY_ADDRESS is set), shut
    down at the end; yields a list that the sweep appends its Cluster to, whose compile actors are closed then."""
    import ray

    c = plan.config
    if c.address:
        try:
            ray.init(address=c.address, namespace=plan.namespace, log_to_driver=False)
        except ConnectionError as e:  # a port that accepts but is not Ray's (the plan checked that one answers)
            raise SweepUsageError(f"--address {c.address}: {e}") from None
    else:
        ray.init(address="local", num_cpus=c.num_cpus, namespace=plan.namespace, include_dashboard=False,
                 log_to_driver=False)
    started: list[Cluster] = []
    try:
        yield started
    finally:
        for compiler in (x for cl in started for x in cl.compilers.values()):
            try:
                ray.get(compiler.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - best effort at shutdown
                log.debug("a compile actor did not close", exc_info=True)
        if not c.address:
            ray.shutdown()


def start_cluster(plan: Plan, session: list) -> Cluster:
    """Find the GPU nodes (none: benchmark actors on the CPU), start the search actors and then the GPU actors."""
    import ray

    from raytune_attn.tune.sweep.searcher import start_hosts

    groups = discover()
    cluster = Cluster(groups=groups, cpu_mode=not groups)
    session.append(cluster)
    if cluster.cpu_mode:
        log.warning(CPU_NOTE)
        cluster.groups = {"CPU": [{"node_id": ray.get_runtime_context().get_node_id(),
                                   "gpus": plan.config.cpu_actors, "typed": False}]}
    # The search actors start now, beside the GPU actors, and get their searchers once the GPUs' architectures are
    # known: Tune's first trial then waits for neither.
    n_searches = len(cluster.groups) * len(plan.problems_for(cluster.cpu_mode))
    cluster.hosts = start_hosts(n_searches)
    start_actors(cluster, plan)
    for accel, inf in cluster.infos.items():
        log.info("%s: %d benchmark actor(s), %s %s %s", accel, len(inf), inf[0]["vendor"], inf[0]["arch"],
                 inf[0]["name"])
    return cluster


def discover() -> dict[str, list[dict]]:
    """Accelerator type -> GPU nodes [{node_id, gpus, typed}] of the running cluster ({} without GPUs)."""
    import ray

    groups: dict[str, list[dict]] = {}
    for n in ray.nodes():
        res = n.get("Resources", {})
        gpus = int(res.get("GPU", 0))
        if not n.get("Alive") or gpus <= 0:
            continue
        types = sorted(k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:"))
        accel = types[0] if types else "GPU"
        groups.setdefault(accel, []).append({"node_id": n["NodeID"], "gpus": gpus, "typed": bool(types)})
    return groups


def _runtime_env(cpu_mode: bool) -> dict | None:
    """The driver's test and benchmark hooks (RAYTUNE_ATTN_*), and the interpreter without a GPU, in every actor."""
    env = {k: v for k, v in os.environ.items() if k.startswith("RAYTUNE_ATTN_") or k == "TRITON_INTERPRET"}
    if cpu_mode:
        env["TRITON_INTERPRET"] = "1"
    return {"env_vars": env} if env else None


def _compile_workers(plan: Plan, cpu_mode: bool) -> int:
    workers = plan.config.compile_workers
    if workers is None:
        workers = 0 if cpu_mode else max(1, (os.cpu_count() or 2) - 1)
    return workers


def start_actors(cluster: Cluster, plan: Plan) -> None:
    """BenchActors (one per GPU), CompileActors (one per node, with compile workers) and a Broker per type."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from raytune_attn.tune.sweep.broker import Broker
    from raytune_attn.tune.sweep.trial import broker_name

    runtime_env = _runtime_env(cluster.cpu_mode)
    workers = _compile_workers(plan, cluster.cpu_mode)
    compilers: dict[str, list] = {}
    nodes_of: dict[str, list] = {}  # accelerator type -> node id of each of its benchmark actors
    for accel, nodes in cluster.groups.items():
        for node in nodes:
            strat = NodeAffinitySchedulingStrategy(node["node_id"], soft=False) if node["node_id"] else None
            if workers > 0 and node["node_id"] not in cluster.compilers:
                cluster.compilers[node["node_id"]] = _compile_actor(workers, plan, strat, runtime_env)
            for _ in range(node["gpus"]):
                cluster.actors.setdefault(accel, []).append(
                    _bench_actor(accel, node, cluster.cpu_mode, strat, runtime_env))
                compilers.setdefault(accel, []).append(cluster.compilers.get(node["node_id"]))
                nodes_of.setdefault(accel, []).append(node["node_id"])
    cluster.brokers = {accel: Broker.options(name=broker_name(accel), lifetime=None, runtime_env=runtime_env).remote(
        acts, compilers[accel], nodes_of[accel]) for accel, acts in cluster.actors.items()}
    cluster.infos = {accel: ray.get([a.info.remote() for a in acts], timeout=600)
                     for accel, acts in cluster.actors.items()}


def _compile_actor(workers: int, plan: Plan, strat, runtime_env):
    from raytune_attn.tune.sweep import prefetch
    from raytune_attn.tune.sweep.compile_actor import CompileActor

    # Threads for every request in flight: trials' compiles, the start's prefetches and the searches' speculative
    # builds (at most 5 each: prefetch.Speculator) waiting for a worker.
    return CompileActor.options(num_cpus=0, max_concurrency=workers + prefetch.MAX_QUEUED + 512,
                                scheduling_strategy=strat, runtime_env=runtime_env,
                                ).remote(workers, plan.config.compile_timeout, timeout_x=plan.config.compile_timeout_x)


def _bench_actor(accel: str, node: dict, cpu_mode: bool, strat, runtime_env):
    from raytune_attn.tune.sweep.bench_actor import BenchActor

    opts = {"num_cpus": 0, "num_gpus": 0 if cpu_mode else 1, "runtime_env": runtime_env}
    if node.get("typed"):
        opts["resources"] = {f"accelerator_type:{accel}": 0.001}
    if strat is not None:
        opts["scheduling_strategy"] = strat
    return BenchActor.options(**opts).remote(accel)
