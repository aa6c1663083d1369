"""Where an output path would be created: the commands check that folder before their work starts."""

from __future__ import annotations

from pathlib import Path


def existing_base(path: Path) -> Path:
    """The nearest of `path` and its parents that exists (the writers create the folders below it)."""
    base = Path(path).expanduser().absolute()
    while not base.exists() and base != base.parent:
        base = base.parent
    return base
