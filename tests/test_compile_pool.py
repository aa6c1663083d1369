"""The compile pool: results for good and bad configs, the per-compile time limit, closing busy workers."""

import time

import pytest
from conftest import interpreter_only

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
    # Every compile exceeds a limit of 0 s: each must come back invalid with the reason, the pool replacing the
    # killed worker each time (its replacement's start is not counted against the next compile).
    with CompilePool(1, timeout_s=0.0) as pool:
        results = list(pool.compile(P, [{"BLOCK_M": 16}, {"BLOCK_M": 32}]))
        assert [r.status for r in results] == ["invalid", "invalid"]
        assert all(r.reason == "compile exceeded 0 s" for r in results)
        assert all(proc.is_alive() for proc, _ in pool._procs)
    with CompilePool(1, timeout_s=300) as pool:  # a limit of the call's own (the sweep's relative limit)
        [r] = pool.compile(P, [{"BLOCK_M": 16}], timeout_s=0.0)
        assert r.status == "invalid" and r.reason == "compile exceeded 0 s"


@pytest.mark.slow
@interpreter_only  # on a GPU each config is a real compile of seconds, over the 1 s limit whatever the start costs
def test_a_workers_start_is_not_part_of_a_compiles_time(monkeypatch):
    """Workers that take 3 s to start (the test hook), a 1 s limit: the configs (validated in milliseconds in the
    interpreter) compile ok, on a fresh pool and on the worker that replaced one killed at the limit."""
    monkeypatch.setenv("RAYTUNE_ATTN_WORKER_START_S", "3")
    with CompilePool(1, timeout_s=1.0) as pool:
        first = list(pool.compile(P, [{"BLOCK_M": 16}]))
        killed = list(pool.compile(P, [{"BLOCK_M": 32}], timeout_s=0.0))
        after = list(pool.compile(P, [{"BLOCK_M": 64}]))
    assert [r.status for r in first + killed + after] == ["ok", "invalid", "ok"]
    assert after[0].compile_s < 1.0


def test_compile_actor_closes_busy_workers_in_one_shared_grace_period():
    """Six pools whose workers are busy (a fresh worker first imports torch for seconds): closing them all takes
    one grace period, not one per pool, and leaves no worker alive."""
    from raytune_attn.tune.sweep.compile_actor import _Compiler

    comp = _Compiler(workers=6, timeout_s=60)
    for pool in comp._all:
        pool._procs.append(pool._spawn())
        pool._procs[0][1].send((P.to_dict(), {"BLOCK_M": 16}))
    procs = [proc for pool in comp._all for proc, _ in pool._procs]
    t0 = time.monotonic()
    comp.close(grace_s=0.5)
    assert time.monotonic() - t0 < 2.0  # one after another: at least 6 x 0.5 s
    assert not any(p.is_alive() for p in procs)


def _cache_entries(cache_dir) -> set[str]:
    return {p.name for p in cache_dir.iterdir()}


@pytest.mark.slow
def test_pool_compiles_for_a_named_target_the_binary_the_launcher_launches(tmp_path, monkeypatch):
    """A CPU-only node warms the cache for another node's GPU: the pool compiles for "cuda:80" the binary of the
    real problem (keys in whole 128-key blocks, where a shrunken twin had a ragged one), with the resources the
    cross-compiler reads from that binary, into the shared cache, where the cross-compiler's compile of the same
    launch then finds it (no new entry); a config whose shared memory cannot fit is refused before compiling."""
    from raytune_attn.config import validate_config
    from raytune_attn.tune.measure import cross_compile as cc
    from raytune_attn.tune.measure.target_build import launch_spec

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    problem = Problem(batch=2, hq=4, hkv=4, seqlen_q=4096, seqlen_k=4096, head_dim=32, causal=False)
    config = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 1}
    too_big = {"BLOCK_M": 256, "BLOCK_N": 256, "num_warps": 8, "num_stages": 8}
    with CompilePool(1, timeout_s=1800, target="cuda:80") as pool:
        ok, big = list(pool.compile(problem, [config, too_big]))
    assert big.status == "invalid" and "shared memory" in big.reason
    assert ok.status == "ok", ok.reason
    warmed = _cache_entries(tmp_path)
    full = validate_config(config, head_dim=problem.head_dim, vendor="nvidia")
    [row] = cc.cross_compile(_one_config_space(config), "cuda:80", [problem], workers=1, timeout_s=1800)
    assert row["status"] == "compiled" and _cache_entries(tmp_path) == warmed
    assert (ok.shared_bytes, ok.n_regs) == (row["shared_bytes"], row["registers"])
    assert ok.n_spills == row["local_bytes"] // 4
    _, _, kwargs = launch_spec(problem, full, "cuda")
    assert kwargs["EVEN_K"] == (problem.seqlen_k % config["BLOCK_N"] == 0)


@pytest.mark.slow
def test_pool_compiles_a_paged_config_for_a_named_target(tmp_path, monkeypatch):
    """The paged kernel's configs too: the pool builds them for "cuda:90" with the cross-compiler's paged launch
    (the split-KV kernel and its reduce), reading registers and shared memory from the binary."""
    from raytune_attn.tune.sweep.problems import load_problems

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    paged = load_problems("cpu_paged_smoke")[0]
    with CompilePool(1, timeout_s=1800, target="cuda:90") as pool:
        [r] = list(pool.compile(paged, [{"NUM_SEGMENTS": 2, "BLOCK_N": 16}]))
    assert r.status == "ok", r.reason
    assert r.shared_bytes and r.n_regs and r.problem_key == paged.key


def _one_config_space(config: dict):
    from raytune_attn.tune.search.space import parse_space

    return parse_space({"schema_version": 1, "vendor": "nvidia", "arch": "sm80",
                        "parameters": {k: [v] for k, v in config.items()}}, source="one-config")


@interpreter_only  # the interpreter's compile of a float32 CPU twin stands in for the GPU's
def test_paged_configs_go_through_the_paged_kernels_compile(monkeypatch):
    """On a GPU node the pool builds a paged problem's config with the paged kernel's own warm-up (not the dense
    kernel's launch spec, which has knobs a paged config lacks), validated by the paged rules: a bad knob is
    invalid naming it (for a target named for other nodes: the next test)."""
    from raytune_attn.tune.measure import compile_pool, paged_workload
    from raytune_attn.tune.measure.targets import TARGETS
    from raytune_attn.tune.sweep.problems import load_problems

    paged = load_problems("cpu_paged_smoke")[0]
    built = []

    def on_cpu(problem, config, device="cuda"):  # this machine has no GPU: the interpreter's compile stands in
        built.append((problem.key, config["NUM_SEGMENTS"]))
        return paged_workload.make_paged_workload(paged_workload.compile_twin(problem), device="cpu",
                                                  random=False).compile(config)

    monkeypatch.setattr(paged_workload, "compile_paged", on_cpu)
    target = TARGETS["cuda:90"]
    status, reason, *_ = compile_pool._compile(paged, {"NUM_SEGMENTS": 2}, target, load=True)
    assert (status, reason) == ("ok", "") and built == [(paged.key, 2)]
    status, reason, *_ = compile_pool._compile(paged, {"NUM_SEGMENTS": 3}, target, load=True)
    assert status == "invalid" and "NUM_SEGMENTS" in reason and len(built) == 1
    status, reason, *_ = compile_pool._compile(paged, {"USE_TMA": True}, target, load=True)
    assert status == "invalid" and "USE_TMA" in reason
