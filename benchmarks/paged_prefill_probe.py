"""Where the paged kernel's time goes on prefill chunks (GPU): the same chunks timed with a set of tile configs over
16-slot pages (a gathered block id per key), over 256-slot pages (one block id per key tile) and, as references,
the project's varlen kernel over contiguous K/V and SDPA over the gathered keys; plus a mixed batch of the paged
benchmark. Prints a table and writes Parquet.

    python3 benchmarks/paged_prefill_probe.py --out DIR [--workers 12] [--tag NAME]

Every config is compiled first by `--workers` processes into the shared Triton cache, then timed in this process
(`median_ms`: L2 flushed, CUDA-graph replays), every output checked against float32 SDPA over the gathered keys.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
from pathlib import Path

import pandas as pd
import torch

from benchmarks.paged_rows import Row, mixed_row

CONFIGS = [  # (BLOCK_M, BLOCK_N, num_warps, num_stages), one segment
    (64, 32, 4, 2), (64, 64, 4, 2), (64, 64, 4, 3), (64, 128, 4, 2), (64, 128, 4, 3), (64, 64, 8, 2),
    (128, 32, 4, 2), (128, 64, 4, 2), (128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2), (32, 64, 4, 2),
]


def rows() -> list[Row]:
    chunks = dict(q_lens=(1024,) * 4, contexts=(4096,) * 4)
    return [Row("prefill-p4-bs16", "prefill", **chunks, block_size=16),
            Row("prefill-p4-bs256", "prefill", **chunks, block_size=256),
            mixed_row(4, 32, seed=2)]


def config(c) -> dict:
    return {"BLOCK_M": c[0], "BLOCK_N": c[1], "NUM_SEGMENTS": 1, "num_warps": c[2], "num_stages": c[3]}


def _compile(job):
    from benchmarks.paged_batch import make_batch
    from benchmarks.paged_bench import _paged_fn

    row, cfgs = job
    batch = make_batch(row, "cuda")
    errors = []
    for c in cfgs:
        try:
            _paged_fn(batch, config(c)).fn()
        except Exception as e:  # noqa: BLE001 - reported, and the config is skipped when timed
            errors.append(f"{row.name} {c}: {type(e).__name__}: {str(e)[:200]}")
    torch.cuda.synchronize()
    return errors


def warm(workers: int) -> list[str]:
    """Every (row, config) compiled by `workers` processes, each row's configs split among workers // rows."""
    rs = rows()
    per_row = max(1, workers // len(rs))
    jobs = [(row, CONFIGS[i::per_row]) for row in rs for i in range(per_row)]
    with mp.get_context("spawn").Pool(workers) as pool:
        return [e for errs in pool.map(_compile, jobs) for e in errs]


def time_row(row: Row, tag: str, device: str = "cuda", configs=CONFIGS) -> list[dict]:
    from benchmarks.paged_baselines import sdpa_runner, varlen_runner
    from benchmarks.paged_batch import gather, make_batch, max_error, reference
    from benchmarks.paged_bench import _paged_fn
    from raytune_attn.tune.measure.timing import median_ms

    batch = make_batch(row, device)
    ref = reference(batch)
    flops = sum(4 * row.hq * row.head_dim * q * (k - q / 2) for q, k in zip(row.q_lens, row.contexts, strict=True))
    out = []

    def rec(method, cfg, runner):
        try:
            runner.fn()
            if device == "cuda":
                torch.cuda.synchronize()
            err = max_error(runner.output(), ref)
            ms = median_ms(runner.fn, warmup_ms=5, rep_ms=30)
        except Exception as e:  # noqa: BLE001 - a config the kernel refuses is a row that says so
            err, ms, cfg = float("nan"), float("nan"), f"{cfg} {type(e).__name__}: {str(e)[:120]}"
        gpu = torch.cuda.get_device_name() if device == "cuda" else device
        out.append({"tag": tag, "gpu": gpu, "row": row.name, "block_size": row.block_size,
                     "method": method, "config": cfg, "ms": ms, "tflops": flops / ms / 1e9 if ms == ms else ms,
                     "max_err": err})

    for c in configs:
        rec("paged", json.dumps(config(c)), _paged_fn(batch, config(c)))
    k, v = gather(batch, batch.k_cache), gather(batch, batch.v_cache)
    vr = varlen_runner(batch, k, v)
    rec("varlen", vr.label, vr)
    sr = sdpa_runner(batch, k, v)
    rec("sdpa", sr.label, sr)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--tag", default="current")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("paged_prefill_probe: needs a GPU")
    args.out.mkdir(parents=True, exist_ok=True)
    for e in warm(args.workers):
        print("compile:", e)
    records = [r for row in rows() for r in time_row(row, args.tag)]
    df = pd.DataFrame(records)
    df.to_parquet(args.out / f"prefill_probe_{args.tag}.parquet", index=False)
    print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}", max_colwidth=70))
    return 0


if __name__ == "__main__":
    sys.exit(main())
