"""Long-lived Ray actors of a sweep: one benchmark actor per GPU, one compile actor per node, one lease broker
per accelerator type.

* `BenchActor` holds one GPU (`num_gpus=1` plus a sliver of `accelerator_type:<X>`) for the whole sweep: the CUDA
  context, the workload and reference of each problem stay loaded, so a trial costs a method call (~1 ms), not a
  process start (~9 s). It checks a config against the reference and times it in rungs; it is restarted by Ray
  (`max_restarts=-1`) when a config kills it, and only the trial that held it sees the error.
* `CompileActor` runs on each GPU node with a pool of compile processes (`CompilePool`, one per thread, each with
  the per-compile time limit) that warm the node-local Triton cache before a config reaches the GPU.
* `Broker` leases benchmark actors to trials and keeps each actor's queue `DEPTH` rungs deep: the actor runs one
  config at a time (each trial holds exactly one GPU while it measures), the next rung already waits in its task
  queue, and a crash is attributed to the config that was running, not to the one queued behind it. The GPUs of a
  node serve one queue: each rung goes to whichever of them has a free slot first.

Test hooks (never set them in production):
  RAYTUNE_ATTN_FAKE_DEVICE  JSON {accelerator_type: "vendor:arch:name"} (or one "vendor:arch:name" for all):
                            the device the actor reports; with no real GPU it runs the Triton interpreter.
  RAYTUNE_ATTN_CRASH_ON     JSON config subset: the actor calls os._exit(3) 0.5 s into a call of a matching config.
  RAYTUNE_ATTN_SIMULATE     JSON {"landscape": path, ...}: answer configs from a recorded landscape (simulate.py).
  RAYTUNE_ATTN_BROKER_DEPTH calls in flight per benchmark actor (default 2; an A/B of DEPTH on a GPU).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import time
from collections import OrderedDict

import ray

from raytune_attn import provenance
from raytune_attn.tune.measure.compile_pool import interpret_without_gpu, limit_for, specialization
from raytune_attn.tune.sweep import simulate

TRITON_CACHE_DEFAULT = "~/.cache/raytune-attn/triton"
# Adaptive capping of a rung (timing.median_ms): at CAP_FACTOR times the best latency its problem has seen, never
# below CAP_FLOOR_MS (under a millisecond a full rung costs little, and a first run's one-off costs stay uncut).
CAP_FACTOR = 10.0
CAP_FLOOR_MS = 1.0
# Rungs in flight per benchmark actor: one runs, one waits in the actor's task queue. With one, the GPU idled for a
# round trip per rung (the result back to the Broker, the next waiter woken, its call sent): 11 ms per rung on one
# H200 and 19 ms with two behind one Broker (lease time minus kernel time), against rungs of 10-60 ms.
DEPTH = int(os.environ.get("RAYTUNE_ATTN_BROKER_DEPTH", "2"))  # benchmark hook: 1 restores one call per actor
# The crash hook (RAYTUNE_ATTN_CRASH_ON) exits this long after its call starts, as a faulting kernel does after its
# compile and launch. Exiting at the call's first instruction could kill the process before the reply of the call
# just finished had left it; the Broker then blamed that call, the oldest unanswered one, for the crash.
_CRASH_AFTER_S = 0.5


def setup_process_env(cache_dir: str | None = None) -> None:
    """Before torch/triton are imported in a worker: node-local Triton cache; the interpreter without a GPU."""
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.expanduser(cache_dir or TRITON_CACHE_DEFAULT))
    os.makedirs(os.environ["TRITON_CACHE_DIR"], exist_ok=True)
    interpret_without_gpu()


def fake_device(accel_type: str) -> dict | None:
    raw = os.environ.get("RAYTUNE_ATTN_FAKE_DEVICE", "").strip()
    if not raw:
        return None
    spec = raw
    if raw.startswith("{"):
        spec = json.loads(raw).get(accel_type)
        if spec is None:
            return None
    vendor, arch, name = (spec.split(":", 2) + ["", ""])[:3]
    return {"vendor": vendor, "arch": arch, "name": name or accel_type, "accelerator_type": accel_type,
            "runtime_version": "", "driver": "fake"}


def _matches(config: dict, subset: dict) -> bool:
    return bool(subset) and all(config.get(k) == v for k, v in subset.items())


class _Bench:
    """The benchmark actor's logic (a plain class so tests can call it without Ray)."""

    def __init__(self, accel_type: str, cache_dir: str | None = None):
        setup_process_env(cache_dir)
        import torch

        from raytune_attn.device import detect

        self.accel_type = accel_type
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        info = fake_device(accel_type) or detect().to_dict()
        if accel_type != "CPU":
            info["accelerator_type"] = accel_type  # the type the sweep placed us by (Ray's resource name)
        self.info_ = info
        self._workloads: OrderedDict[str, tuple] = OrderedDict()  # key -> (workload, reference, flops, bytes)
        self._workload_bytes = 0
        # Up to 40% of the GPU's memory for inputs and references (the kernels under test need little more).
        self.workload_budget = (0.4 * torch.cuda.get_device_properties(0).total_memory if self.device == "cuda"
                                else 2 << 30)
        self._crash_on = json.loads(os.environ.get("RAYTUNE_ATTN_CRASH_ON", "") or "{}")
        self._sim = simulate.from_env()
        self.t_start = time.time()
        self.busy_s = 0.0  # seconds running kernels (checks, timings, baselines)
        self.compile_wait_s = 0.0  # seconds compiling or loading binaries in this process
        self.baseline_s = 0.0  # of busy_s: measuring the SDPA baselines (not the search's work)
        self.calls = 0
        self.launch_us: list[float] = []  # host microseconds per kernel launch in each rung's warm-up
        self.graphed = 0  # of those rungs, how many timed replays of a CUDA graph (timing.graphed)
        # Host seconds per step of the rungs (timing.median_ms's phase_s, plus "alloc": the timed output buffer):
        # where a rung's wall time beyond its repetitions goes.
        self.phase_s: dict[str, float] = {}
        # Which device measured a row (its GPU's UUID; the process without one): rows of a multi-GPU sweep can be
        # compared per GPU, and the final re-measure's candidates checked to share one.
        self.gpu = (str(torch.cuda.get_device_properties(0).uuid) if self.device == "cuda"
                    else f"{self.device}:{os.getpid()}")
        # The stack that builds and times this actor's kernels: the rows' provenance, checked alike across the
        # actors of one type (sweep/stack.py). The driver's may differ (another Triton, or none on a head node).
        self.software = provenance.software()

    def info(self) -> dict:
        gpu = {}
        if self.device == "cuda":
            # Which physical GPU and how many cores this actor got: two actors on one GPU, or an actor squeezed
            # onto few cores, would show in a sweep's timings without an error.
            gpu = {"gpu_uuid": self.gpu, "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", "")}
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        return {**self.info_, **gpu, "pid": os.getpid(), "cpus": cpus,
                "node_id": ray.get_runtime_context().get_node_id() if ray.is_initialized() else "",
                "device": self.device, "software": self.software}

    def _workload(self, problem: dict):
        """Inputs, reference and FLOPs of a problem, kept across calls: a sweep interleaves all its problems'
        trials, so each rung may be another problem's, and rebuilding one (random inputs, an fp32 reference) costs
        up to seconds. Kept while their bytes fit `workload_budget`, least recently used evicted first."""
        from raytune_attn.problem import Problem
        from raytune_attn.tune.measure.workload import make_workload, reference

        p = Problem.from_dict(problem)
        hit = self._workloads.pop(p.key, None)
        if hit is None:
            w = make_workload(p, device=self.device)
            ref = reference(w)
            size = sum(t.numel() * t.element_size() for t in (w.q, w.k, w.v, ref)) * 2  # + the kernel's output
            while self._workloads and self._workload_bytes + size > self.workload_budget:
                _, (_, _, _, old) = self._workloads.popitem(last=False)
                self._workload_bytes -= old
            hit = (w, ref, p.flops(), size)
            self._workload_bytes += size
        self._workloads[p.key] = hit  # most recently used last
        return hit[:3]

    def run(self, problem: dict, config: dict, rung: int, rep_ms: float, check: bool,
            cap_ms: float | None = None) -> dict:
        """Rung `rung` of one config: with `check`, first compile (or load from the cache), run once and compare
        with the reference. Returns status/reason and, when ok, latency_ms and tflops of this rung; `capped` when
        its first runs took longer than `cap_ms` and the rung stopped there (timing.median_ms)."""
        from raytune_attn.config import InvalidConfig

        self.calls += 1
        if self._sim is not None:
            from raytune_attn.problem import Problem

            out = self._sim.run(Problem.from_dict(problem).flops(), config, rung, rep_ms, check, cap_ms)
            self.busy_s += out["bench_s"]
            return {**out, "gpu": self.gpu, "host": self.software["hostname"]}
        w, ref, flops = self._workload(problem)
        out = {"status": "ok", "reason": "", "rung": rung, "compile_s": 0.0, "bench_s": 0.0, "gpu": self.gpu,
               "host": self.software["hostname"]}
        t0 = time.perf_counter()
        try:
            if not check or self._check(w, ref, flops, config, cap_ms, out):
                self._time(w, flops, config, rep_ms, cap_ms, out)
        except InvalidConfig as e:
            out.update(status="invalid", reason=str(e).splitlines()[0][:500])
        except Exception as e:  # noqa: BLE001 - a run-time failure (OutOfResources, launch error) of this config
            name = type(e).__name__
            status = "invalid" if "OutOfResources" in name or "out of resource" in str(e) else "error"
            out.update(status=status, reason=f"{name}: {str(e).splitlines()[0][:500] if str(e) else ''}")
        finally:
            self.busy_s += time.perf_counter() - t0 - out["compile_s"]
        return out

    def _check(self, w, ref, flops: float, config: dict, cap_ms: float | None, out: dict) -> bool:
        """Compile `config` (or load it from the cache), run it once and compare with the reference, into `out`.
        False when the rung ends here: a wrong result, or a first run so far over `cap_ms` that it is the rung."""
        import torch

        from raytune_attn.tune.measure.timing import STALL_MAX_MS, tflops
        from raytune_attn.tune.measure.workload import accept

        if _matches(config, self._crash_on):
            time.sleep(_CRASH_AFTER_S)
            os._exit(3)  # test hook: a config that kills its worker process
        t0 = time.perf_counter()
        w.compile(config)
        t_check = time.perf_counter()
        out["compile_s"] = t_check - t0
        self.compile_wait_s += t_check - t0
        got = w.check_run(config)
        on_gpu = torch.cuda.is_available()  # the interpreter's times say nothing: no cap from them
        if on_gpu:
            torch.cuda.synchronize()
        first_ms = (time.perf_counter() - t_check) * 1e3
        ok, err = accept(got, ref)
        out["rel_err"] = err
        if not ok:
            out.update(status="invalid", reason=f"wrong result: rel err {err:.2e} vs reference")
            return False
        if cap_ms is not None and on_gpu and first_ms > cap_ms + STALL_MAX_MS:
            # The check was this config's first run, and no host stall explains it being this far over the cap
            # (timing.median_ms stops on such a first timed run): a 2-second kernel costs 2 s, not 4.
            out.update(latency_ms=first_ms, tflops=tflops(flops, first_ms), capped=True,
                       bench_s=time.perf_counter() - t_check)
            return False
        return True

    def _time(self, w, flops: float, config: dict, rep_ms: float, cap_ms: float | None, out: dict) -> None:
        """Time `config` for `rep_ms` (timing.median_ms, capped at `cap_ms`) into `out`; the host's phases and
        launch costs into the actor's stats."""
        import torch

        from raytune_attn.tune.measure.timing import median_ms, tflops

        t0 = time.perf_counter()
        timing: dict = {}
        buf = torch.empty_like(w.q)  # timed runs write here: a captured run (timing.graphed) allocates nothing
        self.phase_s["alloc"] = self.phase_s.get("alloc", 0.0) + time.perf_counter() - t0
        ms = median_ms(lambda: w.run(config, out=buf), warmup_ms=min(rep_ms, 10), rep_ms=rep_ms, cap_ms=cap_ms,
                       stats=timing)
        for k, v in timing.get("phase_s", {}).items():
            self.phase_s[k] = self.phase_s.get(k, 0.0) + v
        if "host_us_per_launch" in timing:
            self.launch_us.append(timing["host_us_per_launch"])
            self.graphed += bool(timing.get("graphed"))
        out.update(latency_ms=ms, tflops=tflops(flops, ms), capped=cap_ms is not None and ms > cap_ms,
                   bench_s=time.perf_counter() - t0)

    def baselines(self, problem: dict) -> dict:
        """SDPA backends' tflops and latency on this problem (GPU only; {} otherwise). Varlen problems get each
        backend on nested jagged tensors and on the padded batch (`sdpa_<backend>_njt`, `sdpa_<backend>_padded`)."""
        from raytune_attn.problem import Problem

        p = Problem.from_dict(problem)
        if self.device != "cuda":
            return {}
        from raytune_attn.tune.measure.bench import bench_problem

        t0 = time.perf_counter()
        rows = bench_problem(p, [], rep_ms=100)
        self.busy_s += time.perf_counter() - t0
        self.baseline_s += time.perf_counter() - t0
        return {r["impl"].replace("-", "_"): {"tflops": r["tflops"], "latency_ms": r["ms"]}
                for r in rows if r["tflops"] == r["tflops"]}

    def stats(self) -> dict:
        import statistics

        lu = sorted(self.launch_us)
        return {"busy_s": self.busy_s, "baseline_s": self.baseline_s, "compile_wait_s": self.compile_wait_s,
                "calls": self.calls,
                "launch_us_p50": statistics.median(lu) if lu else None,
                "launch_us_p90": lu[int(0.9 * (len(lu) - 1))] if lu else None,
                "rungs_timed": len(lu), "rungs_graphed": self.graphed,
                "phase_s": {k: round(v, 3) for k, v in self.phase_s.items()},
                "alive_s": time.time() - self.t_start, "pid": os.getpid()}


