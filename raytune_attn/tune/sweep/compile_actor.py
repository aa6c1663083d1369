"""The compile actor of a sweep: `CompileActor` runs on each GPU node with a pool of compile processes
(`CompilePool`, one per thread, each with the per-compile time limit) that warm the node-local Triton cache before
a config reaches the GPU."""

from __future__ import annotations

import threading
import time

import ray

from raytune_attn.tune.measure.compile_pool import limit_for, setup_process_env, specialization
from raytune_attn.tune.sweep import simulate


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

