"""The `raytune-attn` command line. Each command imports its implementation lazily so that `--help` stays fast.

A user's mistake (bad flag, file or value) exits with code 2 and a one-line message, never a traceback:
implementations raise `UsageError` (or ValueError/FileNotFoundError for bad input) and `main` maps them.
"""

from __future__ import annotations

import sys

import typer

app = typer.Typer(
    name="raytune-attn",
    help="Bayesian-optimization autotuner for Triton flash-attention kernels, built on Ray Tune.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
space_app = typer.Typer(help="Inspect search-space files.", no_args_is_help=True)
app.add_typer(space_app, name="space")


class UsageError(Exception):
    """A user's mistake: printed as one line, exit code 2."""


def main(argv: list[str] | None = None) -> int:
    import click

    try:
        app(args=argv, standalone_mode=False)
    except click.exceptions.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except click.ClickException as e:  # bad flags and values, already named by click
        e.show()
        return 2
    except (UsageError, FileNotFoundError, ValueError) as e:
        print(f"raytune-attn: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
