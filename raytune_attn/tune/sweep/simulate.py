"""A simulated GPU for measuring the sweep pipeline itself (Tune loop, leases, compile-ahead) without a GPU.

Set `RAYTUNE_ATTN_SIMULATE` to JSON `{"landscape": "/abs/path.parquet", "compile_scale": 1.0, "check_ms": 2.0}`
and the benchmark actors answer every config from that recorded landscape instead of running a kernel: a config
the landscape marks as failed (or does not hold) is invalid, a measured one returns its recorded TFLOP/s. What
the GPU would have spent is spent as sleep: `check_ms` for the reference check on rung 1, then the warm-up plus
the rung's repetitions (`rep_ms`), exactly what `timing.median_ms` would run for. Compile actors sleep the
config's recorded compile seconds times `compile_scale`. The actors count those sleeps as busy/compile time, so
a simulated sweep reports the GPU busy fraction and the overhead per trial that its pipeline would leave on a
real GPU whose only work is this landscape (Kernel Tuner's simulation mode, applied to the whole sweep).
It is a benchmark and test hook: never set it in production.
"""

from __future__ import annotations

import json
import math
import os
import time
from functools import cache

from raytune_attn.tune.measure.compile_pool import over_limit

ENV = "RAYTUNE_ATTN_SIMULATE"
CACHE_HIT_S = 0.05  # a Triton cache hit: spawn-free load of the built binary


class SimulatedGPU:
    def __init__(self, landscape: str, compile_scale: float = 1.0, check_ms: float = 2.0):
        from raytune_attn.tune.results import read_frame
        from raytune_attn.tune.search.landscape import load_landscape

        self.landscape = load_landscape(landscape)
        self.params = list(self.landscape.space.names)
        # A knob the landscape holds at one value (SPLIT_MASK in the study's tables) is that value for every config
        # of a space that does not search it.
        self.fixed = {p: prm.values[0] for p, prm in zip(self.params, self.landscape.space.params, strict=True)
                      if len(prm.values) == 1}
        df = read_frame(landscape)
        self.compile_s = {}
        if "compile_s" in df.columns:
            for rec in df[self.params + ["compile_s"]].to_dict("records"):
                self.compile_s[self._key(rec)] = float(rec["compile_s"] or 0.0)
        self.compile_scale = float(compile_scale)
        self._built: set = set()
        self.check_ms = float(check_ms)

    def _key(self, config: dict) -> tuple:
        return tuple(config.get(p, self.fixed.get(p)) for p in self.params)

    def tflops(self, config: dict) -> float:
        v = self.landscape.values.get(self._key(config), float("nan"))
        return float(v)

    def compile(self, config: dict, specialization: tuple = (), timeout_s: float = math.inf) -> dict:
        # Triton's cache: a kernel already built for this config and problem specialization only loads.
        key = (self._key(config), specialization)
        s = (CACHE_HIT_S if key in self._built else self.compile_s.get(self._key(config), 1.0)) * self.compile_scale
        if s > timeout_s:  # the compile pool kills it at its limit
            time.sleep(timeout_s)
            return {"status": "invalid", "reason": over_limit(timeout_s), "compile_s": timeout_s,
                    "n_regs": None, "n_spills": None, "shared_bytes": None}
        self._built.add(key)
        time.sleep(s)
        ok = math.isfinite(self.tflops(config))
        return {"status": "ok" if ok else "invalid", "reason": "" if ok else "failed in the recorded landscape",
                "compile_s": s, "n_regs": None, "n_spills": None, "shared_bytes": None}

    def run(self, problem_flops: float, config: dict, rung: int, rep_ms: float, check: bool,
            cap_ms: float | None = None) -> dict:
        out = {"status": "ok", "reason": "", "rung": rung, "compile_s": 0.0, "bench_s": 0.0}
        tf = self.tflops(config)
        if not math.isfinite(tf):
            out.update(status="invalid", reason="failed in the recorded landscape")
            return out
        from raytune_attn.tune.measure.timing import MIN_REPS, STALL_MAX_MS

        ms = problem_flops / (tf * 1e12) * 1e3
        # check (one run and the comparison), warm-up, repetitions (at least MIN_REPS runs of a kernel longer than
        # the rung's budget)
        capped = cap_ms is not None and ms > cap_ms
        if not capped:
            runs_ms = min(rep_ms, 10) + max(rep_ms, MIN_REPS * ms)
        elif ms <= cap_ms + STALL_MAX_MS:
            runs_ms = 2 * ms  # a host stall could explain the first run: a second confirms (timing.median_ms)
        else:
            # Over by more than a stall could add: one run, or none after a check (BenchActor.run stops on it).
            runs_ms = 0.0 if check else ms
        busy_ms = (self.check_ms + ms if check else 0.0) + runs_ms
        time.sleep(busy_ms / 1e3)
        out.update(latency_ms=ms, tflops=tf, bench_s=busy_ms / 1e3, rel_err=0.0, capped=capped)
        return out


@cache
def _load(raw: str) -> SimulatedGPU:
    spec = json.loads(raw)
    if "landscape" not in spec:
        raise ValueError(f"{ENV} needs a 'landscape' path, got {raw!r}")
    return SimulatedGPU(spec["landscape"], spec.get("compile_scale", 1.0), spec.get("check_ms", 2.0))


def from_env() -> SimulatedGPU | None:
    raw = os.environ.get(ENV, "").strip()
    return _load(raw) if raw else None
