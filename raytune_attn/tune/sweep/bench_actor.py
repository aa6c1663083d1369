"""The benchmark actor of a sweep: `BenchActor` holds one GPU (`num_gpus=1` plus a sliver of
`accelerator_type:<X>`) for the whole sweep. The CUDA context, the workload and reference of each problem stay
loaded, so a trial costs a method call (~1 ms), not a process start (~9 s). It checks a config against the
reference and times it in rungs; it is restarted by Ray (`max_restarts=-1`) when a config kills it, and only the
trial that held it sees the error (broker.py attributes the crash).

Test hooks (never set them in production):
  RAYTUNE_ATTN_FAKE_DEVICE  JSON {accelerator_type: "vendor:arch:name"} (or one "vendor:arch:name" for all):
                            the device the actor reports; with no real GPU it runs the Triton interpreter.
  RAYTUNE_ATTN_CRASH_ON     JSON config subset: the actor calls os._exit(3) 0.5 s into a call of a matching config.
  RAYTUNE_ATTN_SIMULATE     JSON {"landscape": path, ...}: answer configs from a recorded landscape (simulate.py).
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict

import ray

from raytune_attn import provenance
from raytune_attn.tune.measure.compile_pool import setup_process_env
from raytune_attn.tune.sweep import simulate

# The crash hook (RAYTUNE_ATTN_CRASH_ON) exits this long after its call starts, as a faulting kernel does after its
# compile and launch. Exiting at the call's first instruction could kill the process before the reply of the call
# just finished had left it; the Broker then blamed that call, the oldest unanswered one, for the crash.
_CRASH_AFTER_S = 0.5


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

