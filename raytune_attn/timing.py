"""GPU timing: medians of event-timed runs with the L2 cache flushed between them (`triton.testing.do_bench`).

`rung_timings` measures in rungs of increasing repetitions so that an early-stopping scheduler can drop a poor
config after a cheap first rung; each rung's median stands on its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import torch

# Milliseconds of repetition per rung: ~0.1 s of GPU time in all for a config, the first rung a tenth of it.
DEFAULT_RUNGS_MS = (10, 30, 60)


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


def rung_timings(fn: Callable[[], object], rungs_ms=DEFAULT_RUNGS_MS) -> Iterator[tuple[int, float]]:
    """Yield (rung, median ms) for rungs 1..len(rungs_ms), each measured afresh with more repetitions."""
    for i, rep in enumerate(rungs_ms, start=1):
        yield i, median_ms(fn, warmup_ms=min(rep, 10), rep_ms=rep)


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12
