"""pipelines/sweep.py submitted with `ray job submit` to a real head node started here with `ray start --head` on
127.0.0.1, then the Parquet, artifact and MLflow outputs checked; `raytune-attn doctor` is pointed at the same
head. The head runs in its own temp dir and ports, and is stopped by its own process group (never `ray stop`,
which would stop every Ray on the machine)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
RAY = shutil.which("ray", path=str(VENV_BIN)) or shutil.which("ray")


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "RAYTUNE_ATTN_"))}
    # Token authentication (Ray's default when ~/.ray/auth_token exists) off for this loopback-only test cluster,
    # so the test does not depend on, or touch, the machine's token.
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled", PATH=f"{VENV_BIN}:{env.get('PATH', '')}", **extra)
    return env


@pytest.fixture(scope="module")
def head():
    if RAY is None:
        pytest.skip("the ray CLI is not installed")
    pytest.importorskip("aiohttp_cors", reason="ray job submit needs the dashboard: install ray[default]")
    temp = tempfile.mkdtemp(prefix="rta-", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    gcs, dash, agent, agent_grpc, rt_agent, metrics = free_ports(6)
    cmd = [RAY, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={gcs}",
           "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}",
           f"--dashboard-agent-listen-port={agent}",
           f"--dashboard-agent-grpc-port={agent_grpc}", f"--runtime-env-agent-port={rt_agent}",
           f"--metrics-export-port={metrics}", f"--temp-dir={temp}", "--num-cpus=2", "--num-gpus=0",
           "--disable-usage-stats"]
    log = open(Path(temp) / "ray-start.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=clean_env(), start_new_session=True)
    dashboard = f"http://127.0.0.1:{dash}"
    try:
        deadline = time.time() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{dashboard}/api/version", timeout=3):
                    break
            except urllib.error.HTTPError:  # 401: token authentication (Ray's default), but it answers
                break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                log.flush()
                pytest.fail(f"ray start --head did not come up:\n{(Path(temp) / 'ray-start.log').read_text()[-3000:]}")
            time.sleep(1)
        yield {"gcs": f"127.0.0.1:{gcs}", "dashboard": dashboard, "temp": temp}
    finally:
        # The head and everything it started share the process group of `ray start --block`.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()
        shutil.rmtree(temp, ignore_errors=True)
        _wait_closed(gcs)  # a later ray.init() in this process must not find this head still answering


def _wait_closed(port: int, limit_s: float = 30.0) -> None:
    deadline = time.time() + limit_s
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.5)


@pytest.mark.slow
def test_doctor_sees_the_head(head, capsys, monkeypatch):
    from raytune_attn.tune import doctor

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")

    r = doctor.ray_cluster(head["gcs"], timeout=10)
    assert r["reachable"] and r["status"] == "reachable", r
    assert len(r["nodes"]) == 1 and r["nodes"][0]["cpus"] == 2 and r["nodes"][0]["gpus"] == 0
    d = doctor.ray_cluster(head["dashboard"], timeout=10)
    assert d["reachable"] and d["ray_version"] == __import__("ray").__version__
    # The CLI's table, the same head through $RAY_ADDRESS and "auto".
    from raytune_attn.tune import cli

    monkeypatch.setenv("RAY_ADDRESS", head["gcs"])
    assert cli.main(["doctor", "--address", "auto", "--tracking-uri", "sqlite:////nonexistent-dir/x.db"]) == 0
    out = capsys.readouterr().out
    assert f"-> {head['gcs']}: reachable" in out and "NOT REACHABLE" in out
    assert any(line.startswith("  node ") and "CPU 2  GPU 0" in line for line in out.splitlines()), out


@pytest.mark.slow
def test_ray_job_submit_runs_the_sweep_pipeline(head, tmp_path):
    import duckdb
    from mlflow.tracking import MlflowClient

    from raytune_attn.tune import results

    # The job's working directory: what `ray job submit --working-dir .` uploads from a checkout, kept small.
    wd = tmp_path / "wd"
    shutil.copytree(ROOT / "pipelines", wd / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "out"
    db = tmp_path / "mlflow.db"
    runtime_env = {"env_vars": {"TRITON_INTERPRET": "1", "MLFLOW_TRACKING_URI": f"sqlite:///{db}"}}
    entry = [sys.executable, "pipelines/sweep.py", "--problems", "pipelines/problems/cpu_smoke.yaml",
             "--searcher", "random", "--budget", "2", "--rungs", "5,10", "--space", "cpu/interpreter",
             "--top-k", "1", "--out", str(out), "--name", "submitted"]
    cmd = [RAY, "job", "submit", "--address", head["dashboard"], "--working-dir", str(wd),
           "--runtime-env-json", json.dumps(runtime_env), "--submission-id", "raytune-attn-submit-test", "--",
           *entry]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=420, env=clean_env(), cwd=tmp_path)
    log = p.stdout + p.stderr
    assert p.returncode == 0, log[-4000:]
    assert "succeeded" in log
    # It joined the head rather than starting a cluster of its own: the driver ran in the job, on that node.
    status = subprocess.run([RAY, "job", "status", "--address", head["dashboard"], "raytune-attn-submit-test"],
                            capture_output=True, text=True, timeout=60, env=clean_env())
    assert "succeeded" in (status.stdout + status.stderr).lower()
    assert "Started a local Ray instance" not in log and "[tune] wrote" in log

    # Parquet: trials for both smoke problems, readable by the results reader and by duckdb.
    df = results.read_trials(out / "trials.parquet")
    trials = df[df.kind == "trial"]
    assert set(trials.problem_key) == {
        "dense-b1-hq2-hkv2-sq64-sk64-d32-causal-float32", "varlen-b2-hq2-hkv1-sq64-sk64-d32-causal-float32"}
    assert (trials.status == "ok").any() and set(trials.sweep_name) == {"submitted"}
    n = duckdb.sql(f"select count(*) from read_parquet('{out / 'trials.parquet'}') where kind = 'trial'").fetchall()
    assert n[0][0] == len(trials)
    art = json.loads((out / "best_configs.json").read_text())
    assert art["entries"]
    assert json.loads((out / "summary.json").read_text())

    # MLflow: the experiment named after the sweep, a parent run per search with trials nested under it.
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.get_experiment_by_name("submitted")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("raytune_attn.role") == "search"]
    children = [r for r in runs if r.data.tags.get("raytune_attn.role") == "trial"]
    assert len(parents) == 2 and children
    assert {c.data.tags["mlflow.parentRunId"] for c in children} <= {r.info.run_id for r in parents}

    # And the report on what the job wrote.
    from raytune_attn.tune.report import report

    r = report(out / "trials.parquet")
    assert "tuned (random)" in r.text and all(pth.exists() for pth in r.plots)
