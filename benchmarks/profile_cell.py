"""Launches one problem's kernels for a profiler: the config a best-configs artifact holds for it, and SDPA's cuDNN
and flash backends on the same inputs (in that order), each launch inside an NVTX range `profile`, so Nsight
Compute takes exactly those and the tuned kernel can be compared with cuDNN's counter by counter:

    ncu --nvtx --nvtx-include "profile/" --set full -o prof \\
        python3 -m benchmarks.profile_cell --winners best_configs.json \\
        --problem dense-b1-hq16-hkv16-sq16384-sk16384-d128-full-bfloat16
    ncu --import prof.ncu-rep --page raw --csv > raw.csv

Each is first checked against a float32 reference and warmed up (compiled) outside the range.
`benchmarks/ncu_compare.py raw.csv` puts the counters that tell the kernels apart side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from benchmarks.gpu_knobs_check import sdpa_fn
from benchmarks.h100_kernel_table import read_winners
from raytune_attn.problem import Problem
from raytune_attn.tune.measure.workload import accept, make_workload, reference

RANGE = "profile"


def winner(path: Path, problem: Problem) -> dict:
    """The artifact's config for `problem`; SystemExit naming the file, or the key it lacks."""
    try:
        return read_winners(path, [problem])[problem.key]["config"]
    except ValueError as e:
        raise SystemExit(str(e)) from None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--winners", type=Path, required=True, help="a best-configs artifact (best_configs.json)")
    ap.add_argument("--problem", required=True, help="a problem key, e.g. dense-b1-hq16-hkv16-sq16384-sk16384-d128-"
                    "full-bfloat16")
    ap.add_argument("--launches", type=int, default=1, help="profiled launches of each kernel")
    a = ap.parse_args(argv)
    try:
        problem = Problem.from_key(a.problem)
    except ValueError as e:
        raise SystemExit(f"--problem {a.problem}: {e}") from None
    if a.launches < 1:
        raise SystemExit(f"--launches {a.launches}: must be at least 1")
    config = winner(a.winners, problem)
    w = make_workload(problem, device="cuda")
    ref = reference(w)
    # Checked into a NaN-filled output first; the profiled launches write into their own (the fill is a kernel too).
    runs = [("tuned", lambda: w.run(config), lambda: w.check_run(config))]
    runs += [(f"sdpa-{b}", fn, fn) for b in ("cudnn", "flash") for fn in [sdpa_fn(b, w)]]
    for name, fn, check in runs:
        ok, err = accept(check(), ref)
        print(f"{name}: {'ok' if ok else 'WRONG'} (relative error {err:.3g})", flush=True)
        for _ in range(a.launches):
            torch.cuda.nvtx.range_push(RANGE)
            fn()
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    print(json.dumps({"problem": problem.key, "config": config}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
