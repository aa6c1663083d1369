"""Compile one config of the kernel for sm_90 on a machine without a GPU, and print what the binary uses: registers,
spills, shared memory, and whether Triton's warp-specialization pass split the key loop. For checking a kernel
change before it costs device time (the GPU machines run Triton 3.6: install that one beside the project's).

    pip install --no-deps --target /tmp/t36 triton==3.6.0
    PYTHONPATH=/tmp/t36 python docs/benchmarks/sm90_offline.py --dim 128 --seq 512 --causal \
        '{"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 2, "USE_TMA": true, ...}' [--ir DIR]

The signature is the one `flash_attn_fwd` launches for a dense contiguous bf16 problem of issue 7's grid
(B = 16384 / S, H = 2048 / D), with Triton's divisibility-by-16 hints on the strides that have it; lengths are not
specialized (as in the kernel). One line of JSON a config; `--ir DIR` also writes its TTGIR and PTX there.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from raytune_attn.config import InvalidConfig, default_config, validate_config  # noqa: E402
from raytune_attn.kernels import flash_attn as fa  # noqa: E402

WIDTH = 2048  # H * D of issue 7's grid (the batch, 16384 / S, is a run-time value: it changes no binary)
TARGET = GPUTarget("cuda", 90, 32)
DTYPES = {"bfloat16": "bf16", "float16": "fp16"}


def signature(kernel, dim: int, seq: int, causal: bool, dtype: str, config: dict) -> tuple[dict, dict, dict]:
    """(signature, constexprs, attrs) of one launch, as Triton's JIT would specialize it."""
    heads = WIDTH // dim
    stride = (heads * seq * dim, seq * dim, dim)  # (B, H, S, D) contiguous: batch, head, row
    values = {"stride_qz": stride[0], "stride_qh": stride[1], "stride_qm": stride[2],
              "stride_kz": stride[0], "stride_kh": stride[1], "stride_kn": stride[2],
              "stride_vz": stride[0], "stride_vh": stride[1], "stride_vn": stride[2],
              "stride_oz": stride[0], "stride_oh": stride[1], "stride_om": stride[2],
              "stride_lz": 0, "stride_lh": 0, "stride_lm": 0, "num_heads_q": heads, "group_size": 1}
    constexprs = {
        "Lse": None, "cu_seqlens_q": None, "cu_seqlens_k": None,
        "HEAD_DIM": dim, "BLOCK_D": max(16, triton.next_power_of_2(dim)), "BLOCK_M": config["BLOCK_M"],
        "BLOCK_N": config["BLOCK_N"], "IS_CAUSAL": causal, "IS_VARLEN": False, "PRE_LOAD_V": config["PRE_LOAD_V"],
        "SPLIT_MASK": config["SPLIT_MASK"], "USE_TMA": config["USE_TMA"], "RETURN_LSE": False,
        "WARP_SPECIALIZE": config.get("WARP_SPECIALIZE", False), "REVERSE_M": config.get("REVERSE_M", False),
        "EVEN_K": seq % config["BLOCK_N"] == 0,
    }
    if "WHOLE_DESC" in kernel.arg_names:  # the persistent kernel, on these contiguous inputs
        constexprs["WHOLE_DESC"] = config["USE_TMA"] and constexprs["EVEN_K"]
        constexprs["ONE_Q_BUFFER"] = config.get("ONE_Q_BUFFER", False)
    declared = {param.name for param in kernel.params if param.is_constexpr}
    sig, attrs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        v = values.get(name)
        if name in declared or name in ("Lse", "cu_seqlens_q", "cu_seqlens_k"):
            sig[name] = "constexpr"  # the launcher passes None for an absent pointer: Triton folds it in too
        elif name in ("Q", "K", "V", "Out"):
            sig[name] = "*" + DTYPES[dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name == "qk_scale":
            sig[name] = "fp32"
        elif v == 1:  # Triton's JIT folds an int equal to 1 into the binary
            sig[name] = "constexpr"
            constexprs[name] = 1
        else:
            sig[name] = "i32"
            if v and v % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    return sig, constexprs, attrs


def compile_one(dim: int, seq: int, causal: bool, dtype: str, knobs: dict, ir: Path | None) -> dict:
    """One config's compile report (an `error` entry where Triton refused it)."""
    config = validate_config({**default_config(dim), **knobs}, head_dim=dim, vendor="nvidia")
    kernel = fa._attn_fwd_persistent if config.get("PERSISTENT") else fa._attn_fwd
    sig, constexprs, attrs = signature(kernel, dim, seq, causal, dtype, config)
    backend = triton.compiler.make_backend(TARGET)
    opts = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    if config.get("maxnreg"):
        opts["maxnreg"] = config["maxnreg"]
    row = {"dim": dim, "seq": seq, "causal": causal, "config": knobs}
    try:
        compiled = triton.compile(ASTSource(kernel, sig, constexprs, attrs), target=TARGET,
                                  options=backend.parse_options(opts).__dict__)
    except Exception as e:  # noqa: BLE001 - a compile failure is the answer for this config
        row["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300] if str(e).strip() else ''}"
        return row
    ttgir, ptx = compiled.asm["ttgir"], compiled.asm["ptx"]
    row.update(shared=compiled.metadata.shared, num_warps=compiled.metadata.num_warps,
               warp_specialized="ttg.warp_specialize" in ttgir,
               # Places in the PTX that build a descriptor, not how often they run: the TTGIR shows whether each
               # sits inside the persistent grid's tile loop.
               descriptor_sites=len(re.findall(r"tensormap\.replace[^\n]*global_address", ptx)),
               acquire_fence_sites=ptx.count("fence.proxy.tensormap::generic.acquire"))
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "k.ptx"
        p.write_text(ptx)
        ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
        out = subprocess.run([str(ptxas), "-v", "--gpu-name=sm_90a", str(p), "-o", str(Path(tmp) / "k.o")],
                             capture_output=True, text=True).stderr
    regs = re.findall(r"Used (\d+) registers", out)
    spills = re.findall(r"(\d+) bytes spill stores", out)
    row.update(registers=int(regs[0]) if regs else None, spill_bytes=int(spills[0]) if spills else None)
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
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    ap.add_argument("--ir", type=Path, help="write each config's TTGIR and PTX here")
    ap.add_argument("configs", nargs="+", type=json.loads, help="configs as JSON objects (the rest: defaults)")
    a = ap.parse_args(argv)
    failed = 0
    for knobs in a.configs:
        try:
            row = compile_one(a.dim, a.seq, a.causal, a.dtype, knobs, a.ir)
        except InvalidConfig as e:
            print(f"invalid config {json.dumps(knobs)}: {e}", file=sys.stderr)
            return 2
        failed += "error" in row
        print(json.dumps(row), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
