"""Each outcome of the benchmark actor's rung (`tune.sweep.bench_actor._Bench.run`) on a real GPU: a checked
rung, an unchecked one, a rung capped on its first (check) run, two configs the validation refuses (a tile size,
shared memory). The CPU suite runs the actor in the Triton interpreter, where the first-run cap never applies
(the interpreter's times say nothing); this shows that path on the GPU. Prints a table, writes JSON.

    python3 -m benchmarks.actor_paths_check --out $OUT/actor_paths.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from raytune_attn.config import default_config
from raytune_attn.problem import Problem
from raytune_attn.tune.measure.timing import STALL_MAX_MS
from raytune_attn.tune.sweep.bench_actor import _Bench

_PROBLEM = Problem(batch=2, hq=16, hkv=4, seqlen_q=2048, seqlen_k=2048, head_dim=128, causal=True)


def cases() -> list[tuple[str, dict, tuple]]:
    """(name, config, (rung, rep_ms, check, cap_ms)) per outcome."""
    c = default_config(128)
    return [
        ("checked rung", c, (1, 20.0, True, None)),
        ("unchecked rung", c, (2, 50.0, False, None)),
        # A cap this far below zero puts any first run over cap + STALL_MAX_MS: the rung is the check run alone.
        ("capped on its check run", c, (1, 20.0, True, -STALL_MAX_MS)),
        ("capped while timed", c, (2, 20.0, False, 1e-6)),
        ("refused: tile size", {**c, "BLOCK_M": 48}, (1, 20.0, True, None)),
        ("refused: shared memory", {**c, "BLOCK_M": 256, "BLOCK_N": 256, "num_stages": 6}, (1, 20.0, True, None)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    bench = _Bench("GPU")
    rows = []
    for name, cfg, (rung, rep_ms, check, cap_ms) in cases():
        out = bench.run(_PROBLEM.to_dict(), cfg, rung, rep_ms, check, cap_ms)
        rows.append({"case": name, **{k: out.get(k) for k in ("status", "latency_ms", "tflops", "capped",
                                                                "rel_err", "compile_s", "bench_s", "reason")}})
    stats = bench.stats()
    print(f"{_PROBLEM.key} on {bench.info_.get('name')}")
    print(f"{'case':26} {'status':8} {'latency_ms':>10} {'tflops':>7} {'capped':6} {'bench_s':>7}  reason")
    for r in rows:
        lat = f"{r['latency_ms']:.3f}" if r["latency_ms"] is not None else "-"
        tf = f"{r['tflops']:.1f}" if r["tflops"] is not None else "-"
        print(f"{r['case']:26} {r['status']:8} {lat:>10} {tf:>7} {r['capped']!s:6} {r['bench_s']:7.3f}  "
              f"{(r['reason'] or '')[:70]}")
    print(f"actor: {stats['calls']} calls, busy {stats['busy_s']:.2f} s, compile wait {stats['compile_wait_s']:.2f} s,"
          f" {stats['rungs_timed']} rungs timed ({stats['rungs_graphed']} graphed)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"problem": _PROBLEM.key, "device": bench.info_, "rows": rows, "stats": stats},
                                   indent=1, default=str))


if __name__ == "__main__":
    main()
