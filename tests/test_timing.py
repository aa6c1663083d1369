"""Timing: the run count per rung (GPU path) and the interpreter's wall-clock median. The GPU path itself (the
spin that hides the host's launch latency) runs on the GPU machines only; its effect is recorded in
docs/benchmarks/README.md, runs 7 and 18."""

import time

import pytest
import torch

from raytune_attn.tune.measure.timing import MIN_REPS, median_ms, rep_count, tflops


def test_rep_count_spends_the_rung_budget_and_never_fewer_than_min_reps():
    # A 20 us kernel with 0.2 ms of flush and spin per run: a 10 ms rung is 45 runs, which together take ~10 ms.
    n = rep_count(0.02, 10.0, 0.2)
    assert n == 45 and n * (0.02 + 0.2) == pytest.approx(10.0, rel=0.02)
    # A kernel longer than the rung still gets a median of MIN_REPS runs.
    assert rep_count(16.0, 10.0, 0.2) == MIN_REPS
    assert rep_count(0.5, 200.0, 0.2) == int(200 / 0.7)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter path")
def test_cpu_median_is_the_middle_of_three_runs():
    calls = []
    assert median_ms(lambda: calls.append(1)) >= 0.0 and len(calls) == 3
    assert tflops(2e12, 1000.0) == pytest.approx(2.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU path")
def test_gpu_median_stops_after_two_runs_over_the_cap():
    calls = []

    def fn():  # about a millisecond of GPU time
        calls.append(1)
        torch.cuda._sleep(2_000_000)

    fn()  # the first call in a process also loads the sleep kernel (~15 ms): what the capped run must not see
    torch.cuda.synchronize()
    calls.clear()
    stats: dict = {}
    capped = median_ms(fn, rep_ms=20, cap_ms=0.05, stats=stats)
    assert capped > 0.05 and len(calls) == 2 and stats["runs"] == 2  # the first run over the cap, then a second
    calls.clear()
    full = median_ms(fn, rep_ms=5, cap_ms=1000.0, graph=False)  # without a graph, each run calls fn
    assert len(calls) >= 1 + MIN_REPS and capped == pytest.approx(full, rel=0.5)
    graphed_ms = median_ms(fn, rep_ms=5, cap_ms=1000.0, stats=stats)  # with one, fn's runs are replays
    assert stats["graphed"] and stats["runs"] >= MIN_REPS and graphed_ms == pytest.approx(full, rel=0.1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU path")
def test_a_host_stall_before_the_launch_does_not_cap_the_rung():
    # A ~0.5 ms kernel whose host stalls 5 ms before each launch (a loaded sweep host): the first run times the
    # stall; the confirming run queues behind a 20 ms spin, so it times the kernel alone and the rung goes on.
    def fn():
        time.sleep(0.005)
        torch.cuda._sleep(1_000_000)

    fn()
    torch.cuda.synchronize()
    alone = median_ms(lambda: torch.cuda._sleep(1_000_000), rep_ms=5)
    stats: dict = {}
    ms = median_ms(fn, rep_ms=20, cap_ms=4 * alone, stats=stats)
    assert stats["runs"] >= MIN_REPS  # not capped after two runs: the rung ran its repetitions
    assert stats["graphed"] and ms == pytest.approx(alone, rel=0.3)  # replays of the captured kernel, no stall


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU path")
def test_gpu_median_stops_after_one_run_over_the_cap_by_more_than_a_stall(monkeypatch):
    from raytune_attn.tune.measure import timing

    calls = []

    def fn():  # about a millisecond of GPU time
        calls.append(1)
        torch.cuda._sleep(2_000_000)

    fn()
    torch.cuda.synchronize()
    calls.clear()
    monkeypatch.setattr(timing, "STALL_MAX_MS", 0.2)  # a 1 ms run over a 0.05 ms cap is over it by more
    stats: dict = {}
    capped = median_ms(fn, rep_ms=20, cap_ms=0.05, stats=stats)
    assert capped > 0.25 and len(calls) == 1 and stats["runs"] == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU path")
def test_graphed_replays_the_captured_work_and_refuses_a_sync():
    from raytune_attn.tune.measure.timing import graphed

    x = torch.zeros(1024, device="cuda")
    fn = lambda: x.add_(1.0)  # noqa: E731
    fn()
    replay = graphed(fn)
    assert replay is not None
    torch.cuda.synchronize()
    assert x[0].item() == 1.0  # capturing does not run the work
    for _ in range(3):
        replay()
    torch.cuda.synchronize()
    assert torch.equal(x, torch.full_like(x, 4.0))
    assert graphed(lambda: x.sum().item()) is None  # a host sync cannot be captured
    assert (x + 1).sum().item() == 5.0 * 1024  # and the device is still usable


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU path")
def test_graphed_timing_measures_the_same_kernel_and_its_output_is_right():
    from raytune_attn.config import default_config
    from raytune_attn.problem import Problem
    from raytune_attn.tune.measure.workload import accept, make_workload, reference

    p = Problem(batch=4, hq=8, hkv=2, seqlen_q=512, seqlen_k=512, head_dim=64, causal=True, dtype="bfloat16",
                varlen=True)
    w = make_workload(p)
    cfg = default_config(64)
    buf = torch.empty_like(w.q)
    w.run(cfg, out=buf)
    stats: dict = {}
    buf.zero_()
    graph_ms = median_ms(lambda: w.run(cfg, out=buf), rep_ms=20, stats=stats)
    assert stats["graphed"] is True
    assert accept(buf, reference(w))[0]  # the replays wrote the right output
    plain_stats: dict = {}
    plain_ms = median_ms(lambda: w.run(cfg, out=buf), rep_ms=20, stats=plain_stats, graph=False)
    assert plain_stats["graphed"] is False
    assert graph_ms == pytest.approx(plain_ms, rel=0.25)
