"""The benchmark and the exhaustive landscape recorder, end to end in the interpreter on tiny problems."""

import json
import math

import pandas as pd
import pytest
from conftest import interpreter_only

from benchmarks import exhaustive
from raytune_attn.tune.measure import bench


@pytest.mark.slow
@interpreter_only  # the interpreter's float32 grid: on a GPU SDPA rows join these, and no interpreter note
def test_bench_writes_parquet_and_markdown(tmp_path):
    problems = bench.tiny_grid()[:2]
    df = bench.run_bench(problems, [{"BLOCK_M": 32, "BLOCK_N": 16}, {"BLOCK_M": 16}], tmp_path / "b.parquet",
                         rep_ms=1)
    back = pd.read_parquet(tmp_path / "b.parquet")
    for col in ("gpu", "impl", "B", "H", "S", "D", "causal", "dtype", "ms", "tflops", "config"):
        assert col in back.columns
    assert len(back) == len(df) == 4
    assert (back.impl == "raytune-attn").all() and (back.tflops > 0).all()
    assert json.loads(back.config.iloc[0]) == {"BLOCK_M": 32, "BLOCK_N": 16}
    md = (tmp_path / "b.md").read_text()
    assert "interpreter" in md and md.count("\n|") >= 3


@pytest.mark.slow
@interpreter_only  # the interpreter's space, float32 held to 1e-4: a GPU's float32 dots run in TF32
def test_exhaustive_records_every_config(tmp_path, capsys):
    out = tmp_path / "land.parquet"
    key = "dense-b1-hq2-hkv1-sq20-sk33-d32-causal-float32"
    rc = exhaustive.main(["--space", "search_spaces/cpu/interpreter.yaml", "--fix", "num_stages=1",
                          "--fix", "PRE_LOAD_V=false", "--fix", "SPLIT_MASK=true", "--problem", key,
                          "--out", str(out), "--workers", "1", "--rep-ms", "1"])
    assert rc == 0
    df = pd.read_parquet(out)
    assert len(df) == 6  # BLOCK_M >= BLOCK_N over {16, 32, 64}
    assert (df.status == "ok").all() and (df.rel_err < 1e-4).all() and (df.tflops > 0).all()
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["configs"] == 6 and summary["ok"] == 6


@pytest.mark.slow
def test_exhaustive_resume_measures_only_missing_configs(tmp_path, capsys):
    out = tmp_path / "land.parquet"
    key = "dense-b1-hq2-hkv1-sq20-sk33-d32-causal-float32"
    common = ["--space", "search_spaces/cpu/interpreter.yaml", "--fix", "num_stages=1", "--fix", "PRE_LOAD_V=false",
              "--fix", "SPLIT_MASK=true", "--problem", key, "--out", str(out), "--workers", "1", "--rep-ms", "1"]
    assert exhaustive.main(common + ["--fix", "BLOCK_N=16"]) == 0  # an interrupted run: 3 of the 6 configs
    first = pd.read_parquet(out)
    assert len(first) == 3
    assert exhaustive.main(common + ["--resume"]) == 0
    df = pd.read_parquet(out)
    assert len(df) == 6 and not df.duplicated(["BLOCK_M", "BLOCK_N"]).any()
    # The three rows measured first are kept as they were, not measured again.
    kept = df[df.BLOCK_N == 16].sort_values("BLOCK_M").reset_index(drop=True)
    assert kept.timestamp.tolist() == first.sort_values("BLOCK_M").timestamp.tolist()
    capsys.readouterr()


@pytest.mark.slow
def test_exhaustive_remembers_compile_failures_across_problems_of_one_binary(tmp_path):
    """A config that failed to compile for one problem is not compiled again for a problem with the same binary."""
    from raytune_attn.problem import Problem
    from raytune_attn.tune.measure.compile_pool import CompilePool

    configs = [{"BLOCK_M": 16, "BLOCK_N": 16}, {"BLOCK_M": 16, "BLOCK_N": 32, "num_warps": 3}]  # 3 warps: invalid
    a = Problem.from_key("dense-b1-hq2-hkv1-sq20-sk33-d32-causal-float32")
    b = Problem.from_key("dense-b2-hq2-hkv1-sq40-sk40-d32-causal-float32")  # other sizes, same binary
    failures = {}
    # No compile time limit: on a loaded machine a compile can outlast any fixed limit, and a limit hit would turn the
    # compiled config into a failure, which is not what this test is about.
    with CompilePool(1, timeout_s=math.inf) as pool:
        first = list(exhaustive.measure_problem(a, configs, pool, rep_ms=1, compile_failures=failures))
        assert [r["status"] for r in first] == ["ok", "invalid"] and len(failures) == 1
        sent = []
        real = pool.compile
        pool.compile = lambda p, cfgs: (sent.extend(cfgs), real(p, cfgs))[1]
        second = list(exhaustive.measure_problem(b, configs, pool, rep_ms=1, compile_failures=failures))
    assert sent == [configs[0]]  # only the config that compiled goes to the pool again
    bad = next(r for r in second if r.get("num_warps") == 3)
    assert bad["status"] == "invalid" and bad["reason"] == first[1]["reason"] and bad["compile_s"] == 0.0
