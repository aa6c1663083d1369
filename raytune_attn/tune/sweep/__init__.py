"""The sweep: `raytune-attn tune` (see docs/sweep.md). `main(argv)` takes the same arguments as the command."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """`raytune-attn tune ARGS` (also `python -m raytune_attn.tune.sweep ARGS`, `pipelines/sweep.py`): bad input is
    one line and exit status 2, as from the command."""
    import sys

    from raytune_attn.tune.cli import main as cli_main

    return cli_main(["tune", *(sys.argv[1:] if argv is None else argv)])


__all__ = ["main"]
