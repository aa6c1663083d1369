"""GPU timing: medians of event-timed runs with the L2 cache flushed before each run and the host's launch latency
kept out of the measurement.

Triton's `do_bench` records the start event, then the host launches the kernel. When the host needs longer to
launch than the GPU needs for the flush before it, the GPU idles between the start event and the kernel, and that
idle time is measured as kernel time. A launch from a busy Ray actor can take several times longer than the
kernels of small prefill problems run: every config of such a problem then measures the same host latency, and
the search ranks noise. Here a spin on the GPU (`torch.cuda._sleep`) is queued after the flush and
before the start event, so the host has queued the kernel by the time the spin ends: the events bracket the kernel
alone, whatever the host's speed.

The spin hides a launch slower than itself only. Beside a sweep's compile processes, one launch of the kernel (its
Python wrapper and Triton's dispatch) can take longer than the spin, and a rung of a short kernel then runs at
the host's pace, not the GPU's (docs/benchmarks has the measurements). So the timed callable is captured once in
a CUDA graph and the runs replay it, which costs the host ~10 us whatever the callable's Python does (callables
that cannot be captured, for example ones that sync, run as they are).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

# GPU cycles to spin before each timed run: 300k cycles are 150 us at a 2 GHz boost clock, longer at lower clocks,
# about twice the launch latency of a loaded Ray actor.
SPIN_CYCLES = 300_000
# The capping's confirming run (see median_ms) queues behind a longer spin: 40M cycles, 20 ms at the boost clock. A
# host slowed by full CPU use can stall a first run by milliseconds, long enough to stop good configs (even a
# problem's best) on one run; the GPU itself does not (docs/benchmarks/idle_first_run.py). The spin hides host
# stalls shorter than itself, for 20 ms of GPU time per capped rung.
CONFIRM_SPIN_CYCLES = 40_000_000
# A first run over the cap by more than this is the config, not a host stall, and needs no second run: the host
# stalls seen add a fraction of this to a run, while confirming a seconds-long config costs its GPU that long again.
STALL_MAX_MS = 1000.0
MIN_REPS = 5  # a rung of a few milliseconds still takes a median of several runs for a kernel that long


def rep_count(est_ms: float, rep_ms: float, per_run_overhead_ms: float) -> int:
    """Timed runs for a budget of `rep_ms` of GPU time, each run costing the kernel plus the flush and the spin."""
    return max(MIN_REPS, int(rep_ms / max(est_ms + per_run_overhead_ms, 1e-6)))


def median_ms(fn: Callable[[], object], *, warmup_ms: float = 10, rep_ms: float = 50,
              cap_ms: float | None = None, stats: dict | None = None, graph: bool = True) -> float:
    """Median time of `fn` in milliseconds. On a GPU: CUDA events around each run, L2 flushed and the host's
    launch latency hidden before each run (see the module doc). In the interpreter: wall clock of a few runs (not
    representative of any GPU).

    `cap_ms` (adaptive capping, as in SMAC): when the first run and a second one both take longer, the faster of
    the two is returned at once; when the first is over `cap_ms` by more than STALL_MAX_MS, it is returned without a
    second. A sweep caps a rung at a multiple of the best latency its problem has seen: a config 10x slower than the
    best cannot win, and its full rung (warm-up and at least MIN_REPS runs) would cost a 2-second kernel 20 s of GPU
    time, where one or two runs cost 2-4 s. A returned time above `cap_ms` is therefore a single run (the faster of
    two, or the one far over the cap).

    `graph`: time replays of `fn` captured in a CUDA graph (see the module doc); `fn` should write into
    preallocated outputs, or the capture allocates them once more.

    `stats`, when given, receives `runs` (timed runs), `graphed` (whether the runs replayed a graph),
    `host_us_per_launch`: the host's microseconds per call (or replay) during the warm-up, when the calls only queue
    work (a diagnostic: a busy host shows here first), and `phase_s`: host seconds of each step (first run and its
    sync, capture, estimate, warm-up, queueing the timed runs, waiting for them), which say where a rung's wall time
    beyond its repetitions went."""
    if torch.cuda.is_available():
        return _gpu_median_ms(fn, warmup_ms, rep_ms, cap_ms, stats if stats is not None else {}, graph)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[1]


_CAPTURE_STREAMS: dict[int, torch.cuda.Stream] = {}


def graphed(fn: Callable[[], object]) -> Callable[[], object] | None:
    """`fn` captured in a CUDA graph, as a callable that replays it; None when `fn` cannot be captured (a host
    sync, a CPU tensor read). `fn` must have run once before (lazy initialization, compilation).
    The low-level capture calls, not `torch.cuda.graph()`: that one runs a full garbage collection per capture,
    ~10-100 ms in a sweep's actor, once per rung."""
    dev = torch.cuda.current_device()
    side = _CAPTURE_STREAMS.get(dev)
    if side is None:
        side = _CAPTURE_STREAMS[dev] = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            g.capture_begin(capture_error_mode="thread_local")
            try:
                fn()
            finally:
                g.capture_end()
    except Exception:  # noqa: BLE001 - not capturable: the caller times fn itself
        torch.cuda.synchronize()
        return None
    torch.cuda.current_stream().wait_stream(side)
    return g.replay


