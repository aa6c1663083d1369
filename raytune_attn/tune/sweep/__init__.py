"""The sweep: `raytune-attn tune` (see docs/sweep.md). `main(argv)` takes the same arguments as the command."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from raytune_attn.tune.sweep.driver import main as _main

    return _main(argv)


__all__ = ["main"]
