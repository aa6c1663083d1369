"""Wall time to a sweep's first results on a GPU node: with a Triton cache warmed on CPU (a head node without this
GPU, compiling for it by name) against compiling on the GPU node itself.

    python benchmarks/first_trial_warm_cache.py --space nvidia/sm90 --configs 8 --workers 15 \
        --out $OUT/first_trial_warm_cache.json

The configs: a seeded sample of the space that the validation accepts on this GPU for the problem (default: dense
bf16, batch 4, 16 heads, 4096 tokens, head dim 128, causal). Each leg runs the same fresh process on the GPU (its
imports, the CUDA context, then every config once, in order, with a synchronize after each), timed from its
start, on its own empty TRITON_CACHE_DIR:

* cold: the process compiles each config as its launcher asks for it (what a GPU node without a warm cache does);
* warm: before it, `CompilePool(target=...)` compiles the configs in processes that see no GPU
  (CUDA_VISIBLE_DEVICES=""), as a CPU-only head node would; then the process runs on that cache. Entries the
  process adds to the cache are binaries it had to compile after all (`misses`, expected 0).

Prints a table and writes JSON to `--out`. Without a GPU (a test of the plumbing) the process runs in the
interpreter, which compiles nothing: pass `--target` (e.g. cuda:80) for the warming leg.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_T0 = time.perf_counter()  # the child's clock starts before torch is imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_PROBLEM = {"batch": 4, "hq": 16, "hkv": 16, "seqlen_q": 4096, "seqlen_k": 4096, "head_dim": 128,
                   "causal": True, "dtype": "bfloat16"}


def child(problem_json: str, configs_json: str) -> None:
    """Run every config once on the problem; print seconds since process start at each result, as JSON."""
    from raytune_attn.tune.measure.compile_pool import interpret_without_gpu

    interpret_without_gpu()
    import torch

    from raytune_attn.problem import Problem
    from raytune_attn.tune.measure.workload import make_workload

    device = "cuda" if torch.cuda.is_available() else "cpu"
    w = make_workload(Problem.from_dict(json.loads(problem_json)), device=device)
    if device == "cuda":
        torch.cuda.synchronize()
    ready = time.perf_counter() - _T0
    done = []
    for cfg in json.loads(configs_json):
        w.run(cfg)
        if device == "cuda":
            torch.cuda.synchronize()
        done.append(time.perf_counter() - _T0)
    print(json.dumps({"ready_s": ready, "result_s": done}))


def _entries(cache: Path) -> set[str]:
    return {p.name for p in cache.iterdir()} if cache.exists() else set()


def run_leg(problem: dict, configs: list[dict], cache: Path) -> dict:
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
    env.pop("TRITON_INTERPRET", None)
    before = _entries(cache)
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(problem), json.dumps(configs)],
                         env=env, capture_output=True, text=True, check=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    return {**res, "first_result_s": res["result_s"][0], "all_results_s": res["result_s"][-1],
            "misses": len(_entries(cache) - before)}


def warm(problem, configs: list[dict], target: str, workers: int, cache: Path) -> dict:
    """Compile the configs for `target` in processes without a GPU, into `cache`."""
    from raytune_attn.tune.measure.compile_pool import CompilePool

    saved = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "TRITON_CACHE_DIR")}
    os.environ.update(CUDA_VISIBLE_DEVICES="", TRITON_CACHE_DIR=str(cache))  # what the spawned workers inherit
    t0 = time.perf_counter()
    try:
        with CompilePool(workers, timeout_s=1800, device="cpu", target=target) as pool:
            results = list(pool.compile(problem, configs))
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return {"warm_wall_s": time.perf_counter() - t0, "compile_s": [r.compile_s for r in results],
            "statuses": [r.status for r in results], "reasons": [r.reason for r in results if r.reason]}


def pick_configs(space_name: str, problem, arch: str | None, n: int, seed: int) -> list[dict]:
    from raytune_attn import validation
    from raytune_attn.tune.measure.cross_compile import select_configs
    from raytune_attn.tune.search.space import load_space

    space = load_space(space_name)
    ok = [c for c in select_configs(space, min(len(space.configs()), 20 * n), seed)
          if validation.Screen.for_problem(arch, problem.head_dim, problem.dtype).accepts(c)] if arch else []
    return ok[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--space", default="nvidia/sm90")
    ap.add_argument("--problem", type=json.loads, default=DEFAULT_PROBLEM, help="a problem as JSON")
    ap.add_argument("--configs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--target", help="the warming leg's target (default: this machine's GPU)")
    ap.add_argument("--out", default="first_trial_warm_cache.json")
    a = ap.parse_args(argv)
    import torch

    from raytune_attn.problem import Problem
    from raytune_attn.tune.measure import targets

    if a.target is None and not torch.cuda.is_available():
        print("error: no GPU here: name the warming leg's --target (e.g. cuda:80)", file=sys.stderr)
        return 2
    target = targets.parse_target(a.target) if a.target else targets.local_target()
    problem = Problem.from_dict(a.problem)
    configs = pick_configs(a.space, problem, target.prefilter_arch, a.configs, a.seed)
    if not configs:
        print(f"error: no config of {a.space} passes the validation on {target.name}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        cold = run_leg(problem.to_dict(), configs, Path(tmp) / "cold")
        warming = warm(problem, configs, target.name, a.workers, Path(tmp) / "warm")
        hot = run_leg(problem.to_dict(), configs, Path(tmp) / "warm")
    report = {"target": target.name, "problem": problem.key, "configs": configs, "cold": cold, "warming": warming,
              "warm": hot, "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"}
    print(f"{report['device']}, {len(configs)} configs of {a.space} on {problem.key}, warmed for {target.name}")
    print("leg    ready s  first result s  all results s  compiles in the process")
    for name, leg in (("cold", cold), ("warm", hot)):
        print(f"{name:5}  {leg['ready_s']:7.1f}  {leg['first_result_s']:14.1f}  {leg['all_results_s']:13.1f}  "
              f"{leg['misses']}")
    print(f"warming on CPU ({a.workers} processes): {warming['warm_wall_s']:.1f} s wall, {warming['statuses']}")
    Path(a.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
