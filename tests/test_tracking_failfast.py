"""Fail fast on a tracking server that is not there (tracking_uri.probe_server, before Ray starts) and a timeout on
every MLflow HTTP call (tracking_uri.http_env), tried against real sockets: a closed port, a server that accepts
and never answers, and one that answers."""

import http.server
import socket
import threading
import time

import pytest

from raytune_attn.tune.tracking_uri import HTTP_DEFAULTS, http_env, probe_server


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


@pytest.fixture
def silent_server():
    """A server that accepts connections (the kernel's backlog does) and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()


def test_a_closed_port_fails_at_once_naming_the_uri():
    uri = f"http://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=f"MLflow tracking server {uri} cannot be reached: ConnectionRefusedError"):
        probe_server(uri)
    assert time.monotonic() - t0 < 10


def test_a_server_that_never_answers_fails_within_the_timeout(silent_server):
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=f"{silent_server} did not answer within 1 s"):
        probe_server(silent_server, timeout_s=1.0)
    assert time.monotonic() - t0 < 10


def test_a_server_that_answers_passes_whatever_its_status():
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            seen.append(self.path)
            self.send_response(404)  # not MLflow's answer: still a server that answers
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        probe_server(f"http://127.0.0.1:{server.server_port}/prefix/")
    finally:
        server.shutdown()
        server.server_close()
    assert seen == ["/prefix/health"]


def test_database_and_file_stores_are_not_probed():
    for uri in ("sqlite:////nonexistent/dir/m.db", "file:///nonexistent", "postgresql://u@127.0.0.1:1/db"):
        probe_server(uri)


@pytest.mark.parametrize("how", ["closed", "silent"])
def test_tune_with_a_dead_tracking_server_exits_2_before_ray_naming_it(how, silent_server, tmp_path, capsys,
                                                                      monkeypatch):
    import ray

    from raytune_attn.tune import tracking_uri
    from raytune_attn.tune.cli import main

    monkeypatch.setattr(tracking_uri, "PROBE_TIMEOUT_S", 1.0)  # the sweep's 5 s, shortened for the test

    uri = silent_server if how == "silent" else f"http://127.0.0.1:{_closed_port()}"
    out = tmp_path / "out"
    assert main(["tune", "--tracking-uri", uri, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"MLflow tracking server {uri}" in err and "before Ray started" in err
    if how == "silent":
        assert "within 1 s" in err
    assert not ray.is_initialized() and not out.exists()


def test_mlflow_http_calls_get_a_timeout_and_few_retries_unless_the_environment_sets_them(monkeypatch):
    for k in HTTP_DEFAULTS:
        monkeypatch.setenv(k, "0")  # recorded, so that the end of the test restores the environment it found
        monkeypatch.delenv(k)
    assert http_env() == HTTP_DEFAULTS
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "3")
    assert http_env()["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "3"
    # What MLflow itself reads once a sweep applied them.
    from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_MAX_RETRIES, MLFLOW_HTTP_REQUEST_TIMEOUT

    from raytune_attn.tune.tracking_uri import apply_http_env

    apply_http_env()
    assert MLFLOW_HTTP_REQUEST_TIMEOUT.get() == 3
    assert MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == int(HTTP_DEFAULTS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"])


def test_a_tracker_on_a_dead_server_fails_within_its_http_timeout(monkeypatch):
    """MLflow's own client, with the sweep's settings: a silent server costs (retries + 1) x timeout, not 120 s x 7
    retries with backoff."""
    from raytune_attn.tune.tracking import SweepTracker

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "1")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    t0 = time.monotonic()
    try:
        with pytest.raises(Exception, match="127.0.0.1"):
            SweepTracker("x", f"http://127.0.0.1:{s.getsockname()[1]}")
    finally:
        s.close()
    assert time.monotonic() - t0 < 30
