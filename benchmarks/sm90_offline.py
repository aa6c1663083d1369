"""Compile one config of the kernel for sm_90 on a machine without a GPU, and print what the binary uses: registers,
spills, shared memory, and whether Triton's warp-specialization pass split the key loop. For checking a kernel
change before it costs device time (the GPU machines run Triton 3.6: install that one beside the project's).

    pip install --no-deps --target /tmp/t36 triton==3.6.0
    PYTHONPATH=/tmp/t36 python benchmarks/sm90_offline.py --dim 128 --seq 512 --causal \
        '{"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 2, "USE_TMA": true, ...}' [--ir DIR]

The launch is the one `flash_attn_fwd` makes for a dense contiguous problem of issue 7's grid (B = 16384 / S,
H = 2048 / D), built and specialized by `raytune_attn.tune.measure.target_build` (the launcher's own arguments,
Triton's own binder) and compiled for `--target` (default cuda:90). One line of JSON a config; `--ir DIR` also
writes its TTGIR and PTX there.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.pop("TRITON_INTERPRET", None)  # before Triton loads: the interpreter compiles nothing

from raytune_attn.config import InvalidConfig, default_config, validate_config  # noqa: E402
from raytune_attn.problem import Problem  # noqa: E402
from raytune_attn.tune.measure import target_build as tb  # noqa: E402
from raytune_attn.tune.measure.targets import TARGETS, parse_target  # noqa: E402

WIDTH = 2048  # H * D of issue 7's grid (the batch, 16384 / S, is a run-time value: it changes no binary)
DTYPES = ("bfloat16", "float16")


def compile_one(dim: int, seq: int, causal: bool, dtype: str, knobs: dict, ir: Path | None,
                target: str = "cuda:90") -> dict:
    """One config's compile report (an `error` entry where Triton refused it)."""
    tgt = parse_target(target)
    config = validate_config({**default_config(dim), **knobs}, head_dim=dim, vendor="nvidia")
    problem = Problem(batch=max(1, 16384 // seq), hq=WIDTH // dim, hkv=WIDTH // dim, seqlen_q=seq, seqlen_k=seq,
                      head_dim=dim, causal=causal, dtype=dtype)
    row = {"dim": dim, "seq": seq, "causal": causal, "config": knobs}
    try:
        compiled = tb.compile_kernel(tgt, problem, config)
    except Exception as e:  # noqa: BLE001 - a compile failure is the answer for this config
        row["error"] = tb.compiler_message(e)
        return row
    ttgir, ptx = compiled.asm["ttgir"], compiled.asm["ptx"]
    res = tb.nvidia_resources(compiled.asm["cubin"])
    row.update(shared=compiled.metadata.shared, num_warps=compiled.metadata.num_warps,
               warp_specialized="ttg.warp_specialize" in ttgir,
               # Places in the PTX that build a descriptor, not how often they run: the TTGIR shows whether each
               # sits inside the persistent grid's tile loop.
               descriptor_sites=len(re.findall(r"tensormap\.replace[^\n]*global_address", ptx)),
               acquire_fence_sites=ptx.count("fence.proxy.tensormap::generic.acquire"),
               # The kernel keeps no arrays in local memory and calls nothing: its stack frame is spilled registers.
               registers=res["registers"], spill_bytes=res["stack_bytes"])
    if ir is not None:
        ir.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha1(json.dumps(knobs, sort_keys=True).encode()).hexdigest()[:8]
        stem = f"d{dim}_s{seq}_{'causal' if causal else 'full'}_{digest}"
        (ir / f"{stem}.ttgir").write_text(ttgir)
        (ir / f"{stem}.ptx").write_text(ptx)
        row["ir"] = str(ir / stem)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dtype", default="bfloat16", choices=DTYPES)
    ap.add_argument("--target", default="cuda:90", choices=[t for t in TARGETS if t.startswith("cuda")])
    ap.add_argument("--ir", type=Path, help="write each config's TTGIR and PTX here")
    ap.add_argument("configs", nargs="+", type=json.loads, help="configs as JSON objects (the rest: defaults)")
    a = ap.parse_args(argv)
    failed = 0
    for knobs in a.configs:
        try:
            row = compile_one(a.dim, a.seq, a.causal, a.dtype, knobs, a.ir, a.target)
        except InvalidConfig as e:
            print(f"invalid config {json.dumps(knobs)}: {e}", file=sys.stderr)
            return 2
        failed += "error" in row
        print(json.dumps(row), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