def queue_run(run: Callable[[], object], cache: torch.Tensor, start, end, spin: int = SPIN_CYCLES) -> None:
    """Queue a timed run as every run is timed: L2 flushed (`cache`, a buffer larger than L2, zeroed), then a spin of
    `spin` GPU cycles, then the CUDA events `start` and `end` around `run`."""
    cache.zero_()
    torch.cuda._sleep(spin)
    start.record()
    run()
    end.record()


class _Laps:
    """Host seconds of each named step, added up in `phase` (a step timed twice adds both)."""

    def __init__(self, phase: dict):
        self.phase, self.last = phase, time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.phase[name] = self.phase.get(name, 0.0) + now - self.last
        self.last = now


def _gpu_median_ms(fn, warmup_ms: float, rep_ms: float, cap_ms: float | None = None,
                   stats: dict | None = None, graph: bool = True) -> float:
    stats = {} if stats is None else stats
    import triton

    stats["phase_s"] = {}  # this call's steps only, in a stats dict the caller may reuse
    lap = _Laps(stats["phase_s"])
    cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()  # larger than L2
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def one_run(spin: int = SPIN_CYCLES) -> float:
        queue_run(fn, cache, a, b, spin)
        torch.cuda.synchronize()
        return a.elapsed_time(b)

    first = one_run()
    lap("first")
    if cap_ms is not None and first > cap_ms:
        first, runs = _confirmed_first(one_run, first, cap_ms)
        lap("first")
        if first > cap_ms:
            stats["runs"], stats["graphed"] = runs, False
            return float(first)
    replay = graphed(fn) if graph else None
    lap("capture")
    stats["graphed"] = replay is not None
    fn = replay or fn
    est, overhead = _estimate(fn, cache, first)
    lap("estimate")
    warm = max(1, int(warmup_ms / max(est, 1e-6)))
    t0 = time.perf_counter()
    for _ in range(warm):
        fn()
    stats["host_us_per_launch"] = (time.perf_counter() - t0) / warm * 1e6
    lap("warmup")
    n = stats["runs"] = rep_count(est, rep_ms, overhead)
    return _timed_median(fn, cache, n, lap)


def _confirmed_first(one_run: Callable[[int], float], first: float, cap_ms: float) -> tuple[float, int]:
    """(the first run's time, runs made) once a first run over the cap is confirmed or not.

    A single run is no verdict: the host can stall for milliseconds between the start event and the launch (30
    compile processes on 32 cores, past what the spin hides), and the run is timed before the graph exists, and
    configs capped on one run have turned out among the best of their problem. So a second run confirms: the rung
    stops only if it is over the cap too, unless no stall could explain the first (over the cap by more than
    STALL_MAX_MS). It queues behind CONFIRM_SPIN_CYCLES, so that a host stall of up to 20 ms before its launch is not
    timed either (stalls can come two in a row)."""
    if first <= cap_ms + STALL_MAX_MS:
        return min(first, one_run(CONFIRM_SPIN_CYCLES)), 2
    return first, 1


def _estimate(fn: Callable[[], object], cache: torch.Tensor, first: float) -> tuple[float, float]:
    """(ms of one run, ms the flush and the spin add to each), from back-to-back runs (fewer for long kernels)."""
    k = min(5, max(1, int(10.0 / max(first, 1e-3))))
    a, b, c = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    a.record()
    for _ in range(k):
        fn()
    b.record()
    cache.zero_()
    torch.cuda._sleep(SPIN_CYCLES)
    c.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / k, b.elapsed_time(c)


def _timed_median(fn: Callable[[], object], cache: torch.Tensor, n: int, lap: _Laps) -> float:
    """The median of `n` runs, each queued as `queue_run` queues it, all queued before the one wait."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends, strict=True):
        queue_run(fn, cache, s, e)
    lap("queue")
    torch.cuda.synchronize()
    lap("wait")
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
    return float(times[len(times) // 2])


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12
