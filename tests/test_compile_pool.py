"""The compile pool: results for good and bad configs, and the per-compile time limit."""

from raytune_attn.compile_pool import CompilePool
from raytune_attn.problem import Problem

P = Problem(batch=1, hq=2, hkv=2, seqlen_q=16, seqlen_k=16, head_dim=32, causal=False, dtype="float32")


def test_good_and_bad_configs():
    with CompilePool(1, timeout_s=300) as pool:
        results = list(pool.compile(P, [{"BLOCK_M": 16}, {"BLOCK_M": 48}, {"num_warps": 3}]))
    by = {r.config.get("BLOCK_M", r.config.get("num_warps")): r for r in results}
    assert len(results) == 3
    assert by[16].status == "ok" and by[16].problem_key == P.key
    assert by[48].status == "invalid" and "BLOCK_M=48" in by[48].reason
    assert by[3].status == "invalid" and "num_warps" in by[3].reason


def test_time_limit_kills_and_replaces_worker():
    # A fresh worker spends seconds importing torch: a 10 ms limit is exceeded by every compile, each of which
    # must come back invalid with the reason, the pool replacing the killed worker each time.
    with CompilePool(1, timeout_s=0.01) as pool:
        results = list(pool.compile(P, [{"BLOCK_M": 16}, {"BLOCK_M": 32}]))
        assert [r.status for r in results] == ["invalid", "invalid"]
        assert all("exceeded" in r.reason for r in results)
        assert all(proc.is_alive() for proc, _ in pool._procs)
