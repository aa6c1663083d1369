"""Re-measure the best configs of recorded landscapes: is their order at the top resolvable?

A landscape times every config once (50 ms of runs, beside a compile pool and other GPUs' landscapes). Search
bars ask for "within 2% of the best", so the top few configs' recorded order matters. This compiles each
landscape's `--top` configs once, then times them in `--rounds` rounds, each round in a fresh random order, and
reports each config's recorded value beside the median and range of its re-measures, relative to the best median.

    python -m benchmarks.landscape_remeasure --landscape tests/data/heldout/h100_fp16_d128_causal.parquet \\
        --top 12 --rounds 7 --out remeasure.parquet

`--landscape FILE[::PROBLEM_KEY]` (repeatable); without a key, the file's first problem key, as
`benchmarks.search_table --keys-per-file 1` replays it. Rows are written after each landscape.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import random
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchmarks.landscape_spec import split_spec
from raytune_attn.device import detect
from raytune_attn.problem import Problem
from raytune_attn.tune.measure.compile_pool import CompilePool
from raytune_attn.tune.measure.timing import median_ms, tflops
from raytune_attn.tune.measure.workload import accept, make_workload, reference
from raytune_attn.tune.search.landscape import Landscape, load_landscape, read_table


def top_configs(path: str, key: str | None, top: int) -> tuple[str, list[tuple[dict, float]]]:
    """(problem key, [(config, recorded value)] of the `top` best successful configs, best first)."""
    if key is None:
        key = str(sorted(read_table(path)["problem_key"].astype(str).unique())[0])
    land = load_landscape(path, select={"problem_key": key})
    ok = sorted(((k, v) for k, v in land.values.items() if np.isfinite(v)), key=lambda kv: -kv[1])
    return key, [(land.space.to_config(k), float(v)) for k, v in ok[:top]]


def remeasure(problem: Problem, configs: list[dict], pool: CompilePool, *, rounds: int, rep_ms: float,
              seed: int) -> list[dict]:
    """One row per (config, round): ms and TFLOP/s, or status and reason where it failed to compile or check."""
    w = make_workload(problem, device="cuda")
    ref = reference(w)
    ready, rows = {}, []
    for res in pool.compile(problem, configs):
        i = configs.index(res.config)
        if res.status != "ok":
            rows.append({"config_index": i, "round": -1, "status": res.status, "reason": res.reason})
            continue
        out = w.check_run(res.config)
        ok, err = accept(out, ref)
        if not ok:
            rows.append({"config_index": i, "round": -1, "status": "invalid", "reason": f"rel err {err:.2e}"})
            continue
        ready[i] = out
    order = sorted(ready)
    rng = random.Random(seed)
    for r in range(rounds):
        rng.shuffle(order)
        for i in order:
            ms = median_ms(lambda c=configs[i], o=ready[i]: w.run(c, out=o), rep_ms=rep_ms)
            rows.append({"config_index": i, "round": r, "status": "ok", "reason": "", "ms": ms,
                         "tflops": tflops(problem.flops(), ms)})
    return rows


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per (landscape, config): recorded and re-measured values relative to each one's best."""
    ok = df[df["status"] == "ok"]
    g = ok.groupby(["landscape", "problem_key", "config_index"], sort=False)
    s = g.agg(config=("config", "first"), recorded=("recorded_tflops", "first"), median=("tflops", "median"),
              low=("tflops", "min"), high=("tflops", "max")).reset_index()
    per = s.groupby(["landscape", "problem_key"])
    for col in ("recorded", "median"):
        s[f"{col}_rel"] = s[col] / per[col].transform("max")
    s["spread"] = (s["high"] - s["low"]) / s["median"]
    s["rank_recorded"] = s["config_index"] + 1
    s["rank_remeasured"] = per["median"].rank(ascending=False, method="first").astype(int)
    return s.sort_values(["landscape", "problem_key", "rank_recorded"], ignore_index=True)


def refined(land: Landscape, table: pd.DataFrame, *, path: str | Path, key: str) -> Landscape:
    """`land` (recorded table `path`, problem `key`) with each re-measured config's value replaced by the median of
    its re-measures, on the recorded scale: times the median over those configs of recorded / re-measured (the
    two runs' clocks and machines differ; the ratio is taken over all re-measured configs, not the best alone, whose
    recorded value is the one most likely inflated). Unchanged when `table` has no row of this landscape; a
    ValueError where the re-measure ran on another GPU than the recording."""
    rows = table[(table["landscape"] == Path(path).stem) & (table["problem_key"] == key) & (table["status"] == "ok")]
    if rows.empty:
        return land
    recorded_gpu = set(read_table(path, select={"problem_key": key})["gpu"].astype(str))
    if set(rows["gpu"].astype(str)) != recorded_gpu:
        raise ValueError(f"{path} {key}: recorded on {sorted(recorded_gpu)}, re-measured on "
                         f"{sorted(set(rows['gpu']))}: a re-measure only refines a table of the same GPU")
    per = rows.groupby("config").agg(recorded=("recorded_tflops", "first"), median=("tflops", "median"))
    scale = float(np.median(per["recorded"] / per["median"]))
    values = dict(land.values)
    for config, r in per.iterrows():
        k = land.space.key(ast.literal_eval(config))
        if k not in values:
            raise ValueError(f"{path} {key}: re-measured config {config} is not in the recorded table")
        values[k] = float(r["median"]) * scale
    return dataclasses.replace(land, values=values)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.landscape_remeasure", description=__doc__.split("\n\n")[0])
    ap.add_argument("--landscape", action="append", required=True, help="FILE or FILE::PROBLEM_KEY (repeatable)")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rep-ms", type=float, default=50, help="GPU time of runs per timing, as the landscapes had")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", required=True, help="Parquet file: one row per (landscape, config, round)")
    args = ap.parse_args(argv)
    if args.top < 2 or args.rounds < 2:
        ap.error("--top and --rounds must be at least 2")
    if not torch.cuda.is_available():
        ap.error("needs a GPU: the landscapes' values are GPU timings")
    jobs = []
    for spec in args.landscape:  # read every landscape before compiling anything: a bad path fails at once
        path, key = split_spec(spec)
        if not path.is_file():
            ap.error(f"--landscape {path}: no such file")
        jobs.append((str(path), *top_configs(str(path), key, args.top)))
    gpu, rows = detect().name, []
    with CompilePool(args.workers) as pool:
        for path, key, best in jobs:
            t0 = time.perf_counter()
            configs = [c for c, _ in best]
            for r in remeasure(Problem.from_key(key), configs, pool, rounds=args.rounds, rep_ms=args.rep_ms,
                               seed=args.seed):
                i = r["config_index"]
                rows.append({"landscape": Path(path).stem, "problem_key": key, "gpu": gpu,
                             "config": str(configs[i]), "recorded_tflops": best[i][1], **r})
            pd.DataFrame(rows).to_parquet(args.out, index=False)
            print(f"{Path(path).stem} {key}: {time.perf_counter() - t0:.1f} s", flush=True)
    s = summary(pd.DataFrame(rows))
    cols = ["landscape", "problem_key", "rank_recorded", "rank_remeasured", "recorded_rel", "median_rel", "spread",
            "config"]
    with pd.option_context("display.width", 250, "display.max_colwidth", 120, "display.max_rows", 1000):
        print(s[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
