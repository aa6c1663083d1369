"""Does measuring SDPA's baselines slow the Triton rungs that a process runs afterwards? (run 11)

Run 10's call 5 (two H200s) found each rung's host-side steps 2-5x longer in sweeps that had measured SDPA's
baselines in the benchmark actors before the sweep. This times the sweep's rung (timing.median_ms with its
per-step `phase_s`) on a few Llama problems in one process: before the baselines, after them (bench.bench_problem
on every problem of the set, as the sweep's actors did), after a full garbage collection with the survivors
frozen, and after emptying the CUDA caching allocator. Each state also records the process's threads, its
Python objects and the allocator's reserved bytes. Prints a table, writes JSON.

    python3 benchmarks/baseline_pollution.py --out /tmp/pollution.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="llama3_8b_prefill")
    ap.add_argument("--rungs", type=int, default=40, help="rungs per problem and state")
    ap.add_argument("--rep-ms", type=float, default=10.0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    import torch

    from raytune_attn.config import default_config
    from raytune_attn.tune.measure.bench import bench_problem
    from raytune_attn.tune.measure.timing import median_ms
    from raytune_attn.tune.measure.workload import make_workload
    from raytune_attn.tune.sweep.problems import load_problems

    problems = load_problems(a.problems)
    timed = [p for p in problems if p.seqlen_q in (1024, 4096)][:3]
    loads = []
    for p in timed:
        w = make_workload(p, device="cuda")
        cfg = default_config(p.head_dim, p.seqlen_q, p.seqlen_k)
        w.compile(cfg)
        loads.append((p, w, cfg, torch.empty_like(w.q)))

    def state(label: str) -> dict:
        row = {"state": label, "threads": len(os.listdir("/proc/self/task")), "py_objects": len(gc.get_objects()),
               "reserved_mib": torch.cuda.memory_reserved() / 2**20}
        phase: dict[str, float] = {}
        t0 = time.perf_counter()
        n = 0
        for _ in range(a.rungs):
            for _p, w, cfg, buf in loads:
                st: dict = {}
                median_ms(lambda w=w, cfg=cfg, buf=buf: w.run(cfg, out=buf), warmup_ms=min(a.rep_ms, 10),
                          rep_ms=a.rep_ms, stats=st)
                for k, v in st.get("phase_s", {}).items():
                    phase[k] = phase.get(k, 0.0) + v
                n += 1
        row["ms_per_rung"] = (time.perf_counter() - t0) / n * 1e3
        row.update({f"{k}_ms": v / n * 1e3 for k, v in phase.items()})
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
        return row

    rows = [state("before baselines")]
    t0 = time.perf_counter()
    for p in problems:
        bench_problem(p, [], rep_ms=100)
    base_s = time.perf_counter() - t0
    rows.append(state(f"after baselines ({base_s:.0f} s)"))
    rows.append(state("again"))
    gc.collect()
    gc.freeze()
    rows.append(state("after gc.collect + gc.freeze"))
    torch.cuda.empty_cache()
    rows.append(state("after empty_cache"))

    keys = [k for k in rows[0] if k.endswith("_ms") or k in ("threads", "py_objects", "reserved_mib")]
    print("| state | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for r in rows:
        print(f"| {r['state']} | " + " | ".join(f"{r.get(k, float('nan')):.4g}" for k in keys) + " |")
    with open(a.out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
