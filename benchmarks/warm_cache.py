"""Compile every config a sweep could propose into a Triton cache, so that a later sweep on that cache measures the
GPUs alone (compiles become cache loads). Used by gpu_run9.sh PART=scale2 to compare one GPU with two without
compilation in the way.

    TRITON_CACHE_DIR=/tmp/cache python3 docs/benchmarks/warm_cache.py llama3_8b_prefill \
        search_spaces/nvidia/sm90_study.yaml --workers 31

Each distinct binary is compiled once (problems that differ only in sizes share binaries, compile_pool.specialization);
configs the sweep's resource prefilter rejects are skipped, as the searchers never propose them. Prints the count and
the wall time.
"""

from __future__ import annotations

import argparse
import time

from raytune_attn.kernels.resources import Prefilter
from raytune_attn.tune.measure.compile_pool import CompilePool, specialization
from raytune_attn.tune.search.space import load_space
from raytune_attn.tune.sweep.problems import load_problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems")
    ap.add_argument("space")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    space = load_space(args.space)
    jobs: dict[tuple, tuple] = {}
    for p in load_problems(args.problems):
        pre = Prefilter.for_problem(space.arch, p.head_dim, p.dtype)
        for cfg in space.configs():
            if pre.accepts(cfg):
                jobs.setdefault(specialization(p, cfg), (p, cfg))
    by_problem: dict[str, tuple] = {}
    # Biggest tiles per warp first: they compile longest (up to ~75 s for 256x256 on 2 warps, run 7), and started
    # last they would leave one process compiling while the others idle.
    for p, cfg in sorted(jobs.values(), key=lambda j: -j[1]["BLOCK_M"] * j[1]["BLOCK_N"] / j[1]["num_warps"]):
        by_problem.setdefault(p.key, (p, []))[1].append(cfg)
    t0 = time.perf_counter()
    status: dict[str, int] = {}
    with CompilePool(args.workers) as pool:
        for p, cfgs in by_problem.values():
            for res in pool.compile(p, cfgs):
                status[res.status] = status.get(res.status, 0) + 1
    print(f"compiled {len(jobs)} binaries in {time.perf_counter() - t0:.1f} s: {status}")


if __name__ == "__main__":
    main()