@ray.remote(max_restarts=-1, max_task_retries=0)
class BenchActor(_Bench):
    pass


class _Build:
    def __init__(self, urgent: bool):
        self.done = threading.Event()
        self.out: dict = {}
        self.urgent = urgent  # a trial waits for it (False: compiled ahead on speculation)


class _Compiler:
    """Compiles configs ahead of the GPU on one node: `workers` one-process CompilePools (each killed and replaced
    when a compile passes the time limit or crashes), handed to requests by priority.

    Problems that differ only in sizes share one binary (sequence lengths and batch are not specialized on), so
    a config is compiled once per `specialization`: a second request waits for the first and reuses its outcome
    (15 Llama keys asking for the default config at the start of a sweep cost one compile, not 15).
    A `speculative` request (prefetch.py: configs a search will likely ask for) gets a worker only while no urgent
    build waits for one; a trial asking for a config whose speculative build has not started makes it urgent.
    (A plain class so tests can call it without Ray; the actor is `CompileActor`.)"""

    def __init__(self, workers: int, timeout_s: float, cache_dir: str | None = None, timeout_x: float = 0.0):
        setup_process_env(cache_dir)
        from raytune_attn.tune.measure.compile_pool import CompilePool

        self._sim = simulate.from_env()
        # Each compile's limit: `timeout_s`, or less once the node's typical compile is known (`timeout_x` times
        # its median: compile_pool.limit_for).
        self.timeout_s, self.timeout_x = float(timeout_s), float(timeout_x)
        self._build_s: list[float] = []  # seconds of this node's successful builds
        self._cv = threading.Condition()  # guards _builds, _free, _waiting, _build_s
        self._builds: dict[tuple, _Build] = {}  # specialization -> its (possibly running) compile
        self._free = [CompilePool(1, timeout_s=timeout_s) for _ in range(max(1, workers))]
        self._all = list(self._free)
        if self._sim is None:
            for pool in self._all:
                pool.start()  # import torch and Triton while the GPU actors start, not when Tune does
        self._waiting: list[_Build] = []  # builds waiting for a worker

    def _acquire(self, build: _Build):
        with self._cv:
            self._waiting.append(build)
            try:
                while not (self._free and (build.urgent or not any(b.urgent for b in self._waiting))):
                    self._cv.wait()
                return self._free.pop()
            finally:
                self._waiting.remove(build)

    def _release(self, pool) -> None:
        with self._cv:
            self._free.append(pool)
            self._cv.notify_all()

    def compile(self, problem: dict, config: dict, speculative: bool = False) -> dict:
        from raytune_attn.problem import Problem

        p = Problem.from_dict(problem)
        key = specialization(p, config)
        with self._cv:
            build = self._builds.get(key)
            mine = build is None
            if mine:
                build = self._builds[key] = _Build(urgent=not speculative)
            elif not speculative and not build.urgent:
                build.urgent = True  # a trial now waits for it: it goes before speculative builds
                self._cv.notify_all()
        if not mine:
            build.done.wait()
            # Built by another request (another problem's trial, or the sweep's prefetch): a cache load away.
            # build_s keeps what the binary cost to build, which the searcher learns compile costs from.
            return {**build.out, "compile_s": 0.0, "build_s": build.out.get("compile_s", 0.0), "shared": True}
        try:
            pool = self._acquire(build)  # the simulation holds a worker too: it models the pool's width
            try:
                with self._cv:
                    limit = limit_for(self._build_s, self.timeout_s, self.timeout_x)
                if self._sim is not None:
                    build.out = self._sim.compile(config, key[1:], timeout_s=limit)
                else:
                    res = next(iter(pool.compile(p, [config], timeout_s=limit)))
                    build.out = {"status": res.status, "reason": res.reason, "compile_s": res.compile_s,
                                 "n_regs": res.n_regs, "n_spills": res.n_spills, "shared_bytes": res.shared_bytes}
                if build.out["status"] == "ok":
                    with self._cv:
                        self._build_s.append(float(build.out["compile_s"]))
            finally:
                self._release(pool)
        except Exception as e:  # noqa: BLE001 - never leave waiters hanging; this config errors
            build.out = {"status": "error", "reason": f"compile failed: {type(e).__name__}: {e}", "compile_s": 0.0}
        if build.out["status"] == "error":  # a crash or time-out may be the machine's fault: a later ask retries
            with self._cv:
                self._builds.pop(key, None)
        build.done.set()
        return {**build.out, "build_s": build.out.get("compile_s", 0.0)}

    def close(self, grace_s: float = 5.0):
        # All workers are told at once and share one grace period: closed one after another, each busy with a
        # speculative build held the sweep's end for its 5 s (over 18 s with 31 workers).
        for pool in self._all:
            pool.request_stop()
        deadline = time.monotonic() + grace_s
        for pool in self._all:
            pool.close(timeout_s=max(0.0, deadline - time.monotonic()))


