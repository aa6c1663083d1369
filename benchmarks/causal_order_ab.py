"""Causal tile order on one GPU: the warp-specialized kernel, persistent with the heavy-first order over all heads
(REVERSE_M), grouped a few heads at a time (LPT_GROUP), or in launch order, and on the plain grid; the split-mask
forms the sweeps picked beside them; SDPA flash and cuDNN timed on the same inputs.

    python3 -m benchmarks.causal_order_ab --out causal_order.json [--seqs 512,1024,2048,4096,8192,16384] [--dim 128]

Cells: B*S = 16384 tokens, H*D = 2048, causal, bf16 (as benchmarks/h100_kernel_table.py). Every output is checked
against a float32 reference before it is timed (benchmarks.gpu_knobs_check.run_problem: median, L2 flushed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks import gpu_knobs_check as gkc
from benchmarks.h100_kernel_table import _seqs, cells

WS = {"WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False, "num_warps": 4, "num_stages": 2,
      "BLOCK_M": 128, "BLOCK_N": 128, "PRE_LOAD_V": True}
PLAIN = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "REVERSE_M": True}
SPLIT_TMA = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "USE_TMA": True, "PRE_LOAD_V": True}


def configs() -> list[tuple[str, dict]]:
    pers_rev = {**WS, "PERSISTENT": True, "REVERSE_M": True}
    return [("ws pers", {**WS, "PERSISTENT": True}), ("ws pers rev", pers_rev),
            *[(f"ws pers rev lpt{g}", {**pers_rev, "LPT_GROUP": g}) for g in (2, 4, 8, 16)],
            ("ws pers rev n64", {**pers_rev, "BLOCK_N": 64}), ("ws pers rev lpt4 n64", {**pers_rev, "BLOCK_N": 64,
                                                                                       "LPT_GROUP": 4}),
            ("ws grid", WS), ("ws grid rev", {**WS, "REVERSE_M": True}),
            ("64x64 w4 s3 rev (split)", PLAIN), ("128x64 w4 s2 tma preV (split)", SPLIT_TMA)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("causal_order.json"))
    ap.add_argument("--seqs", type=_seqs, default=[512, 1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--dim", type=int, default=128, choices=(64, 128, 256))
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--rep-ms", type=float, default=100.0)
    a = ap.parse_args(argv)
    import torch
    import triton

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "command": "python3 -m benchmarks.causal_order_ab " + " ".join(sys.argv[1:] if argv is None else argv)}
    print(json.dumps(env), flush=True)
    t0, rows = time.perf_counter(), []
    for p in [c for c in cells(a.dim, a.seqs, a.dtype) if c.causal]:
        rows += gkc.run_problem(p, None, a.rep_ms, configs())
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"env": env, "wall_s": round(time.perf_counter() - t0, 1), "rows": rows},
                                indent=1, default=str) + "\n")
    print(table(rows))
    return 0


def table(rows: list[dict]) -> str:
    """One line per (S, config): TFLOP/s and the ratio to cuDNN of the same pass."""
    lines = ["| S | config | TFLOP/s | x cuDNN | x flash |", "|---|---|---|---|---|"]
    for r in rows:
        if r["name"].startswith("sdpa"):
            continue
        same = [x for x in rows if x["S"] == r["S"]]
        base = {x["name"]: x.get("tflops") for x in same}
        t = r.get("tflops")
        lines.append(f"| {r['S']} | {r['name']} | {t if t else r['status']} | {_ratio(t, base.get('sdpa-cudnn'))} | "
                     f"{_ratio(t, base.get('sdpa-flash'))} |")
    return "\n".join(lines)


def _ratio(a, b) -> str:
    return f"{a / b:.3f}" if a and b else "-"


if __name__ == "__main__":
    raise SystemExit(main())
