"""End-to-end sweeps on CPU: a simulated heterogeneous cluster (fake H100 and MI300X nodes running the Triton
interpreter) with a config that kills its worker, and an embedded sweep interrupted and resumed."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import interpreter_only

from raytune_attn.tune.results import read_trials

ROOT = Path(__file__).resolve().parents[1]
CRASH = {"BLOCK_M": 16, "BLOCK_N": 16, "PRE_LOAD_V": False, "num_stages": 1, "SPLIT_MASK": True}  # grid's first


@pytest.fixture(scope="module")
def hetero_cluster():
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=0, num_gpus=1, resources={"accelerator_type:H100": 1})
    c.add_node(num_cpus=0, num_gpus=1, resources={"accelerator_type:MI300X": 1})
    c.wait_for_nodes()
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.mark.slow
# Fake H100 and MI300X labels over CPU nodes running float32 problems in the interpreter; on a GPU host Ray labels
# the real GPU instead.
@interpreter_only
def test_heterogeneous_placement_and_killed_worker(hetero_cluster, tmp_path, monkeypatch):
    import ray

    from raytune_attn.tune.sweep import main

    monkeypatch.setenv("RAYTUNE_ATTN_FAKE_DEVICE", json.dumps({"H100": "nvidia:sm90:NVIDIA H100 80GB HBM3",
                                                               "MI300X": "amd:gfx942:AMD Instinct MI300X"}))
    monkeypatch.setenv("RAYTUNE_ATTN_CRASH_ON", json.dumps(CRASH))
    smoke = tmp_path / "p.yaml"
    smoke.write_text("schema_version: 1\nproblems:\n  - dense-b1-hq2-hkv2-sq64-sk64-d32-causal-float32\n")
    out = tmp_path / "out"
    rc = main(["--address", hetero_cluster.address, "--problems", str(smoke), "--searcher", "grid", "--budget", "3",
               "--rungs", "5,10", "--space", "cpu/interpreter", "--out", str(out), "--name", "hetero",
               "--no-mlflow", "--top-k", "1"])
    assert rc == 0
    df = read_trials(out / "trials.parquet")
    trials = df[(df.kind == "trial") & ~df.trial_id.str.endswith("-final")]
    assert sorted(trials.accelerator_type.unique()) == ["H100", "MI300X"]
    for accel, vendor, arch in (("H100", "nvidia", "sm90"), ("MI300X", "amd", "gfx942")):
        mine = trials[trials.accelerator_type == accel]
        assert len(mine) == 3 and set(mine.vendor) == {vendor} and set(mine.arch) == {arch}
        crashed = mine[(mine.BLOCK_M == 16) & (mine.BLOCK_N == 16) & (mine.num_stages == 1) & mine.SPLIT_MASK]
        assert list(crashed.status) == ["error"] and "worker died" in crashed.reason.iloc[0]
        assert (mine.status != "error").sum() == 2  # the sweep went on after the crash, on the restarted actor
    art = json.loads((out / "best_configs.json").read_text())
    assert {e["accelerator_type"] for e in art["entries"]} == {"H100", "MI300X"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["benchmark_actors"] == 2 and summary["trials"] == 6
    # Each accelerator type's benchmark actors sit on nodes that have it.
    nodes = {n["NodeID"]: n["Resources"] for n in ray.nodes()}
    for accel, infos in summary["actor_info"].items():
        assert infos and all(f"accelerator_type:{accel}" in nodes[i["node_id"]] for i in infos)


@pytest.mark.slow
@interpreter_only  # the embedded cluster's CPU mode (its "not representative" note); on a GPU host it would time GPUs
def test_embedded_sweep_interrupted_and_resumed(tmp_path):
    """The default embedded cluster, MLflow on, SIGINT after some trials, then --resume: no trial lost or re-run."""
    out = tmp_path / "out"
    env = {**os.environ, "TRITON_INTERPRET": "1", "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"}
    env.pop("RAYTUNE_ATTN_CRASH_ON", None)
    env.pop("RAYTUNE_ATTN_FAKE_DEVICE", None)
    env.pop("RAY_ADDRESS", None)
    args = [sys.executable, "-m", "raytune_attn", "tune", "--budget", "4", "--rungs", "5,10", "--out", str(out),
            "--name", "resume", "--num-cpus", "2", "--searcher", "random"]
    p = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Waits for the rows, not for a time: a loaded machine only makes it slower (the deadline guards against a hang).
    deadline = time.time() + 600
    while time.time() < deadline and p.poll() is None and len(list((out / "trials").rglob("*.parquet"))) < 3:
        time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    first_out, _ = p.communicate(timeout=120)
    # The interrupted driver finalized what it had: its rows are in the sweep directory (trials.parquet).
    before = read_trials(out) if out.exists() else pd.DataFrame({"trial_id": [], "kind": []})
    ids_before = set(before[(before.kind == "trial") & ~before.trial_id.str.endswith("-final")].trial_id)
    assert 3 <= len(ids_before) < 8, first_out[-3000:]
    # Rows recorded as if measured with another kernel source (a sweep upgraded between its attempts): the resume
    # refuses them, once the actors have said what they run, before any search starts.
    saved = {f: f.read_bytes() for f in [out / "trials.parquet", *(out / "trials").rglob("*.parquet")] if f.exists()}
    for f in saved:
        t = pq.read_table(f)
        i = t.schema.get_field_index("kernel_source_hash")
        pq.write_table(t.set_column(i, t.schema.field(i), pa.array(["0" * 64] * len(t), pa.string())), f)
    r = subprocess.run(args + ["--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 2 and "measured on another kernel source" in r.stderr, (r.stdout + r.stderr)[-3000:]
    assert f"--warm-start {out}" in r.stderr and not list((out / "ray").glob("resume-attempt*"))
    for f, data in saved.items():
        f.write_bytes(data)
    r = subprocess.run(args + ["--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "resuming" in r.stdout and "not representative" in r.stdout
    assert not (out / "trials").exists()  # the rows logged as trials ended are in trials.parquet now, once
    df = read_trials(out)
    df = df[(df.kind == "trial") & ~df.trial_id.str.endswith("-final")]
    assert df.trial_id.is_unique and len(df) == 8  # every trial once: none lost, none re-run
    assert ids_before <= set(df.trial_id)
    final = read_trials(out / "trials.parquet")
    assert len(final[(final.kind == "trial") & ~final.trial_id.str.endswith("-final")]) == 8
    art = json.loads((out / "best_configs.json").read_text())
    assert len(art["entries"]) == 2 and all(e["n_trials"] == 4 for e in art["entries"])
    assert (tmp_path / "mlflow.db").exists()
