"""A landscape named on a benchmark's command line: FILE (every problem key of the recorded table) or FILE::KEY (that
key alone). Parsed here only, so the scripts that take such names agree on them."""

from __future__ import annotations

from pathlib import Path

SEPARATOR = "::"


def split_spec(spec: str | Path) -> tuple[Path, str | None]:
    """(file, problem key or None for every key) of FILE or FILE::KEY."""
    path, _, key = str(spec).partition(SEPARATOR)
    return Path(path), key or None
