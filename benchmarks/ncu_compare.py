"""The counters that tell kernels apart, side by side, from an Nsight Compute report's raw page:

    ncu --import prof.ncu-rep --page raw --csv > raw.csv
    python3 benchmarks/ncu_compare.py raw.csv [--md table.md]

One column a profiled kernel, labelled in `benchmarks/profile_cell.py`'s order (tuned, sdpa-cudnn, sdpa-flash, as
many times as it launched each) or, when the count does not divide by three (a launch of several kernels), by
position and kernel name. One row a counter: duration, registers, occupancy, issue activity, the utilization of each
pipe (tensor, FMA, ALU, MUFU as `xu`), and the warp stall reasons (warps stalled for each per issued instruction).
A counter the report lacks is left out.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

NAMES = ("tuned", "sdpa-cudnn", "sdpa-flash")
# Exact counters first, in this order; then every counter matching a pattern, sorted.
_EXACT = ("gpu__time_duration.sum", "launch__grid_size", "launch__block_size", "launch__registers_per_thread",
          "launch__shared_mem_per_block_dynamic", "sm__warps_active.avg.pct_of_peak_sustained_active",
          "sm__throughput.avg.pct_of_peak_sustained_elapsed", "smsp__issue_active.avg.pct_of_peak_sustained_active",
          "smsp__inst_executed.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed")
_PATTERNS = (r"^sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active$",
             r"^sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active$",
             r"^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$")


def read_raw(path: Path) -> tuple[list[str], dict[str, dict[str, str]], dict[str, str]]:
    """(kernel labels, {counter: {label: value}}, {counter: unit}) of an `ncu --page raw --csv` file."""
    try:
        rows = list(csv.reader(path.read_text().splitlines()))
    except (OSError, UnicodeDecodeError) as e:
        raise SystemExit(f"{path}: cannot read ({e})") from None
    rows = [r for r in rows if r and not r[0].startswith("==")]  # ncu's own messages
    if len(rows) < 3 or "Kernel Name" not in rows[0]:
        raise SystemExit(f"{path}: not an `ncu --page raw --csv` export (no header with 'Kernel Name' and units)")
    header, units, kernels = rows[0], rows[1], rows[2:]
    if any(len(r) != len(header) for r in rows):
        raise SystemExit(f"{path}: rows of unequal length (a cut or edited export)")
    labels = _labels(len(kernels), kernels, header.index("Kernel Name"))
    values = {c: {lab: k[i] for lab, k in zip(labels, kernels, strict=True)} for i, c in enumerate(header)}
    return labels, values, dict(zip(header, units, strict=True))


def _labels(n: int, kernels: list[list[str]], name_col: int) -> list[str]:
    """profile_cell.py launches tuned, cuDNN, flash the same number of times each: label them by position when the
    count divides, else by their kernel names."""
    if n % len(NAMES) == 0:
        per = n // len(NAMES)
        return [NAMES[i // per] + (f" #{i % per + 1}" if per > 1 else "") for i in range(n)]
    return [f"{i}: {k[name_col][:40]}" for i, k in enumerate(kernels)]


def counters(values: dict[str, dict[str, str]]) -> list[str]:
    exact = [c for c in _EXACT if c in values]
    matched = sorted(c for c in values if c not in exact and any(re.match(p, c) for p in _PATTERNS))
    return exact + matched


def table(labels: list[str], values: dict[str, dict[str, str]], units: dict[str, str]) -> str:
    lines = ["| counter | unit | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for c in counters(values):
        lines.append(f"| {c} | {units.get(c, '')} | " + " | ".join(values[c].get(lab, "") for lab in labels) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw_csv", type=Path)
    ap.add_argument("--md", type=Path, help="also write the table here")
    a = ap.parse_args(argv)
    out = table(*read_raw(a.raw_csv))
    print(out, end="")
    if a.md:
        a.md.write_text(out)


if __name__ == "__main__":
    sys.exit(main())
