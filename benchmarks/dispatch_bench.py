"""Dispatch-overhead benchmark: `attention(...)` with a loaded best-configs artifact against a direct launch of
`kernels.flash_attn.flash_attn_fwd` with the same config. The difference (config lookup, input checks, launch
wrapper) must stay under 5 microseconds a call on a GPU.

    python -m benchmarks.dispatch_bench [--configs best_configs.json] [--shape 1,1,128,64] [--out FILE]

Without `--configs`, a one-entry artifact for the benchmarked shape on this device is written to a temporary
directory and loaded, so the lookup takes the exact-match path. A tiny shape keeps the loop bound by the CPU
(launch rate), which is what is measured: each timing is the per-call wall time of `--iters` back-to-back
calls followed by one synchronize, the median of `--rounds` rounds, the two variants interleaved.

On a CPU (Triton interpreter) it runs, but each call interprets the kernel (milliseconds), so the numbers are
not representative; only the `select_config` row means anything there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

LIMIT_US = 5.0


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _per_call_us(fn, iters: int, device: str) -> float:
    _sync(device)
    t0 = time.perf_counter_ns()
    for _ in range(iters):
        fn()
    _sync(device)
    return (time.perf_counter_ns() - t0) / iters / 1e3


def _synthetic_artifact(problem, device_info, config, out: Path) -> Path:
    import triton

    from raytune_attn import artifact, provenance

    prov = provenance.collect(device_info)
    entry = {
        "accelerator_type": device_info.accelerator_type,
        **{k: prov.get(k, "") for k in artifact.ENTRY_PROVENANCE},
        "triton_version": triton.__version__,
        "problem_key": problem.key, "problem": problem.to_dict(), "config": config, "tflops": 1.0,
        "latency_ms": None, "baseline_tflops": None, "baseline_impl": None, "n_trials": 1, "trial_id": "synthetic",
        "sweep_id": "dispatch_bench",
    }
    art = {"schema_version": artifact.SCHEMA_VERSION, "created": prov["timestamp"],
           "generator": {"raytune_attn_version": prov["raytune_attn_version"]}, "provenance": prov,
           "entries": [entry]}
    return artifact.write(art, out / artifact.ARTIFACT_FILENAME)


def run(shape=(1, 1, 128, 64), dtype="float16", causal=False, iters=2000, rounds=7, configs=None) -> dict:
    import torch

    from raytune_attn import api, runtime
    from raytune_attn.config import default_config
    from raytune_attn.device import detect
    from raytune_attn.kernels.flash_attn import flash_attn_fwd
    from raytune_attn.problem import Problem

    info = detect()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        dtype = "float32"  # the interpreter runs float32; the CPU numbers are not representative anyway
    b, h, s, d = shape
    problem = Problem(b, h, h, s, s, d, causal, dtype)
    tdtype = getattr(torch, dtype)
    q, k, v = (torch.randn(b, h, s, d, device=device, dtype=tdtype) for _ in range(3))
    with tempfile.TemporaryDirectory() as tmp:
        path = configs or _synthetic_artifact(problem, info, default_config(d), Path(tmp))
        table = runtime.load_configs(path)
        cfg, how = runtime.lookup(batch=b, hq=h, hkv=h, seqlen_q=s, seqlen_k=s, head_dim=d, causal=causal,
                                  dtype=dtype, varlen=False)

    def direct():
        flash_attn_fwd(q, k, v, cfg, causal=causal)

    def dispatched():
        api.attention(q, k, v, causal=causal)

    def lookup_only():
        runtime.select_config(batch=b, hq=h, hkv=h, seqlen_q=s, seqlen_k=s, head_dim=d, causal=causal, dtype=dtype,
                              varlen=False)

    for fn in (direct, dispatched, lookup_only):  # compile and warm caches
        for _ in range(3):
            fn()
    _sync(device)
    res = {"direct": [], "dispatched": [], "select_config": []}
    for _ in range(rounds):
        res["direct"].append(_per_call_us(direct, iters, device))
        res["dispatched"].append(_per_call_us(dispatched, iters, device))
        res["select_config"].append(_per_call_us(lookup_only, max(iters, 10000), device))
    med = {k: statistics.median(v) for k, v in res.items()}
    overhead = med["dispatched"] - med["direct"]
    return {
        "device": info.name, "accelerator_type": info.accelerator_type, "arch": info.arch,
        "representative": device == "cuda",
        "problem_key": problem.key, "lookup": how, "artifact_entries": len(table.artifact["entries"]),
        "iters": iters, "rounds": rounds,
        "direct_us": med["direct"], "dispatched_us": med["dispatched"], "select_config_us": med["select_config"],
        "overhead_us": overhead, "limit_us": LIMIT_US,
        "within_limit": overhead <= LIMIT_US if device == "cuda" else None,
        "rounds_us": res,
    }


def format_table(r: dict) -> str:
    rows = [
        ("direct flash_attn_fwd", r["direct_us"]),
        ("attention() with artifact", r["dispatched_us"]),
        ("select_config() alone", r["select_config_us"]),
        ("dispatch overhead", r["overhead_us"]),
    ]
    lines = [f"dispatch overhead on {r['device']} ({r['arch']}), {r['problem_key']}, lookup {r['lookup']}",
             f"{'what':<28} {'us/call':>10}"]
    lines += [f"{name:<28} {v:>10.2f}" for name, v in rows]
    if r["representative"]:
        lines.append(f"limit {r['limit_us']:.1f} us: {'PASS' if r['within_limit'] else 'FAIL'}")
    else:
        lines.append(f"limit {r['limit_us']:.1f} us: not checked (no GPU)")
        lines.append("NOTE: CPU / Triton interpreter: kernel calls are interpreted, numbers are not representative "
                     "(only select_config is)")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.dispatch_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", help="best-configs artifact to load (default: a synthetic one-entry artifact)")
    ap.add_argument("--shape", default=None, help="B,H,S,D (default 1,1,128,64 on GPU, 1,1,16,16 on CPU)")
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16", "float32"))
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--iters", type=int, default=None, help="calls per round (default 2000 on GPU, 5 on CPU)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 7 on GPU, 3 on CPU)")
    ap.add_argument("--out", default="dispatch_bench.json", help="JSON file to write the results to")
    ap.add_argument("--check", action="store_true", help="exit 1 if the overhead is above the limit")
    a = ap.parse_args(argv)
    import torch

    gpu = torch.cuda.is_available()
    shape = tuple(int(x) for x in a.shape.split(",")) if a.shape else ((1, 1, 128, 64) if gpu else (1, 1, 16, 16))
    if len(shape) != 4:
        ap.error("--shape must be B,H,S,D")
    r = run(shape, a.dtype, a.causal, a.iters or (2000 if gpu else 5), a.rounds or (7 if gpu else 3), a.configs)
    print(format_table(r))
    Path(a.out).write_text(json.dumps(r, indent=2) + "\n")
    print(f"wrote {a.out}")
    return 1 if a.check and r["representative"] and not r["within_limit"] else 0


if __name__ == "__main__":
    sys.exit(main())