@ray.remote
class CompileActor(_Compiler):
    pass


@ray.remote(num_cpus=0)
class Broker:
    """Leases the benchmark actors of one accelerator type to trials and runs their rungs (async actor: a waiting
    trial costs no thread). A rung is one call from the trial: take one of `DEPTH` slots of an actor of the trial's
    node, run, give the slot back. The actor runs its calls one at a time in the order sent, so a trial holds the
    GPU alone while it measures; when a config kills the actor, the call that was running (the oldest unanswered
    one of that incarnation) gets the error and the calls queued behind it run again, on the restarted actor or
    another GPU of the node. (A process that dies within moments of finishing a call may take that call's reply
    with it: the finished call is then the oldest unanswered one and takes the blame. A faulting kernel dies after
    its compile and launch, by when the reply has left.)"""

    def __init__(self, actors: list, compilers: list, nodes: list | None = None):
        self.actors = list(actors)  # BenchActor handles
        self.compilers = list(compilers)  # CompileActor handle (or None) of each actor's node
        self.nodes = list(nodes) if nodes is not None else list(range(len(self.actors)))  # each actor's node
        n = len(self.actors)
        self.assigned = [0] * n
        self.restarting = [False] * n  # a config killed it: Ray is starting a new one
        self._slots: asyncio.Condition | None = None  # a slot of some actor came free
        self.holders: list[dict] = [{} for _ in range(n)]  # call token -> trial id, for each actor's slots in use
        self._seq = 0
        self.incarnation = [0] * n  # bumped when an actor is found dead
        self.unanswered: list[dict] = [{} for _ in range(n)]  # call token -> incarnation it was sent to
        # Where each actor's time goes, seen from here: "run" (a rung in flight), "compile" (idle, but a trial of
        # this actor is still compiling ahead: the sweep is compile-bound), "pipeline" (idle with no trial
        # compiling: waiting on Tune to start or continue a trial; the sweep's own overhead).
        self.compiling: list[set] = [set() for _ in range(n)]
        self.running = [0] * n
        self.seconds = [{"run": 0.0, "compile": 0.0, "pipeline": 0.0} for _ in range(n)]
        self._since = [None] * n  # None until the first trial arrives: start-up is not the sweep's overhead
        self.first: dict[str, float | None] = {"assign": None, "rung": None}  # when the first trial came, ran
        self.best_ms: dict[str, float] = {}  # problem -> lowest latency of a rung so far (the cap's reference)
        self.capped = 0
        self.requeued = 0  # calls that were queued behind a crash and ran again

    def _cond(self) -> asyncio.Condition:
        if self._slots is None:  # created on the actor's event loop, at its first call
            self._slots = asyncio.Condition()
        return self._slots

    def _account(self, i: int) -> None:
        """Close the interval since actor i's last state change and book it to the state it was in."""
        now = time.monotonic()
        if self._since[i] is not None:
            state = "run" if self.running[i] else ("compile" if self.compiling[i] else "pipeline")
            self.seconds[i][state] += now - self._since[i]
        self._since[i] = now

    async def assign(self, trial_id: str = "") -> tuple:
        """The least-loaded actor for a new trial: (index, compile actor handle of its node or None)."""
        i = min(range(len(self.actors)), key=lambda j: self.assigned[j])
        self.first["assign"] = self.first["assign"] or time.time()
        self._account(i)
        self.assigned[i] += 1
        self.compiling[i].add(trial_id)
        return i, self.compilers[i]

    async def unassign(self, i: int, trial_id: str = "") -> None:
        self._account(i)
        self.assigned[i] = max(0, self.assigned[i] - 1)
        self.compiling[i].discard(trial_id)

    async def stats(self) -> list[dict]:
        for i in range(len(self.actors)):
            self._account(i)
        return [dict(x) for x in self.seconds]

    async def firsts(self) -> dict:
        """Wall-clock times (time.time()) of the first trial's arrival and of its first rung; rungs capped; calls
        requeued after a crash."""
        return {**self.first, "capped": self.capped, "requeued": self.requeued}

    def _pick(self, i: int) -> int | None:
        """The actor for the next rung of a trial last on actor i: of the actors on i's node (they share its compile
        cache) that are not being restarted, one with a free slot and the fewest calls in flight, i on a tie; None
        while every one is full. Bound to one actor, a rung queued behind a 2-second config while the node's other
        GPU idled (4-6 s with no trial finishing, twice, at the end of a two-GPU sweep)."""
        same = [j for j in range(len(self.actors)) if self.nodes[j] == self.nodes[i] and not self.restarting[j]]
        free = [j for j in same or [i] if len(self.holders[j]) < DEPTH]
        return min(free, key=lambda j: (len(self.holders[j]), j != i), default=None)

    async def acquire(self, i: int, trial_id: str) -> tuple[int, int]:
        """A slot of actor i or of another actor of its node (at most DEPTH calls in flight to each): (the actor,
        the call's token). A trial that moves takes its assignment along (the sweep's accounting follows it)."""
        cond = self._cond()
        async with cond:
            await cond.wait_for(lambda: self._pick(i) is not None)
        j = self._pick(i)  # no await since the wait: the slot it saw is still free
        if j != i:
            self._account(i)
            self._account(j)
            self.assigned[i] = max(0, self.assigned[i] - 1)
            self.assigned[j] += 1
            self.compiling[i].discard(trial_id)
        self._seq += 1
        self.holders[j][self._seq] = trial_id
        return j, self._seq

    async def release(self, i: int, token: int) -> None:
        if self.holders[i].pop(token, None) is not None:
            cond = self._cond()
            async with cond:
                cond.notify_all()  # waiters of every node: each checks its own

    async def release_trial(self, trial_id: str) -> None:
        """Free whatever a finished or killed trial still holds."""
        for i, held in enumerate(self.holders):
            for token in [t for t, who in held.items() if who == trial_id]:
                await self.release(i, token)

    async def _until_alive(self, i: int, timeout_s: float = 120.0) -> None:
        # After a config killed the actor, calls fail with ActorUnavailableError until Ray has restarted it; such
        # a failure is not the next config's fault, so wait for a call that runs no config to answer.
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                await self.actors[i].info.remote()
                self.restarting[i] = False
                cond = self._cond()
                async with cond:
                    cond.notify_all()  # its slots are usable again
                return
            except ray.exceptions.ActorUnavailableError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def _revive(self, i: int) -> None:
        try:
            await self._until_alive(i)
        except ray.exceptions.ActorUnavailableError:
            pass  # not back within the limit: a node with other GPUs goes on without it

    def _ran_into_crash(self, i: int, token: int) -> bool:
        """Whether call `token`, failed with the actor's death, was the one running (the oldest unanswered call
        of its incarnation: the actor answers in order). Failed calls stay in `unanswered`, so the answer does not
        depend on which failure this coroutine sees first."""
        inc = self.unanswered[i][token]
        if self.incarnation[i] == inc:
            self.incarnation[i] += 1
        return token == min(t for t, g in self.unanswered[i].items() if g == inc)

    async def run(self, i: int, trial_id: str, problem: dict, config: dict, rung: int, rep_ms: float,
                  check: bool) -> dict:
        """One rung of a trial's config on actor i (see _Bench.run), or on a GPU of the same node with a slot free
        sooner (`_pick`): the result's `actor` says which one ran it."""
        self._account(i)
        self.compiling[i].discard(trial_id)  # compiled (its first rung): no longer a reason to wait
        key = json.dumps(problem, sort_keys=True)
        while True:
            i, token = await self.acquire(i, trial_id)
            self.first["rung"] = self.first["rung"] or time.time()
            self._account(i)
            self.running[i] += 1
            try:
                if self.restarting[i]:
                    await self._until_alive(i)
                cap = max(CAP_FACTOR * self.best_ms[key], CAP_FLOOR_MS) if key in self.best_ms else None
                self.unanswered[i][token] = self.incarnation[i]
                try:
                    out = await self.actors[i].run.remote(problem, config, rung, rep_ms, check, cap)
                except ray.exceptions.RayActorError as e:
                    if not self.restarting[i]:
                        self.restarting[i] = True
                        # Its node's other GPUs take the rungs meanwhile; this brings it back into the queue.
                        asyncio.ensure_future(self._revive(i))
                    if not self._ran_into_crash(i, token):
                        self.requeued += 1
                        continue  # queued behind the config that killed the actor: run again once it is back
                    return {"status": "error", "rung": rung, "compile_s": 0.0, "bench_s": 0.0, "actor": i,
                            "reason": f"benchmark worker died running this config ({type(e).__name__})"}
                self.unanswered[i].pop(token, None)
                if out.get("status") == "ok" and out.get("latency_ms", 0) > 0:
                    self.best_ms[key] = min(self.best_ms.get(key, math.inf), float(out["latency_ms"]))
                    self.capped += bool(out.get("capped"))
                return {**out, "actor": i}
            finally:
                self._account(i)
                self.running[i] -= 1
                await self.release(i, token)
