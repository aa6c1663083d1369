"""The whole sweep pipeline against a simulated GPU (sweep/simulate.py): the benchmark actor answers from the
recorded H100 landscape, so what the sweep reports can be checked against that landscape exactly."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from raytune_attn.tune.search.landscape import load_landscape
from raytune_attn.tune.sweep.simulate import SimulatedGPU

ROOT = Path(__file__).resolve().parents[1]
LAND = ROOT / "tests/data/landscape_h100_d128_causal_s4096.parquet"
KNOBS = ["BLOCK_M", "BLOCK_N", "PRE_LOAD_V", "num_warps", "num_stages"]


@pytest.mark.slow
def test_simulated_gpu_answers_from_the_landscape():
    sim = SimulatedGPU(str(LAND), compile_scale=0.0, check_ms=0.0)
    land = load_landscape(LAND)
    df = pd.read_parquet(LAND)
    ok = df[df.status == "ok"].iloc[0]
    bad = df[df.status != "ok"].iloc[0]
    cfg = {k: ok[k].item() if hasattr(ok[k], "item") else ok[k] for k in KNOBS}  # SPLIT_MASK etc. fixed
    out = sim.run(1e12, cfg, 1, 1.0, True)
    assert out["status"] == "ok" and out["tflops"] == pytest.approx(land.value({**cfg, "SPLIT_MASK": True,
                                                                                  "USE_TMA": False}))
    assert out["latency_ms"] == pytest.approx(1e12 / (out["tflops"] * 1e12) * 1e3)
    assert sim.run(1e12, {k: bad[k].item() if hasattr(bad[k], "item") else bad[k] for k in KNOBS}, 1, 1.0,
                   True)["status"] == "invalid"
    first = sim.compile(cfg, ("d128",))
    again = sim.compile(cfg, ("d128",))
    assert first["compile_s"] == 0.0 and again["compile_s"] == 0.0  # scale 0: no sleeping in this test


def _h100_node(gpus: int):
    """A Ray cluster: a 2-CPU head and one node with `gpus` fake H100s (shut down when the test ends)."""
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    c.add_node(num_cpus=0, num_gpus=gpus, resources={"accelerator_type:H100": gpus})
    c.wait_for_nodes()
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture
def fake_gpu_cluster():
    yield from _h100_node(1)


@pytest.fixture
def fake_two_gpu_cluster():
    yield from _h100_node(2)


def _simulated_sweep(cluster, tmp_path, monkeypatch, *flags):
    """A sweep of two problems on the simulated H100(s) of `cluster` (budget 8 each); returns its output folder."""
    from raytune_attn.tune.sweep import main

    monkeypatch.setenv("RAYTUNE_ATTN_SIMULATE", json.dumps({"landscape": str(LAND), "compile_scale": 0.02}))
    monkeypatch.setenv("RAYTUNE_ATTN_FAKE_DEVICE", "nvidia:sm90:NVIDIA H100 80GB HBM3 (simulated)")
    problems = tmp_path / "two.yaml"  # two keys that differ only in sizes: they share every compiled binary
    problems.write_text(
        "schema_version: 1\nname: two\n"
        "defaults: {hq: 32, hkv: 8, head_dim: 128, causal: true, dtype: bfloat16, varlen: true}\n"
        "problems:\n  - {batch: 4, seqlen: 256}\n  - {batch: 8, seqlen: 512}\n")
    out = tmp_path / "out"
    rc = main(["--address", cluster.address, "--problems", str(problems), "--budget", "8",
               "--space", str(ROOT / "search_spaces/nvidia/sm90_study.yaml"), "--out", str(out), "--no-mlflow",
               "--compile-workers", "2", "--rungs", "2,4", "--final-rep-ms", "4", *flags])
    assert rc == 0
    return out


@pytest.mark.slow
def test_simulated_sweep_reports_the_landscape(fake_gpu_cluster, tmp_path, monkeypatch):
    out = _simulated_sweep(fake_gpu_cluster, tmp_path, monkeypatch, "--searcher", "gp", "--trials-per-gpu", "4")
    sim = SimulatedGPU(str(LAND))
    df = pd.read_parquet(out / "trials.parquet")
    trials = df[(df.kind == "trial") & ~df.trial_id.str.endswith("-final")]
    assert len(trials) == 16 and set(trials.status) <= {"ok", "stopped", "invalid"}
    for r in trials.to_dict("records"):  # every measurement is the landscape's value of that config
        want = sim.tflops({k: r[k] for k in KNOBS})
        if r["status"] == "invalid":
            assert not math.isfinite(want)
        else:
            assert r["tflops"] == pytest.approx(want)
    # Both GP searches start from the same screening design (in their own seeded orders): the configs both measured
    # were compiled once for both problems (or ahead by the sweep's prefetch), never once per problem.
    by_cfg = trials.groupby(KNOBS)["compile_s"].agg(["count", lambda c: int((c > 0).sum())])
    by_cfg.columns = ["count", "paid"]
    assert (by_cfg["count"] == 2).sum() >= 4 and (by_cfg["paid"] <= 1).all()
    s = json.loads((out / "summary.json").read_text())
    assert 0 < s["gpu_busy_fraction"] <= 1 and s["overhead_per_trial_s"] >= 0
    assert s["idle_pipeline_s"] + s["idle_compile_bound_s"] + s["lease_run_s"] <= s["tune_wall_s"] * 1.05
    # Tune's phases are consecutive stretches of its run: they add up to its wall time.
    ph = s["tune_phases_s"]
    assert all(v is not None and v >= 0 for v in ph.values())
    assert sum(ph.values()) == pytest.approx(s["tune_wall_s"], abs=1e-3)
    # Tune reused its trial processes: the 16 trials reported from fewer processes than trials. (Not "at least 4", the
    # trials in flight: a process counts once its trial reports, and a loaded CI machine saw 3.)
    assert 1 <= s["trial_processes"] < 16
    finals = df[df.trial_id.str.endswith("-final") & (df.status == "ok")].groupby("problem_key").size().to_dict()
    assert {x["problem_key"]: x["remeasured"] for x in s["searches"]} == finals and all(finals.values())
    # The two problems are one family (sizes differ): each search's final re-measure adds the other's winner by its
    # rungs when it never measured that config itself (--family-k, default 2), and the winner comes from both.
    best = json.loads((out / "best_configs.json").read_text())["entries"]
    assert len(best) == 2
    fam = df[df.trial_id.str.endswith("-final") & df.trial_id.str.contains("-for")]
    for e in best:
        mine = trials.problem_key == e["problem_key"]
        own, other = trials[mine & trials.tflops.notna()], trials[~mine & trials.tflops.notna()]
        win = other.loc[other.tflops.idxmax(), KNOBS].to_dict()
        added = fam[fam.problem_key == e["problem_key"]]
        if own.merge(pd.DataFrame([win]), on=KNOBS).empty:
            assert len(added) == 1 and added[KNOBS].iloc[0].to_dict() == win
            assert added.tflops.iloc[0] == pytest.approx(sim.tflops(win))
        else:
            assert added.empty
        assert e["tflops"] == pytest.approx(max([own.tflops.max(), *added.tflops]))


@pytest.mark.slow
def test_final_re_measure_compares_each_search_on_one_gpu(fake_two_gpu_cluster, tmp_path, monkeypatch):
    """Two GPUs: trials run on either, but a search's top configs are re-measured on one GPU (the winner is a
    same-GPU comparison), and the searches are spread over the two."""
    out = _simulated_sweep(fake_two_gpu_cluster, tmp_path, monkeypatch, "--searcher", "random", "--trials-per-gpu",
                           "3", "--top-k", "3", "--family-k", "0")
    df = pd.read_parquet(out / "trials.parquet")
    # Baseline rows (SDPA, timed where a GPU is) carry no extra: None or NaN in the frame.
    df["gpu"] = [json.loads(e).get("gpu") if isinstance(e, str) and e else None for e in df.extra]
    trials = df[(df.kind == "trial") & ~df.trial_id.str.endswith("-final") & df.tflops.notna()]
    # Which GPU runs a trial is whichever actor is free first (on a loaded machine one may take them all): only
    # that every trial names its GPU is certain; the final re-measure's placement below is decided, not raced.
    assert trials.gpu.notna().all() and trials.gpu.nunique() in (1, 2)
    final = df[df.trial_id.str.endswith("-final")]
    assert len(final) == 6
    per_search = final.groupby("problem_key").gpu.agg(["nunique", "first"])
    assert (per_search["nunique"] == 1).all()
    assert per_search["first"].nunique() == 2
