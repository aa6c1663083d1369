"""GPU timing: medians of event-timed runs with the L2 cache flushed between them (`triton.testing.do_bench`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def median_ms(fn: Callable[[], object], *, warmup_ms: float = 10, rep_ms: float = 50) -> float:
    """Median time of `fn` in milliseconds. On a GPU: CUDA events, L2 flushed before each run. In the
    interpreter: wall clock of a few runs (not representative of any GPU)."""
    if torch.cuda.is_available():
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[1]


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12
