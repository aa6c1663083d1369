"""Where a sweep's MLflow tracking store is, resolved without importing mlflow: the sweep's driver resolves it in
its own environment and working directory and hands it to the logging actor (sweep/tracking_host.py), whose
environment and working directory may differ (a worker of an existing cluster)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

DEFAULT_DB = "mlflow.db"


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
