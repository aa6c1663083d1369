"""A paged problem set tuned end to end by `raytune-attn tune` on the CPU (Triton interpreter), and its artifact
used by `paged_attention` without a config."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import interpreter_only

from raytune_attn import artifact, paged_runtime, runtime
from raytune_attn.device import detect
from raytune_attn.paged import paged_attention
from raytune_attn.tune.measure.workload import accept, make_workload, reference
from raytune_attn.tune.sweep.problems import load_problems
from raytune_attn.validation import check_paged

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@interpreter_only  # a sweep in the interpreter on the CPU: on a GPU host Ray would place it on the GPU
def test_paged_problems_tune_into_an_artifact_the_runtime_uses(tmp_path):
    problems = load_problems("cpu_paged_smoke")
    out = tmp_path / "out"
    # This checkout first; the caller's own path after it (where Ray and the rest may be installed).
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for name in ("RAY_ADDRESS", "RAYTUNE_ATTN_CRASH_ON", "RAYTUNE_ATTN_FAKE_DEVICE", "RAYTUNE_ATTN_SIMULATE"):
        env.pop(name, None)
    args = [sys.executable, "-m", "raytune_attn", "tune", "--problems", "cpu_paged_smoke", "--budget", "1",
            "--rungs", "5", "--top-k", "0", "--family-k", "0", "--no-mlflow", "--num-cpus", "2",
            "--searcher", "random", "--out", str(out), "--name", "paged"]
    r = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]

    art = artifact.load(out / "best_configs.json")
    entries = {e["problem_key"]: e for e in art["entries"]}
    assert set(entries) == {p.key for p in problems}
    for p in problems:
        cfg = entries[p.key]["config"]
        assert check_paged(cfg, head_dim=p.head_dim, group=p.hq // p.hkv) == cfg  # complete and valid

    # The runtime picks each entry for a call of its problem's shape bucket, from host ints only.
    runtime.load_configs(out / "best_configs.json", device_info=detect())
    try:
        for p in problems:
            cfg, how = paged_runtime.lookup(num_seqs=p.batch, max_seqlen_q=p.seqlen_q, max_seqlen_k=p.seqlen_k,
                                            hq=p.hq, hkv=p.hkv, head_dim=p.head_dim, dtype=p.dtype,
                                            block_size=p.block_size)
            assert (how, cfg) == ("bucket:" + p.key, entries[p.key]["config"])
        w = make_workload(problems[0], device="cpu")
        got = paged_attention(w.q, w.k, w.v, block_table=w.block_table, seqused_k=w.seqused_k,
                              cu_seqlens_q=w.cu_seqlens_q, max_seqlen_q=problems[0].seqlen_q,
                              max_seqlen_k=problems[0].seqlen_k)
        assert accept(got, reference(w))[0]
    finally:
        runtime.clear_configs()


@pytest.mark.slow
def test_sweep_pieces_tune_a_paged_problem_in_process(tmp_path):
    """The sweep's own pieces without Ray: the paged space picked for the problem, the GP over it screened by the
    one validation, the benchmark actor's check and timing, result rows, winners, the artifact and the lookup."""
    from types import SimpleNamespace

    from raytune_attn.tune import results, winners
    from raytune_attn.tune.search import make_searcher
    from raytune_attn.tune.sweep.bench_actor import _Bench
    from raytune_attn.tune.sweep.run import _space_for
    from raytune_attn.validation import Screen

    p = load_problems("cpu_paged_smoke")[1]  # the mixed batch: a prefill chunk beside two decode rows
    space = _space_for(SimpleNamespace(space=None), {"arch": "interpreter"}, True, p)
    assert space.source == "cpu/interpreter_paged"
    screen = Screen.for_problem(space.arch, p.head_dim, p.dtype, p.hq // p.hkv)
    searcher = make_searcher("gp", space, seed=0, prefilter=screen, problem=p)
    bench = _Bench("CPU")
    rows = []
    for i in range(3):
        cfg = searcher.suggest(f"t{i}")
        out = bench.run(p.to_dict(), cfg, 1, 5.0, True)
        assert out["status"] == "ok", out  # every config of the space passes the reference check
        searcher.on_trial_complete(f"t{i}", {"tflops": out["tflops"]})
        rows.append(results.trial_row(p.to_dict(), cfg, {**out, "rung": 1}, {"vendor": "cpu", "arch": "interpreter",
                                                                              "accelerator_type": "CPU"},
                                      trial_id=f"t{i}", sweep_id="s"))
    results.write_trials(rows, tmp_path / "trials")
    df = results.read_trials(tmp_path / "trials")
    assert set(df["problem_key"]) == {p.key} and df["NUM_SEGMENTS"].notna().all()
    path = artifact.write(winners.build_artifact(df), tmp_path / "best_configs.json")
    (entry,) = artifact.load(path)["entries"]
    best = max(rows, key=lambda r: r["tflops"])
    assert entry["problem_key"] == p.key and entry["config"] == results.row_config(best)
