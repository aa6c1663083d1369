#!/usr/bin/env python
"""Cluster entry point of a raytune-attn sweep: `raytune-attn tune`, connected to the Ray cluster it runs on.

    ray submit deploy/<cluster>.yaml pipelines/sweep.py -- \\
        --problems pipelines/problems/standard.yaml --searcher gp --budget 64 --out '~/results/std'
    ray job submit --working-dir . -- \\
        python pipelines/sweep.py --problems pipelines/problems/standard.yaml --budget 64 --out /results/std

`~` is quoted so that the head node's shell expands it, not this machine's (another home, another user); a job's
`--out` is absolute, since a relative one lands in the job's unpacked working directory, which Ray deletes.

It takes the arguments of `raytune-attn tune` (see `python pipelines/sweep.py --help`) with `--address auto` as
the default: it connects to the running cluster ($RAY_ADDRESS, which `ray job submit` sets, else the cluster
`ray start` recorded on this node) and never starts a second one; with no cluster it exits with an error.

A relative `--problems` path that does not exist here is looked up in the repository this script belongs to,
$RAYTUNE_ATTN_HOME and ~/raytune-attn (where deploy/*.yaml put the repository), in that order, since `ray submit`
copies this script alone to the head node. When the package is not installed on the cluster but the repository
is the job's working directory (`ray job submit --working-dir .`), it is imported from there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _ensure_importable() -> None:
    try:
        import raytune_attn  # noqa: F401
    except ImportError:
        for root in (Path.cwd(), REPO):
            if (root / "raytune_attn" / "__init__.py").is_file():
                sys.path.insert(0, str(root))
                return


def _option(argv: list[str], name: str) -> int | None:
    """Index of the value of `--name VALUE` (or of the `--name=VALUE` item) in argv, else None."""
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return i + 1
        if a.startswith(name + "="):
            return i
    return None


def _resolve_problems(argv: list[str]) -> list[str]:
    i = _option(argv, "--problems")
    if i is None:
        return argv
    inline = argv[i].startswith("--problems=")
    value = argv[i].split("=", 1)[1] if inline else argv[i]
    p = Path(os.path.expanduser(value))
    if p.is_absolute() or p.exists():
        return argv
    homes = [REPO, os.environ.get("RAYTUNE_ATTN_HOME"), Path.home() / "raytune-attn"]
    for home in homes:
        if home and (Path(home) / p).is_file():
            argv = list(argv)
            found = str(Path(home) / p)
            argv[i] = f"--problems={found}" if inline else found
            return argv
    return argv  # not found anywhere: the sweep names the missing file


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if any(a in ("-h", "--help") for a in argv):  # tune's help, read as this script's
        print("pipelines/sweep.py takes the flags of `raytune-attn tune` below, with --address auto as its default: "
              "the running cluster (it never starts one).\n")
        argv = ["--help"]
    elif _option(argv, "--address") is None:
        argv = ["--address", "auto", *argv]
    argv = _resolve_problems(argv)
    _ensure_importable()
    from raytune_attn._entry import run

    return run("raytune_attn.tune.sweep", argv)


if __name__ == "__main__":
    sys.exit(main())
