"""Tracking against a real `mlflow server` on 127.0.0.1 (no mocks), checked through its REST API."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import requests

from raytune_attn import artifact, provenance, runtime
from raytune_attn.problem import Problem
from raytune_attn.tune import results, tracking, winners

P = Problem(1, 2, 2, 17, 17, 32, True, "float32")
P2 = Problem(1, 2, 2, 64, 64, 32, True, "float32")
# `python -m mlflow`: the MLflow of this interpreter, whether or not its console script sits beside it (a site-packages
# put on PYTHONPATH brings the package but no `mlflow` in the interpreter's bin/).
MLFLOW = [sys.executable, "-m", "mlflow"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # The server needs MLflow's server side (Flask, ...), which a client-only install lacks (mlflow-skinny, or a
    # site-packages bundle without it): the tests over REST skip, saying so, there.
    pytest.importorskip("flask", reason="`mlflow server` needs Flask, which is not installed")
    tmp = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    env.pop("MLFLOW_TRACKING_URI", None)
    log = open(tmp / "server.log", "wb")
    proc = subprocess.Popen(
        [*MLFLOW, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp / 'db'}", "--default-artifact-root", str(tmp / "art")],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=tmp,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"mlflow server exited with {proc.returncode}: {(tmp / 'server.log').read_text()[-2000:]}")
            try:
                if requests.get(f"{url}/health", timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            if time.time() > deadline:
                pytest.fail(f"mlflow server did not start: {(tmp / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        _stop(proc)
        log.close()


def _stop(proc: subprocess.Popen) -> None:
    """Ends the server's process group; one that has exited already (a failed start, reported above) is left be."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except ProcessLookupError:
        proc.wait()
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def api(url, method, path, **kw):
    r = requests.request(method, f"{url}/api/2.0/mlflow/{path}", timeout=30, **kw)
    assert r.ok, r.text
    return r.json()


def trial_rows(problem, tflops, sweep="s1"):
    prov = provenance.collect()
    rows = []
    for i, tf in enumerate(tflops):
        ok = tf is not None
        rows.append(results.trial_row(
            problem, {"BLOCK_M": (16, 32, 64, 128)[i], "BLOCK_N": 16, "num_warps": 2},
            {"status": "ok" if ok else "invalid", "reason": None if ok else "BLOCK_M too big", "tflops": tf,
             "latency_ms": 1 / tf if ok else None, "rung": 2 if ok else 0, "compile_s": 0.1 * i,
             "wall_time_s": 1.0 + i, "timestamp": 1_700_000_000 + i},
            prov, trial_id=f"{sweep}-{problem.seqlen_q}-t{i}", sweep_id=sweep, searcher="gp", seed=0))
    rows.append(results.baseline_row(problem, "sdpa_math", {"tflops": 0.5}, prov, sweep_id=sweep))
    rows.append(results.baseline_row(problem, "sdpa_efficient", {"tflops": 0.8}, prov, sweep_id=sweep))
    return rows


@pytest.fixture(scope="module")
def logged(server, tmp_path_factory):
    """A small sweep logged over HTTP the way the sweep's driver callback does it."""
    tmp = tmp_path_factory.mktemp("sweep")
    rows = trial_rows(P, [1.0, None, 2.5, 2.0])
    df = results.read_trials(results.write_file(rows, tmp / "trials.parquet"))
    art_path = artifact.write(winners.build_artifact(df), tmp / "best_configs.json")
    tr = tracking.SweepTracker("sweep-demo", tracking_uri=server)
    h = tr.start_search("CPU", P, provenance.collect(), {"searcher": "gp", "n_initial": 2, "seed": 0})
    child_ids = []
    for r in rows[:4]:
        rungs = [{"rung": s, "tflops": r["tflops"] * (0.8 + 0.1 * s), "latency_ms": 1.0} for s in range(3)] \
            if r["status"] == "ok" else None
        child_ids.append(tr.log_trial(h, r, rungs))
    best = {"config": results.row_config(rows[2]), "tflops": 2.5, "latency_ms": 0.4, "trial_id": rows[2]["trial_id"]}
    tr.finish_search(h, best, {"sdpa_math": 0.5, "sdpa_efficient": 0.8}, df, art_path)
    return {"url": server, "tracker": tr, "parent": h.run_id, "children": child_ids, "exp": tr.experiment_id}


