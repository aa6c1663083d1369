"""The sweep's MLflow logging actor (sweep/tracking_host.py) on a local Ray, against a real sqlite tracking store."""

from __future__ import annotations

import pandas as pd
import pytest

from raytune_attn.problem import Problem
from raytune_attn.tune import results

P = Problem(batch=1, hq=2, hkv=2, seqlen_q=64, seqlen_k=64, head_dim=32, causal=True, dtype="float32")
PROV = {"gpu": "cpu", "vendor": "cpu", "arch": "cpu"}


@pytest.fixture(scope="module")
def local_ray():
    import ray

    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


def _row(trial_id: str, tflops: float, status: str = "ok") -> dict:
    knobs = {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2, "PRE_LOAD_V": False}
    return results.trial_row(P.to_dict(), knobs, {"status": status, "reason": "", "rung": 2, "tflops": tflops,
                                                   "latency_ms": 1.0, "compile_s": 0.5, "bench_s": 0.1},
                             PROV, trial_id=trial_id, sweep_id="s", sweep_name="s")


@pytest.mark.slow
def test_child_runs_logged_from_the_actor_nest_under_their_search(local_ray, tmp_path):
    from mlflow.tracking import MlflowClient

    from raytune_attn.tune.sweep.tracking_host import RemoteTracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    t = RemoteTracker("sweep-a", uri)
    t.start_searches({"CPU/a": ("CPU", P.to_dict(), PROV, {"searcher": "random"})})
    rows = [_row("t1", 2.0), _row("t2", 3.0), _row("t3", 0.0, status="invalid")]
    for r in rows:
        t.log_trial("CPU/a", r, [{"rung": 1, "tflops": r["tflops"], "latency_ms": 1.0}])
    t.log_trial("CPU/unknown", rows[0])  # a search without a parent run is skipped, not an error
    (tmp_path / "best_configs.json").write_text("{}")
    best = {"config": results.row_config(rows[1]), "tflops": 3.0, "latency_ms": 1.0, "trial_id": "t2"}
    t.finish_search("CPU/a", best, {}, pd.DataFrame(rows), tmp_path / "best_configs.json")
    assert t.drain() == []

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("sweep-a")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    parent = [r for r in runs if r.data.tags.get("raytune_attn.role") == "search"]
    children = [r for r in runs if r.data.tags.get("raytune_attn.role") == "trial"]
    assert len(parent) == 1 and sorted(r.data.tags["trial_id"] for r in children) == ["t1", "t2", "t3"]
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parent[0].info.run_id}
    assert parent[0].data.metrics["best_tflops"] == 3.0 and parent[0].info.status == "FINISHED"


@pytest.mark.slow
def test_a_store_mlflow_refuses_stops_the_sweep_with_its_reason(local_ray, tmp_path):
    from raytune_attn.tune.sweep.tracking_host import RemoteTracker

    uri = f"file://{tmp_path / 'plain'}"  # MLflow >= 3.13 refuses a plain file store
    t = RemoteTracker("sweep-b", uri)
    with pytest.raises(ValueError, match="MLflow tracking at file://.* could not start: .*--no-mlflow"):
        t.start_searches({"CPU/a": ("CPU", P.to_dict(), PROV, {})})
