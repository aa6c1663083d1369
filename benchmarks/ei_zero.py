"""How often the GP's global step finds no expected improvement at any free candidate: when log-EI could choose
differently.

Log-EI (Ament et al. 2023) computes log(EI) without underflow, so that a gradient-based optimizer of the
acquisition sees slopes where EI is flat zero. The GP here scores every free candidate exactly and takes the argmax;
log is monotone, so log-EI picks the same config (also per predicted second: log EI - log cost) unless EI is 0 at
every candidate, where gp.py falls back to the posterior standard deviation. This counts those steps: the GP without
priors on every landscape of benchmarks.miss_rate.SETS, seeds 0-9 by default. The probe only reads skopt's
gaussian_ei's output (the runs are the same as unprobed).

    python -m benchmarks.ei_zero --seeds 10 --budget 50 --jobs 2 --out docs/benchmarks/search/ei_zero.md
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks.miss_rate import SETS
from benchmarks.replay_args import add_replay_args, check_replay_args
from benchmarks.search_table import landscapes, load_cell
from raytune_attn.tune.search import gp as gp_module
from raytune_attn.tune.search.replay import Run, run_seeds


def probed(path: Path, key: str | None, *, seeds: int, seed_start: int, budget: int) -> tuple[dict, list[Run]]:
    """{"steps": global steps, "all_zero": of them with EI 0 at every candidate, "candidates": candidates scored}
    over the seeds' runs of the GP without priors, and the runs."""
    counts = {"steps": 0, "all_zero": 0, "candidates": 0}
    ei = gp_module.gaussian_ei

    def counted(X, model, *args, **kw):
        a = ei(X, model, *args, **kw)
        counts["steps"] += 1
        counts["candidates"] += len(a)
        counts["all_zero"] += int(not np.any(a > 0))
        return a

    land = load_cell(path, key)
    gp_module.gaussian_ei = counted
    try:
        runs = run_seeds(land, "gp", budget=budget, seeds=seeds, seed_start=seed_start, options={"priors": False})
    finally:
        gp_module.gaussian_ei = ei
    return counts, runs


def _probed(args):
    path, key, kw = args
    return probed(path, key, **kw)[0]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_replay_args(ap, budget=50, noise=False)
    a = ap.parse_args(argv)
    check_replay_args(ap, a)
    cells = [c for files, per in SETS.values() for c in landscapes(files, per)]
    kw = {"seeds": a.seeds, "seed_start": a.seed_start, "budget": a.budget}
    with ProcessPoolExecutor(a.jobs) as pool:
        counts = list(pool.map(_probed, [(p, k, kw) for p, k in cells]))
    lines = ["| landscape | global steps | EI 0 at every candidate |", "|---|---|---|"]
    for (path, key), c in zip(cells, counts, strict=True):
        lines.append(f"| {Path(path).stem} {key or ''} | {c['steps']} | {c['all_zero']} |")
    steps, zero = sum(c["steps"] for c in counts), sum(c["all_zero"] for c in counts)
    lines.append(f"| all {len(cells)} | {steps} | {zero} ({zero / max(steps, 1):.2%}) |")
    command = "python -m benchmarks.ei_zero " + shlex.join(sys.argv[1:] if argv is None else argv)
    text = (f"The GP without priors, seeds {a.seed_start}-{a.seed_start + a.seeds - 1}, budget {a.budget}: its global "
            f"steps, and those where expected improvement is 0 at every free candidate. Measured by:\n\n    {command}"
            "\n\n" + "\n".join(lines) + "\n")  # fmt: skip
    print(text)
    if a.out:
        a.out.write_text(f"# Global steps with no expected improvement anywhere\n\n{text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
