"""The compile pool: results for good and bad configs, the per-compile time limit, closing busy workers."""

import time

import pytest

from raytune_attn.problem import Problem
from raytune_attn.tune.measure.compile_pool import CompilePool

P = Problem(batch=1, hq=2, hkv=2, seqlen_q=16, seqlen_k=16, head_dim=32, causal=False, dtype="float32")


@pytest.mark.slow
def test_good_and_bad_configs():
    with CompilePool(1, timeout_s=300) as pool:
        results = list(pool.compile(P, [{"BLOCK_M": 16}, {"BLOCK_M": 48}, {"num_warps": 3}]))
    by = {r.config.get("BLOCK_M", r.config.get("num_warps")): r for r in results}
    assert len(results) == 3
    assert by[16].status == "ok" and by[16].problem_key == P.key
    assert by[48].status == "invalid" and "BLOCK_M=48" in by[48].reason
    assert by[3].status == "invalid" and "num_warps" in by[3].reason


@pytest.mark.slow
def test_time_limit_kills_and_replaces_worker():
    # A fresh worker spends seconds importing torch: a 10 ms limit is exceeded by every compile, each of which
    # must come back invalid with the reason, the pool replacing the killed worker each time.
    with CompilePool(1, timeout_s=0.01) as pool:
        results = list(pool.compile(P, [{"BLOCK_M": 16}, {"BLOCK_M": 32}]))
        assert [r.status for r in results] == ["invalid", "invalid"]
        assert all("exceeded" in r.reason for r in results)
        assert all(proc.is_alive() for proc, _ in pool._procs)


def test_compile_actor_closes_busy_workers_in_one_shared_grace_period():
    """Six pools whose workers are busy (a fresh worker first imports torch for seconds): closing them all takes
    one grace period, not one per pool, and leaves no worker alive."""
    from raytune_attn.tune.sweep.actors import _Compiler

    comp = _Compiler(workers=6, timeout_s=60)
    for pool in comp._all:
        pool._procs.append(pool._spawn())
        pool._procs[0][1].send((P.to_dict(), {"BLOCK_M": 16}))
    procs = [proc for pool in comp._all for proc, _ in pool._procs]
    t0 = time.monotonic()
    comp.close(grace_s=0.5)
    assert time.monotonic() - t0 < 2.0  # one after another: at least 6 x 0.5 s
    assert not any(p.is_alive() for p in procs)
