"""Measure every config of a search space for given problems: the recorded landscapes that replay and the
search tests run on, and the exhaustive best that sweeps are judged against.

    python -m benchmarks.exhaustive --space search_spaces/nvidia/sm90.yaml --fix SPLIT_MASK=true \\
        --fix USE_TMA=false --problem dense-b4-hq16-hkv16-sq4096-sk4096-d128-causal-bfloat16 --out land.parquet

Compiles run ahead in a process pool while the GPU times whatever has compiled; every config is checked
against the reference before it is timed. Rows are written as they come, so an interrupted run keeps its data,
and `--resume` continues it: (problem, config) pairs already in `--out` are not measured again.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import pandas as pd
import torch
import yaml

from raytune_attn.config import InvalidConfig
from raytune_attn.device import detect
from raytune_attn.problem import Problem
from raytune_attn.tune.measure.compile_pool import CompilePool, CompileResult, specialization
from raytune_attn.tune.measure.timing import median_ms, tflops
from raytune_attn.tune.measure.workload import accept, make_workload, reference


def _configs(space_path: str, fixes: list[str]) -> list[dict]:
    from raytune_attn.tune.search.space import load_space

    configs = load_space(space_path).configs()
    for fix in fixes:
        name, _, raw = fix.partition("=")
        value = yaml.safe_load(raw)
        configs = [c for c in configs if c.get(name) == value]
    return configs


def measure_problem(problem: Problem, configs: list[dict], pool: CompilePool, *, rep_ms: float = 50,
                    compile_failures: dict | None = None):
    """Yield one row per config (status ok/invalid/error with the reason).

    `compile_failures` maps a `specialization` to the (status, reason) of its failed compile: a config that failed
    to compile for one problem fails for every problem that shares its binary, and a compile killed at the time
    limit leaves nothing in Triton's cache, so without this memo it would cost the full limit again per problem.
    New failures are added to it."""
    failures = compile_failures if compile_failures is not None else {}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    w = make_workload(problem, device=device)
    ref = reference(w)
    flops = problem.flops()
    info = detect()
    base = {"gpu": info.name, "arch": info.arch, "problem_key": problem.key, **problem.to_dict(),
            "triton": __import__("triton").__version__, "torch": torch.__version__}
    remembered, fresh = [], []
    for c in configs:
        failed = failures.get(specialization(problem, c))
        if failed:
            remembered.append(CompileResult(problem.key, c, *failed, 0.0))
        else:
            fresh.append(c)
    for res in itertools.chain(remembered, pool.compile(problem, fresh)):
        if res.status != "ok":
            failures.setdefault(specialization(problem, res.config), (res.status, res.reason))
        row = {**base, **res.config, "status": res.status, "reason": res.reason, "compile_s": res.compile_s,
               "n_regs": res.n_regs, "n_spills": res.n_spills, "shared_bytes": res.shared_bytes,
               "ms": float("nan"), "tflops": float("nan"), "rel_err": float("nan"), "bench_s": 0.0}
        if res.status == "ok":
            t0 = time.perf_counter()
            try:
                out = w.check_run(res.config)
                ok, err = accept(out, ref)
                row["rel_err"] = err
                if not ok:
                    row.update(status="invalid", reason=f"wrong result: rel err {err:.2e}")
                else:
                    # Timed into the output of the check: a captured run (timing.graphed) allocates nothing.
                    ms = median_ms(lambda c=res.config, o=out: w.run(c, out=o), rep_ms=rep_ms)
                    row.update(ms=ms, tflops=tflops(flops, ms))
            except InvalidConfig as e:
                row.update(status="invalid", reason=str(e))
            except Exception as e:  # a run-time failure of one config must not lose the others
                row.update(status="error", reason=f"{type(e).__name__}: {e}")
            row["bench_s"] = time.perf_counter() - t0
        row["timestamp"] = pd.Timestamp.now(tz="UTC")
        yield row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.exhaustive", description=__doc__.split("\n\n")[0])
    ap.add_argument("--space", required=True)
    ap.add_argument("--fix", action="append", default=[], help="NAME=VALUE: keep only configs with this value")
    ap.add_argument("--problem", action="append", required=True, help="problem key (repeatable)")
    ap.add_argument("--out", required=True, help="Parquet file (rows appended per problem)")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--timeout-s", type=float, default=120)
    ap.add_argument("--rep-ms", type=float, default=50)
    ap.add_argument("--resume", action="store_true", help="keep the rows already in --out and measure only the "
                    "(problem, config) pairs it lacks")
    args = ap.parse_args(argv)
    configs = _configs(args.space, args.fix)
    out = Path(args.out)
    rows: list[dict] = []
    done: set[tuple] = set()
    failures: dict[tuple, tuple[str, str]] = {}
    if args.resume and out.exists():
        rows = pd.read_parquet(out).to_dict("records")
        names = list(configs[0]) if configs else []
        done = {(r["problem_key"], *(r.get(k) for k in names)) for r in rows}
        for r in rows:  # failures before any launch (bench_s 0) are the binary's: remember them
            if r["status"] != "ok" and not r.get("bench_s"):
                cfg = {k: (r[k].item() if hasattr(r[k], "item") else r[k]) for k in names}
                failures.setdefault(specialization(Problem.from_key(r["problem_key"]), cfg), (r["status"], r["reason"]))
    with CompilePool(args.workers, timeout_s=args.timeout_s) as pool:
        for key in args.problem:
            problem = Problem.from_key(key)
            todo = [c for c in configs if (problem.key, *c.values()) not in done]
            t0 = time.perf_counter()
            n = 0
            for row in measure_problem(problem, todo, pool, rep_ms=args.rep_ms, compile_failures=failures) \
                    if todo else ():
                rows.append(row)
                n += 1
                if n % 25 == 0:
                    pd.DataFrame(rows).to_parquet(out, index=False)
            wall = time.perf_counter() - t0
            df = pd.DataFrame(rows)
            df.to_parquet(out, index=False)
            mine = df[df.problem_key == key]
            ok = mine[mine.status == "ok"]
            busy = mine.bench_s.sum() / wall if todo else float("nan")  # this run's share only when it ran
            best = ok.loc[ok.tflops.idxmax()] if len(ok) else None
            print(json.dumps({
                "problem": key, "configs": len(mine), "ok": len(ok), "invalid": int((mine.status == "invalid").sum()),
                "error": int((mine.status == "error").sum()), "wall_s": round(wall, 1),
                "compile_s_sum": round(mine.compile_s.sum(), 1), "gpu_busy_fraction": round(busy, 3),
                "best_tflops": None if best is None else round(best.tflops, 1),
                "best_config": None if best is None else {k: best[k] for k in configs[0]},
            }, default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
