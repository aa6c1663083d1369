"""The command-line options the replay benchmarks share (search_variants, warm_variants, sibling_replay, miss_rate):
seeds, budget, processes, first seed, run-to-run spread, the sweep's screen and the output file, checked before any
replay starts."""

from __future__ import annotations

import argparse
from pathlib import Path

from raytune_attn.tune.search.replay import check_noise


def add_replay_args(ap: argparse.ArgumentParser, *, budget: int | None, seed_start: bool = True, noise: bool = True,
                    screen: bool = False, out_help: str = "Write the table (markdown) here.") -> None:
    """--seeds, --budget (default `budget`; None: the script decides, and can tell a given --budget from its own),
    --jobs, --out, and --seed-start / --noise / --screen where the script takes them."""
    ap.add_argument("--seeds", type=int, default=10, help="Seeds per landscape and column (a count).")
    ap.add_argument("--budget", type=int, default=budget, help="Evaluations per run.")
    ap.add_argument("--jobs", type=int, default=1, help="Replays run at once (processes).")
    if seed_start:
        ap.add_argument("--seed-start", type=int, default=0, help="The first seed (a held-out check: 10).")
    if noise:
        ap.add_argument("--noise", type=float, default=0.0,
                        help="Run-to-run spread told to the searchers (0.02: 2%%).")
    if screen:
        ap.add_argument("--screen", action="store_true", help="Candidates as a sweep on each table's GPU screens them "
                        "(replay.sweep_screen): configs it knows cannot fit cost no evaluation.")
    ap.add_argument("--out", type=Path, help=out_help)


def check_replay_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exit with a usage error naming the option when a count is below 1, the first seed below 0 or the spread out of
    range (replay.check_noise)."""
    for name in ("seeds", "budget", "jobs"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if getattr(args, "seed_start", 0) < 0:
        ap.error(f"--seed-start must be at least 0, got {args.seed_start}")
    try:
        check_noise(getattr(args, "noise", 0.0))
    except ValueError as e:
        ap.error(f"--noise: {e}")
