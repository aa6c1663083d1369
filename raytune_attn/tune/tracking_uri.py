"""Where a sweep's MLflow tracking store is, resolved without importing mlflow: the sweep's driver resolves it in
its own environment and working directory and hands it to the logging actor (sweep/tracking_host.py), whose
environment and working directory may differ (a worker of an existing cluster).

A tracking server (http/https) is probed before Ray starts (`probe_server`: a few seconds at most), and every
MLflow HTTP call gets a timeout and few retries (`http_env`): MLflow's defaults, 120 s per request and 7 retries
with exponential backoff, held a sweep on a dead server for 277 s before its first error."""

from __future__ import annotations

import http.client
import os
from pathlib import Path
from urllib.parse import urlparse

DEFAULT_DB = "mlflow.db"
PROBE_TIMEOUT_S = 5.0
# MLflow reads these at each call; a sweep sets them where unset (its own process and its logging actor's).
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}


def mlflow_installed() -> bool:
    """Whether MLflow can be imported here, found without importing it."""
    import importlib.util

    try:
        return importlib.util.find_spec("mlflow") is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules, as if not installed
        return False


def resolve_tracking_uri(tracking_uri: str | None = None) -> str:
    """The argument, else $MLFLOW_TRACKING_URI, else `sqlite:///<cwd>/mlflow.db`."""
    if tracking_uri:
        return tracking_uri
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path.cwd() / DEFAULT_DB}"


# The stores MLflow's tracking client reads (a database through SQLAlchemy, a tracking server, Databricks); a
# driver's scheme may carry one ("postgresql+psycopg2").
_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks", "databricks-uc", "uc", "file")


def check_tracking_uri(uri: str) -> str:
    """`uri` when it has the form of a tracking store MLflow reads, else ValueError naming what is wrong. The form
    only: whether the store answers is known once the sweep's logging actor opens it."""
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower().split("+", 1)[0]
    if not scheme or len(scheme) == 1:  # a plain path (a Windows drive letter too)
        return uri
    if scheme not in _SCHEMES:
        raise ValueError(f"tracking URI {uri!r}: unknown scheme {parsed.scheme!r} (known: {', '.join(_SCHEMES)})")
    if scheme == "sqlite" and not uri.startswith(parsed.scheme + ":///"):
        raise ValueError(f"tracking URI {uri!r}: a SQLite store is sqlite:///relative/path.db or "
                         "sqlite:////absolute/path.db")
    if scheme in ("http", "https") and not parsed.netloc:
        raise ValueError(f"tracking URI {uri!r}: a tracking server's URI names its host, e.g. http://host:5000")
    return uri


def error_words(e: BaseException) -> str:
    """The line of a tracking store's error that says what went wrong: the last one (a Ray error's traceback ends
    with the exception), leaving out SQLAlchemy's closing "Background on this error" link and the SQL it quotes."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    said = [ln for ln in lines if not ln.startswith(("(Background on this error", "[SQL:", "[parameters:"))]
    return (said or lines or [type(e).__name__])[-1][:1000]


def sqlite_file(uri: str) -> Path | None:
    """The database file of a SQLite store's URI (`sqlite:///x.db`, `sqlite+pysqlite:////abs/x.db`), else None (not
    SQLite, or in memory)."""
    scheme, sep, rest = uri.partition(":///")
    if not sep or scheme.lower().split("+", 1)[0] != "sqlite" or not rest or ":memory:" in rest:
        return None
    return Path(rest)


def absolute(uri: str) -> str:
    """`uri` with a relative SQLite path made absolute (against this working directory): the same store from a
    resume started elsewhere, or from the logging actor."""
    db = sqlite_file(uri)
    if db is not None and not db.is_absolute():
        return uri.partition(":///")[0] + ":///" + str(db.resolve())
    return uri


def http_env() -> dict[str, str]:
    """MLflow's HTTP timeout and retry settings: the environment's where set, else `HTTP_DEFAULTS`."""
    return {k: os.environ.get(k) or v for k, v in HTTP_DEFAULTS.items()}


def apply_http_env() -> None:
    """`http_env()` into this process's environment (MLflow reads it at each request)."""
    for k, v in http_env().items():
        os.environ.setdefault(k, v)


def probe_server(uri: str, timeout_s: float | None = None) -> None:
    """For a tracking server (http/https): ValueError naming `uri` unless it answers an HTTP request (any status)
    within `timeout_s` (default `PROBE_TIMEOUT_S`); a database or file store is left to MLflow."""
    timeout_s = PROBE_TIMEOUT_S if timeout_s is None else timeout_s
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if scheme not in ("http", "https"):
        return
    conn_cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parsed.hostname, parsed.port, timeout=timeout_s)
    path = (parsed.path.rstrip("/") or "") + "/health"
    try:
        conn.request("GET", path)
        conn.getresponse().read(256)
    except TimeoutError:
        raise ValueError(f"MLflow tracking server {uri} did not answer within {timeout_s:g} s (checked before Ray "
                         "started): start it, or pass another --tracking-uri, or --no-mlflow") from None
    except (OSError, http.client.HTTPException) as e:
        raise ValueError(f"MLflow tracking server {uri} cannot be reached: {e.__class__.__name__}: {e} (checked "
                         "before Ray started): start it, or pass another --tracking-uri, or --no-mlflow") from None
    finally:
        conn.close()
