"""`raytune-attn doctor`'s MLflow line: what it says of each kind of tracking URI, before any sweep opens it."""

import sys
from pathlib import Path

from raytune_attn.tune import doctor
from raytune_attn.tune.tracking_uri import absolute, sqlite_file


def test_a_tracking_uri_tune_would_refuse_is_named_with_tunes_words(tmp_path):
    for uri, words in (("ftp://x", "unknown scheme 'ftp'"), ("sqlite://x.db", "a SQLite store is sqlite:///"),
                       ("http://", "names its host")):
        m = doctor.mlflow_tracking(uri, timeout=1)
        assert m == {"uri": uri, "reachable": False, "usable": False, "status": m["status"]} and words in m["status"]
    info = doctor.collect(address="127.0.0.1:1", tracking_uri="ftp://x", timeout=1, connect=False)
    lines = doctor.format_table(info).splitlines()
    line = next(ln for ln in lines if ln.startswith("MLflow ") and not ln.startswith("MLflow URI"))
    assert line.split(None, 1)[1].startswith("NOT USABLE: tracking URI 'ftp://x': unknown scheme 'ftp'")


def test_local_stores_are_judged_by_their_folders(tmp_path):
    db = tmp_path / "m.db"
    assert doctor.mlflow_tracking(f"sqlite:///{db}")["status"] == f"SQLite store {db} (created on first sweep)"
    db.write_bytes(b"")
    assert doctor.mlflow_tracking(f"sqlite:///{db}") == {"uri": f"sqlite:///{db}", "reachable": True,
                                                         "status": f"SQLite store {db}"}
    missing = tmp_path / "no" / "m.db"
    assert not doctor.mlflow_tracking(f"sqlite:///{missing}")["reachable"]
    assert doctor.mlflow_tracking(str(tmp_path))["reachable"]
    assert doctor.mlflow_tracking(f"file://{tmp_path}")["reachable"]


def test_a_sqlite_uri_with_a_driver_is_a_sqlite_store(tmp_path):
    db = tmp_path / "m.db"
    m = doctor.mlflow_tracking(f"sqlite+pysqlite:///{db}")
    assert (m["reachable"], m["status"]) == (True, f"SQLite store {db} (created on first sweep)")
    assert doctor.mlflow_tracking("sqlite:///:memory:")["status"].startswith("SQLite store in memory")


def test_sqlite_file_and_absolute_read_every_sqlite_form(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert sqlite_file("sqlite:///a/m.db") == Path("a/m.db")
    assert sqlite_file("SQLite+pysqlite:////abs/m.db") == Path("/abs/m.db")
    assert sqlite_file("sqlite:///:memory:") is None and sqlite_file("postgresql://h/db") is None
    assert absolute("sqlite+pysqlite:///a/m.db") == f"sqlite+pysqlite:///{tmp_path.resolve() / 'a' / 'm.db'}"
    assert absolute("sqlite:////abs/m.db") == "sqlite:////abs/m.db"
    assert absolute("http://host:5000") == "http://host:5000"


def test_doctor_reports_mlflow_missing_instead_of_failing(tmp_path, monkeypatch):
    """Without MLflow the doctor still runs (the rest of the tuner is there) and says what is missing."""
    monkeypatch.setitem(sys.modules, "mlflow", None)
    info = doctor.collect(address="127.0.0.1:1", tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", timeout=1,
                          connect=False)
    line = next(ln for ln in doctor.format_table(info).splitlines()
                if ln.startswith("MLflow ") and not ln.startswith("MLflow URI"))
    assert line.split(None, 1)[1] == ("NOT USABLE: MLflow is not installed: a sweep logs to it unless --no-mlflow "
                                      "(pip install 'raytune-attn[tune]')")
