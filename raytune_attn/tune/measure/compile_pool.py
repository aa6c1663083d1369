"""Parallel, time-limited JIT compilation that warms Triton's on-disk cache ahead of the GPU.

Compiling a config takes ~1 s and sometimes tens of seconds, timing it ~0.1 s: a GPU that compiles its own
configs idles most of the time. Worker processes (one per CPU core by default) compile configs without
launching them, so they never disturb timings on the GPU; the benchmarking process then finds each binary in
the shared TRITON_CACHE_DIR. A compile over the time limit is killed with its worker and reported invalid.

What a worker compiles is the binary the launcher launches on the real problem (`target_build.compile_kernel`:
the launcher's own arguments on shape-only tensors, no memory), so the cache entry is the one the GPU looks up,
whatever the problem's size. It compiles for this node's GPU, or for a `target` named by the cluster (a
cross_compile target such as "cuda:90" or "hip:gfx942"): a CPU-only node then warms the cache for GPU workers of
that kind. Without a GPU and a target, the interpreter compiles nothing and a worker only validates.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import wait

from raytune_attn.problem import Problem


def interpret_without_gpu() -> bool:
    """Run Triton's interpreter in this process when torch sees no GPU (TRITON_INTERPRET=1, as every process of a
    sweep without a GPU does); whether the interpreter is on. Triton reads the variable when a kernel's module is
    imported, so this runs before anything imports raytune_attn.kernels."""
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


TRITON_CACHE_DEFAULT = "~/.cache/raytune-attn/triton"


def setup_process_env(cache_dir: str | None = None) -> None:
    """Before torch/triton are imported in a worker: node-local Triton cache; the interpreter without a GPU."""
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.expanduser(cache_dir or TRITON_CACHE_DEFAULT))
    os.makedirs(os.environ["TRITON_CACHE_DIR"], exist_ok=True)
    interpret_without_gpu()


@dataclass
class CompileResult:
    problem_key: str
    config: dict
    status: str  # "ok" | "invalid" | "error"
    reason: str
    compile_s: float
    n_regs: int | None = None
    n_spills: int | None = None
    shared_bytes: int | None = None


def specialization(problem: Problem, config: dict) -> tuple:
    """What Triton compiles a distinct binary for: the config and the problem's compile-time constants (head dim,
    causal, varlen, dtype, grouped heads); sequence lengths, batch and head counts are run-time arguments."""
    return (tuple(sorted(config.items())), problem.head_dim, problem.causal, problem.varlen, problem.dtype,
            problem.hq == problem.hkv)


# A compile far slower than this node's typical one is cut (`limit_for`). On 36 recorded landscapes (H100, H200;
# study and short spaces) every config that took over 30 s to compile ran at under 15% of its problem's best, every
# config at half the best or more compiled within 25 s, and the median compile took 0.6-5 s; such compiles are
# register-spilling giants (256 x 256 tiles on 2 warps), and a GP sweep asks for a few late, each holding its
# search for the whole limit. Relative to the median, the limit follows the node's CPU and load.
LIMIT_FLOOR_S = 30.0  # the relative limit never cuts a compile shorter than this
LIMIT_MIN_BUILDS = 8  # cold compiles seen before the relative limit applies
COLD_S = 0.3  # compile seconds below this are a load from Triton's on-disk cache, not a compile


def over_limit(limit_s: float) -> str:
    """The reason a compile cut at its limit reports (the simulated GPU reports the same)."""
    return f"compile exceeded {limit_s:.0f} s"


def limit_for(build_s: list[float], timeout_s: float, multiple: float) -> float:
    """Seconds the next compile may take: `multiple` times the median of the cold compiles seen (`build_s`: the
    seconds of the successful compiles so far, cache loads ignored), at least LIMIT_FLOOR_S and at most
    `timeout_s`; `timeout_s` alone before LIMIT_MIN_BUILDS cold compiles or with `multiple` 0."""
    cold = [s for s in build_s if s >= COLD_S]
    if not multiple or len(cold) < LIMIT_MIN_BUILDS:
        return timeout_s
    return min(timeout_s, max(LIMIT_FLOOR_S, multiple * statistics.median(cold)))


# A worker's start (torch, Triton, a CUDA context) is not part of any compile's time: it says when it is ready, and
# the pool starts a compile's clock only then. Counted in, a replaced worker's start under load (four sweeps on one
# host, 60 processes starting torch) took the next compile on it past a 30 s limit, configs that compile in 1-2 s
# among them.
READY = "ready"
START_LIMIT_S = 600.0  # a worker not ready this long after it was started is replaced
START_ATTEMPTS = 3  # workers that die or hang while starting, in a row, before the pool gives up


# Compile processes run at a lower CPU priority: on a node whose cores they fill, the benchmark actors' timing loops
# (host launches of flush, spin and kernel) must not wait for a core. On two H200s with 31 compile processes on 32
# cores, unniced compiles made the small keys' rungs take 3-4x their GPU time.
COMPILE_NICE = 10


def _worker(conn, device: str, target_name: str | None):
    # Runs in a spawned process: imports torch/triton once, then compiles whatever it is sent.
    os.nice(COMPILE_NICE)
    if target_name is not None:
        os.environ.pop("TRITON_INTERPRET", None)  # before Triton loads: the interpreter compiles nothing
    import warnings

    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
    target = None
    if target_name is not None or device != "cpu":
        from raytune_attn.tune.measure import targets

        if target_name is not None:
            target = targets.parse_target(target_name)
        else:
            import torch

            torch.empty(1, device=device)  # the CUDA context now, while the pool starts, not at the first compile
            target = targets.local_target(torch.cuda.current_device())
    else:
        from raytune_attn.tune.measure import workload  # noqa: F401 - torch and the launcher, before the clock
    time.sleep(float(os.environ.get("RAYTUNE_ATTN_WORKER_START_S", "0")))  # test hook: a slow start
    conn.send(READY)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        problem_dict, config = msg
        conn.send(_compile(Problem.from_dict(problem_dict), config, target, load=target_name is None))


def _compile(problem: Problem, config: dict, target, load: bool) -> tuple:
    """(status, reason, seconds, registers, spills, shared bytes) of one compile. On a GPU (`target`): the binary
    the launcher launches for `problem` (target_build.compile_kernel, no tensors), loaded where `load` (this
    node's GPU: load-time limits surface, and the driver counts registers) or read from its metadata (a target
    named for other nodes). `target` None: the interpreter, which compiles nothing; the launcher validates."""
    from raytune_attn.config import InvalidConfig

    t0 = time.perf_counter()
    try:
        if target is None:
            from raytune_attn.tune.measure.workload import make_workload

            make_workload(problem, device="cpu", random=False).compile(config)
            return "ok", "", time.perf_counter() - t0, None, None, None
        return _compile_for(problem, config, target, load, t0)
    except InvalidConfig as e:
        return "invalid", str(e), time.perf_counter() - t0, None, None, None
    except Exception as e:  # a compiler crash or bug: the config is unusable, the pool goes on
        return "error", f"{type(e).__name__}: {e}", time.perf_counter() - t0, None, None, None


def _compile_for(problem: Problem, config: dict, target, load: bool, t0: float) -> tuple:
    import subprocess

    import triton

    from raytune_attn import validation
    from raytune_attn.config import InvalidConfig
    from raytune_attn.tune.measure import target_build

    if getattr(problem, "kind", None) == "paged":  # judged by the paged kernel's rules, whatever knobs it names
        cfg = validation.check_paged(config, head_dim=problem.head_dim, group=problem.gqa_group,
                                     vendor=target.vendor, arch=target.prefilter_arch, dtype=problem.dtype)
        if load:
            return _compile_paged(problem, cfg, t0)
    else:
        cfg = validation.check(config, head_dim=problem.head_dim, vendor=target.vendor, arch=target.prefilter_arch,
                               dtype=problem.dtype)
    try:
        compiled = target_build.compile_kernel(target, problem, cfg)
        overflow = target_build.out_of_shared_memory(int(compiled.metadata.shared), target)
        if overflow:
            raise InvalidConfig(f"out of resources: {overflow}")
        if load:
            compiled._init_handles()  # as the launcher's first call would: load-time limits surface here
            regs, spills = compiled.n_regs, compiled.n_spills
        else:
            res = target_build.binary_resources(compiled, target)
            regs = res["registers"]
            spills = res.get("vgpr_spills") if target.backend == "hip" else (res["local_bytes"] or 0) // 4
    except (triton.runtime.errors.OutOfResources, triton.compiler.errors.CompilationError,
            subprocess.CalledProcessError, RuntimeError) as e:
        # What the launcher turns into InvalidConfig too: resources, the front end, the assembler, and an MLIR
        # pass that gives up on the config (a bare RuntimeError).
        raise InvalidConfig(f"compile error: {target_build.compiler_message(e)}") from e
    return "ok", "", time.perf_counter() - t0, regs, spills, int(compiled.metadata.shared)


def _compile_paged(problem, config: dict, t0: float) -> tuple:
    """A paged config's binaries built and loaded on this node's GPU (paged_workload.compile_paged, the launcher's
    own warm-up on a small twin problem); InvalidConfig as the launcher raises it. (For a target named for other
    nodes the cross-compiler builds them: target_build.paged_launch_specs.)"""
    from raytune_attn.tune.measure.paged_workload import compile_paged

    compiled = compile_paged(problem, config, device="cuda")
    regs, spills = (compiled.n_regs, compiled.n_spills) if compiled is not None else (None, None)
    shared = int(compiled.metadata.shared) if compiled is not None else None
    return "ok", "", time.perf_counter() - t0, regs, spills, shared


class CompilePool:
    """`workers` long-lived compile processes; `compile(problem, configs)` yields results as they finish."""

    def __init__(self, workers: int | None = None, *, timeout_s: float = 120.0, device: str | None = None,
                 target: str | None = None):
        import torch

        self.workers = workers or max(1, (os.cpu_count() or 2) - 1)
        self.timeout_s = timeout_s
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        # A GPU of another node (a cross_compile target name, "cuda:90"): compiled here, on CPU, into the shared
        # TRITON_CACHE_DIR, so that node's launcher finds the binary and compiles nothing.
        self.target = target
        self._ctx = mp.get_context("spawn")  # never fork a process that holds a CUDA context
        self._procs: list = []
        self._starting: dict = {}  # connection of a worker not ready yet -> when it was started
        self._failed_starts = 0  # workers in a row that died or hung while starting

    def _spawn(self):
        parent, child = self._ctx.Pipe()
        p = self._ctx.Process(target=_worker, args=(child, self.device, self.target), daemon=True)
        p.start()
        child.close()
        self._starting[parent] = time.perf_counter()
        return p, parent

    def _started(self, i: int) -> None:
        """Read worker i's READY (it is waiting in its pipe); replace the worker if it died instead."""
        conn = self._procs[i][1]
        try:
            ok = conn.recv() == READY
        except EOFError:
            ok = False
        if ok:
            self._starting.pop(conn, None)
            self._failed_starts = 0
        else:
            self._start_failed(i)

    def _start_failed(self, i: int) -> None:
        self._failed_starts += 1
        if self._failed_starts >= START_ATTEMPTS:
            raise RuntimeError(f"compile workers fail to start ({self._failed_starts} in a row)")
        self._replace(i)

    def _check_starts(self) -> None:
        """Replace the workers still starting after START_LIMIT_S."""
        now = time.perf_counter()
        for i, (_, conn) in enumerate(self._procs):
            if now - self._starting.get(conn, now) > START_LIMIT_S:
                self._start_failed(i)

    def start(self, n: int | None = None) -> None:
        """Spawn the workers now (at most `n` in all), rather than at the first compile. Each one imports torch and
        Triton (a few CPU seconds); started lazily, the sweep's 31 compile processes did that in the seconds Tune
        starts its trial processes, all on the same cores (the host at 100% for ~9 s from Tune's start)."""
        limit = self.workers if n is None else min(self.workers, n)
        while len(self._procs) < limit:
            self._procs.append(self._spawn())

    def compile(self, problem: Problem, configs: Iterable[dict], timeout_s: float | None = None
                ) -> Iterator[CompileResult]:
        """Results as they finish; each compile may take `timeout_s` (default: the pool's)."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        todo = list(configs)
        self.start(len(todo))
        busy: dict[int, tuple[dict, float]] = {}  # worker index -> (config, start time)
        while todo or busy:
            for i, (_, conn) in enumerate(self._procs):
                if i not in busy and todo and conn not in self._starting:
                    cfg = todo.pop(0)
                    conn.send((problem.to_dict(), cfg))
                    busy[i] = (cfg, time.perf_counter())
            conns = {self._procs[i][1]: i for i in busy}
            starting = {conn: i for i, (_, conn) in enumerate(self._procs) if conn in self._starting}
            # Wake at the nearest deadline: a result that arrives after its limit is over it, even when it comes
            # before the pool looks again.
            first_due = min((t0 + limit for _, t0 in busy.values()), default=math.inf) - time.perf_counter()
            for conn in wait(list(conns) + list(starting), timeout=max(0.0, min(1.0, first_due))):
                if conn in starting:
                    self._started(starting[conn])
                    continue
                i = conns[conn]
                cfg, t0 = busy.pop(i)
                try:
                    status, reason, secs, regs, spills, shared = conn.recv()
                except EOFError:  # the worker died (a compiler segfault): replace it
                    self._replace(i)
                    status, reason, secs, regs, spills, shared = "error", "compile worker died", 0.0, None, None, None
                took = time.perf_counter() - t0
                if status == "ok" and took > limit:
                    status, reason, secs = "invalid", over_limit(limit), took
                yield CompileResult(problem.key, cfg, status, reason, secs, regs, spills, shared)
            now = time.perf_counter()
            for i, (cfg, t0) in list(busy.items()):
                if now - t0 > limit:
                    busy.pop(i)
                    self._replace(i)
                    yield CompileResult(problem.key, cfg, "invalid", over_limit(limit), now - t0)
            self._check_starts()

    def _replace(self, i: int):
        proc, conn = self._procs[i]
        proc.kill()
        proc.join(5)
        conn.close()
        self._starting.pop(conn, None)
        self._procs[i] = self._spawn()

    def request_stop(self) -> None:
        """Ask each worker to exit once its current compile is done (close() then waits for them)."""
        for _, conn in self._procs:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass

    def close(self, timeout_s: float = 5.0):
        """Stop the workers: each gets until `timeout_s` from now to finish its compile, then is killed."""
        self.request_stop()
        deadline = time.monotonic() + timeout_s
        for proc, conn in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(1)
            conn.close()
        self._procs = []
        self._starting = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
