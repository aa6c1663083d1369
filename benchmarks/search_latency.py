"""Seconds per GP suggestion at 50 and 200 observations: `python -m benchmarks.search_latency [--out FILE]`.

Tells the searcher N results from a synthetic landscape over the given space (values from a smooth random
function of the encoded config, ~10% failures), then times `suggest` several times at that N: the first call may
re-optimize the kernel hyperparameters (on the schedule in gp.py), later ones only re-condition the GP. Prints a
markdown table and writes it to `--out`.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from raytune_attn.tune.search.gp import GPSearcher
from raytune_attn.tune.search.space import load_space


def measure(space_name: str, n_obs: int, *, repeats: int = 5, seed: int = 0) -> dict:
    space = load_space(space_name)
    s = GPSearcher(space, seed=seed)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=s._X.shape[1])
    told = 0
    order = rng.permutation(len(s.candidates))
    for i in order[:n_obs]:
        tid = f"warm{told}"
        s._live[tid] = int(i)  # tell directly: the N observations are given, not searched for
        s._taken[int(i)] = True
        value = None if rng.random() < 0.1 else float(np.exp(s._X[i] @ w - ((s._X[i] - 0.5) ** 2).sum()))
        s.on_trial_complete(tid, None if value is None else {"tflops": value}, error=value is None)
        told += 1
    s._design = []  # the N observations replace the initial design
    s._model.theta = None  # force the first suggestion to optimize the hyperparameters
    times = []
    for k in range(repeats):
        t0 = time.perf_counter()
        s.suggest(f"t{k}")
        times.append(time.perf_counter() - t0)
    return {"space": space_name, "candidates": len(s.candidates), "observations": n_obs, "first_s": times[0],
            "median_later_s": float(np.median(times[1:])) if repeats > 1 else float("nan")}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--space", action="append", help="search space(s) (default nvidia/sm90 and amd/gfx942)")
    ap.add_argument("--obs", type=int, action="append", help="observation counts (default 50 and 200)")
    ap.add_argument("--out", default=None, help="write the markdown table here")
    a = ap.parse_args(argv)
    rows = [measure(sp, n) for sp in (a.space or ["nvidia/sm90", "amd/gfx942"]) for n in (a.obs or [50, 200])]
    lines = [
        f"GP suggestion latency on {platform.processor() or platform.machine()}, "
        f"{__import__('os').cpu_count()} CPU cores",
        "",
        "| space | feasible configs | observations | first suggest (hyperparameter refit) s | later suggests s |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r['space']} | {r['candidates']} | {r['observations']} | {r['first_s']:.3f} | "
              f"{r['median_later_s']:.3f} |" for r in rows]  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
