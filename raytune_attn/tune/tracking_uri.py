"""Where a sweep's MLflow tracking store is, resolved without importing mlflow: the sweep's driver resolves it in
its own environment and working directory and hands it to the logging actor (sweep/tracking_host.py), whose
environment and working directory may differ (a worker of an existing cluster)."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DB = "mlflow.db"


def resolve_tracking_uri(tracking_uri: str | None = None) -> str:
    """The argument, else $MLFLOW_TRACKING_URI, else `sqlite:///<cwd>/mlflow.db`."""
    if tracking_uri:
        return tracking_uri
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path.cwd() / DEFAULT_DB}"
