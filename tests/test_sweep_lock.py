"""One sweep per output directory (sweep/lock.py), tried with real processes, and two sweeps on one new MLflow
SQLite store (tracking.py opens it under a lock beside it)."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from raytune_attn.tune.sweep.lock import LOCK_NAME, SweepLock, SweepLocked

_HOLD = textwrap.dedent("""
    import sys, time
    from raytune_attn.tune.sweep.lock import SweepLock
    with SweepLock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(600)
""")


def _holder(out):
    """A real process holding `out`'s lock (until killed)."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_lock_says_who_holds_it_and_is_gone_after_release(tmp_path):
    with SweepLock(tmp_path) as lock:
        got = json.loads((tmp_path / LOCK_NAME).read_text())
        assert (got["pid"], got["host"]) == (os.getpid(), socket.gethostname())
        with pytest.raises(SweepLocked, match=f"--out {tmp_path} is in use by another sweep \\(pid {os.getpid()}"):
            SweepLock(tmp_path).acquire()
        assert lock.fd is not None
    assert not (tmp_path / LOCK_NAME).exists()
    with SweepLock(tmp_path):  # free again
        pass


def test_a_second_sweep_on_a_held_directory_is_refused_naming_it_and_the_holder(tmp_path, capsys):
    import ray

    from raytune_attn.tune.cli import main

    out = tmp_path / "out"
    out.mkdir()
    holder = _holder(out)
    try:
        for extra in ([], ["--resume"]):
            assert main(["tune", "--out", str(out), "--name", "second", "--no-mlflow", *extra]) == 2
            err = capsys.readouterr().err
            assert f"--out {out} is in use by another sweep (pid {holder.pid} on host {socket.gethostname()}" in err
    finally:
        holder.kill()
        holder.wait()
    assert not ray.is_initialized() and sorted(p.name for p in out.iterdir()) == [LOCK_NAME]
    # Killed with -9, the holder's lock went with it: the file it left is stale and taken over.
    with SweepLock(out):
        assert json.loads((out / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_a_stale_lock_of_a_dead_process_here_is_taken_over_and_another_hosts_is_refused(tmp_path, caplog):
    path = tmp_path / LOCK_NAME
    dead = _dead_pid()
    path.write_text(json.dumps({"pid": dead, "host": socket.gethostname(), "started": time.time() - 60}))
    with caplog.at_level("WARNING"), SweepLock(tmp_path):
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert f"pid {dead}" in caplog.text and "dead" in caplog.text
    path.write_text(json.dumps({"pid": 1, "host": "another-host", "started": time.time()}))
    with pytest.raises(SweepLocked, match=f"pid 1 on host another-host.*remove {path}"):
        SweepLock(tmp_path).acquire()


_TRACK = textwrap.dedent("""
    import sys
    from raytune_attn.tune.tracking import SweepTracker
    print("ready", flush=True)
    sys.stdin.readline()
    t = SweepTracker(sys.argv[1], sys.argv[2])
    h = t.start_search("CPU", "dense-b1-hq2-hkv2-sq64-sk64-d32-causal-float32", {}, {})
    t.log_trial(h, {"trial_id": "t0", "status": "ok", "tflops": 1.0})
    t.finish_search(h, None, {})
    print(h.run_id)
""")


def test_two_sweeps_opening_one_new_sqlite_store_at_once_both_log(tmp_path):
    """MLflow migrates a new SQLite store's schema when it opens it; two processes doing that at once failed with
    only SQLAlchemy's link. Opening is serialized, so both work. This process and another open it together."""
    import mlflow

    from raytune_attn.tune.tracking import SweepTracker

    store = f"sqlite:///{tmp_path / 'm.db'}"
    proc = subprocess.Popen([sys.executable, "-c", _TRACK, "a", store], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.stdin.write("go\n")
    proc.stdin.flush()
    here = SweepTracker("b", store)
    h = here.start_search("CPU", "dense-b1-hq2-hkv2-sq64-sk64-d32-causal-float32", {}, {})
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    client = mlflow.MlflowClient(store)
    assert client.get_run(out.strip()).info.status == "FINISHED" and client.get_run(h.run_id).info.status == "RUNNING"
    assert len(client.search_runs([client.get_experiment_by_name("a").experiment_id])) == 2


def test_a_store_error_is_said_in_words_not_by_sqlalchemys_link():
    from raytune_attn.tune.tracking_uri import error_words

    sqla = ("(sqlite3.OperationalError) database is locked\n[SQL: INSERT INTO runs VALUES (?)]\n"
            "[parameters: (1,)]\n(Background on this error at: https://sqlalche.me/e/21/e3q8)")
    assert error_words(RuntimeError(sqla)) == "(sqlite3.OperationalError) database is locked"


@pytest.mark.parametrize("sig", [signal.SIGKILL])
def test_a_lock_holder_killed_leaves_the_directory_free(tmp_path, sig):
    holder = _holder(tmp_path)
    with pytest.raises(SweepLocked):
        SweepLock(tmp_path).acquire()
    holder.send_signal(sig)
    holder.wait()
    with SweepLock(tmp_path):
        pass