def test_default_tracking_uri(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.resolve_tracking_uri() == f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:1")
    assert tracking.resolve_tracking_uri() == "http://127.0.0.1:1"
    assert tracking.resolve_tracking_uri("http://127.0.0.1:2") == "http://127.0.0.1:2"


@pytest.mark.slow
def test_parent_and_child_runs_over_rest(logged):
    url = logged["url"]
    exp = api(url, "GET", "experiments/get-by-name", params={"experiment_name": "sweep-demo"})["experiment"]
    assert exp["experiment_id"] == logged["exp"]
    runs = api(url, "POST", "runs/search", json={"experiment_ids": [exp["experiment_id"]], "max_results": 100})["runs"]
    by_id = {r["info"]["run_id"]: r for r in runs}
    assert set(by_id) == {logged["parent"], *logged["children"]}

    def tags(r):
        return {t["key"]: t["value"] for t in r["data"].get("tags", [])}

    def metrics(r):
        return {m["key"]: m["value"] for m in r["data"].get("metrics", [])}

    def params(r):
        return {p["key"]: p["value"] for p in r["data"].get("params", [])}

    parent = by_id[logged["parent"]]
    pt = tags(parent)
    for key in ("gpu", "vendor", "arch", "accelerator_type", "driver", "cuda_version", "rocm_version",
                "triton_version", "torch_version", "raytune_attn_version", "kernel_source_hash"):
        assert key in pt
    assert pt["kernel_source_hash"] == provenance.kernel_source_hash()
    assert pt["searcher"] == "gp" and pt["searcher.n_initial"] == "2"
    assert parent["info"]["status"] == "FINISHED" and parent["info"]["run_name"] == f"CPU/{P.key}"
    pm = metrics(parent)
    assert pm["best_tflops"] == 2.5 and pm["baseline_tflops.sdpa_math"] == 0.5
    assert pm["best_baseline_tflops"] == 0.8 and pm["speedup_vs_baseline"] == pytest.approx(2.5 / 0.8)
    assert pm["n_trials"] == 4 and pm["n_invalid"] == 1
    assert params(parent)["best.BLOCK_M"] == "64" and params(parent)["searcher.n_initial"] == "2"
    assert pt["best_baseline_impl"] == "sdpa_efficient"

    children = [by_id[c] for c in logged["children"]]
    for c in children:
        assert tags(c)["mlflow.parentRunId"] == logged["parent"]
    assert [tags(c)["status"] for c in children] == ["ok", "invalid", "ok", "ok"]
    assert tags(children[1])["reason"] == "BLOCK_M too big"
    assert params(children[2]) == {"BLOCK_M": "64", "BLOCK_N": "16", "num_warps": "2"}
    # Named by trial id and config, so a search's trials read as what they tried where the UI lists them.
    assert children[2]["info"]["run_name"] == f"{tags(children[2])['trial_id']} M64 N16 w2"
    assert metrics(children[2])["compile_s"] == pytest.approx(0.2)

    hist = api(url, "GET", "metrics/get-history", params={"run_id": logged["children"][2], "metric_key": "tflops"})
    assert sorted((m["step"], m["value"]) for m in hist["metrics"]) == [(0, 2.0), (1, 2.25), (2, 2.5)]
    conv = api(url, "GET", "metrics/get-history", params={"run_id": logged["parent"],
                                                            "metric_key": "best_tflops_so_far"})
    assert [m["value"] for m in sorted(conv["metrics"], key=lambda m: m["step"])] == [1.0, 1.0, 2.5, 2.5]

    # compare: the trials of the search ranked by tflops, as the UI's Compare view asks for them
    ranked = api(url, "POST", "runs/search", json={
        "experiment_ids": [exp["experiment_id"]],
        "filter": f"tags.mlflow.parentRunId = '{logged['parent']}' and tags.status = 'ok'",
        "order_by": ["metrics.tflops DESC"]})["runs"]
    assert [r["info"]["run_id"] for r in ranked] == [logged["children"][i] for i in (2, 3, 0)]


def test_parent_artifacts_over_rest(logged, tmp_path):
    url = logged["url"]
    listing = api(url, "GET", "artifacts/list", params={"run_id": logged["parent"]})
    names = {f["path"] for f in listing["files"]}
    assert {"best_config.json", "best_configs.json", "convergence.png", "trials.parquet"} <= names
    png = requests.get(f"{url}/get-artifact", params={"path": "convergence.png", "run_uuid": logged["parent"]},
                       timeout=30)
    assert png.ok and png.content[:8] == b"\x89PNG\r\n\x1a\n"
    local = tracking.download_artifact(f"runs:/{logged['parent']}/trials.parquet", tmp_path, url)
    df = results.read_trials(local)
    assert len(df) == 6 and set(df["kind"]) == {"trial", "baseline"}


def test_runtime_loads_a_runs_uri(logged, monkeypatch, tmp_path):
    """The download is read and removed (the table holds the artifact): the table's source names the URI."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", logged["url"])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the download's folder is made
    runtime.clear_configs()
    try:
        uri = f"runs:/{logged['parent']}/best_configs.json"
        t = runtime.load_configs(uri)
        assert t.n_usable == 1 and t.source == uri and not list(tmp_path.iterdir())
        cfg, how = runtime.lookup(**P.to_dict())
        assert how == f"exact:{P.key}" and cfg["BLOCK_M"] == 64
    finally:
        runtime.clear_configs()


def test_runtime_loads_a_registered_model_version(logged, monkeypatch):
    """The registry route of docs/results-schema.md section 4: a model version whose source is the parent run's
    artifacts, loaded by version and by alias."""
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", logged["url"])
    client = mlflow.MlflowClient(logged["url"])
    name = f"attn-configs-{logged['parent'][:8]}"
    client.create_registered_model(name)
    run = client.get_run(logged["parent"])
    version = client.create_model_version(name, source=run.info.artifact_uri, run_id=run.info.run_id).version
    client.set_registered_model_alias(name, "production", version)
    runtime.clear_configs()
    try:
        for uri in (f"models:/{name}/{version}", f"models:/{name}@production"):
            t = runtime.load_configs(uri)
            assert t.n_usable == 1 and t.source.endswith("best_configs.json")
            cfg, how = runtime.lookup(**P.to_dict())
            assert how == f"exact:{P.key}" and cfg["BLOCK_M"] == 64
    finally:
        runtime.clear_configs()


def test_log_results_table_second_sweep(logged, tmp_path):
    """A whole results table logged after the fact: one search per (accelerator type, problem)."""
    url = logged["url"]
    df = results.read_trials(results.write_file(trial_rows(P2, [3.0, 4.0], "s2"), tmp_path / "s2.parquet"))
    ids = logged["tracker"].log_results(df, searcher_settings={"searcher": "random"})
    assert list(ids) == [("CPU", P2.key)]
    runs = api(url, "POST", "runs/search", json={"experiment_ids": [logged["exp"]],
                                                  "filter": "tags.`raytune_attn.role` = 'search'"})["runs"]
    assert {r["info"]["run_id"] for r in runs} == {logged["parent"], ids[("CPU", P2.key)]}
    new = next(r for r in runs if r["info"]["run_id"] == ids[("CPU", P2.key)])
    assert {m["key"]: m["value"] for m in new["data"]["metrics"]}["best_tflops"] == 4.0


@pytest.mark.slow
def test_embedded_sqlite_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tr = tracking.SweepTracker("embedded")
    h = tr.start_search("CPU", P, provenance.collect(), {"searcher": "grid"})
    tr.log_trial(h, trial_rows(P, [1.5])[0])
    tr.finish_search(h, {"config": {"BLOCK_M": 16}, "tflops": 1.5}, None)
    assert (tmp_path / "mlflow.db").exists()
    run = tr.client.get_run(h.run_id)
    assert run.data.metrics["best_tflops"] == 1.5 and run.info.status == "FINISHED"
    assert run.info.artifact_uri.startswith((tmp_path / "mlruns").as_uri())


def test_end_runs_kills_running_parents_and_children_and_leaves_ended_runs(tmp_path):
    """What a resume does to the parent runs of the driver it replaces (their children still RUNNING too: a driver
    killed between a child's creation and its end), and to runs that had ended."""
    tr = tracking.SweepTracker("resumed", f"sqlite:///{tmp_path / 'm.db'}")
    killed = tr.start_search("CPU", P, {}, {})
    child = tr.client.create_run(tr.experiment_id, tags={"mlflow.parentRunId": killed.run_id}).info.run_id
    ended_child = tr.log_trial(killed, trial_rows(P, [1.0])[0])
    done = tr.start_search("CPU", P2, {}, {})
    tr.finish_search(done, None, None)
    got = tr.end_runs([killed.run_id, done.run_id], "KILLED", reason="resumed")
    assert sorted(got) == sorted([killed.run_id, child])
    status = {r: tr.client.get_run(r).info.status for r in (killed.run_id, child, ended_child, done.run_id)}
    assert status == {killed.run_id: "KILLED", child: "KILLED", ended_child: "FINISHED", done.run_id: "FINISHED"}
    assert tr.client.get_run(killed.run_id).data.tags["end_reason"] == "resumed"
