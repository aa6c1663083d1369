"""Compile, check and time the Hopper knobs (issue #7) on a GPU: a handful of configs per problem.

    python3 docs/benchmarks/gpu_knobs_check.py --out $OUT/knobs.json

Problems: bf16, S = 4096, B = 4 (B*S = 16384), H*D = 2048 (D=64: 32 heads, D=128: 16 heads), causal and not.
Configs: the default, the default plus each new knob alone (WARP_SPECIALIZE, maxnreg, PERSISTENT, REVERSE_M,
both scheduling knobs, USE_TMA), and Hopper-sized combinations (BLOCK_M=BLOCK_N=128, 8 warps, 2-3 stages, TMA,
warp specialization on and off). Every config is compiled in a pool of worker processes first (a compiler
crash or hang costs that config, not the run), then checked against a float32 SDPA reference and timed
(median, L2 flushed, `--rep-ms` of runs). SDPA's flash and cuDNN backends are timed on the same inputs.
A config that fails at any step gets a row with its reason; the script never stops on one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: the repository's package

import torch  # noqa: E402

from raytune_attn.config import default_config, validate_config  # noqa: E402
from raytune_attn.problem import Problem  # noqa: E402
from raytune_attn.tune.measure.compile_pool import CompilePool  # noqa: E402
from raytune_attn.tune.measure.timing import median_ms, tflops  # noqa: E402
from raytune_attn.tune.measure.workload import accept, make_workload, reference  # noqa: E402

SEQ, TOKENS, WIDTH = 4096, 16384, 2048


def sdpa_fn(backend: str, w):
    """PyTorch SDPA pinned to one backend ("flash" or "cudnn") on the workload's dense inputs."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    which = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]

    def fn():
        with sdpa_kernel([which]):
            return torch.nn.functional.scaled_dot_product_attention(w.q, w.k, w.v, is_causal=w.problem.causal)

    return fn


def problems() -> list[Problem]:
    return [Problem(batch=TOKENS // SEQ, hq=WIDTH // d, hkv=WIDTH // d, seqlen_q=SEQ, seqlen_k=SEQ, head_dim=d,
                    causal=c, dtype="bfloat16") for d in (64, 128) for c in (False, True)]  # fmt: skip


def configs(head_dim: int) -> list[tuple[str, dict]]:
    """(name, config) pairs: each new knob on top of the default, then Hopper-sized combinations."""
    base = default_config(head_dim)
    hopper = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 2, "USE_TMA": True}
    out = [
        ("default", {}),
        ("default+ws", {"WARP_SPECIALIZE": True}),
        ("default+tma+ws", {"USE_TMA": True, "WARP_SPECIALIZE": True}),
        ("default+maxnreg", {"maxnreg": 168 if base["num_warps"] == 8 else 232}),
        ("default+persistent", {"PERSISTENT": True}),
        ("default+reverse_m", {"REVERSE_M": True}),
        ("default+persistent+reverse_m", {"PERSISTENT": True, "REVERSE_M": True}),
        ("default+tma", {"USE_TMA": True}),
        ("m128n128w8s2+tma", hopper),
        ("m128n128w8s2+tma+ws", {**hopper, "WARP_SPECIALIZE": True}),
        ("m128n64w8s3+tma", {**hopper, "BLOCK_N": 64, "num_stages": 3}),
        ("m128n64w8s3+tma+ws", {**hopper, "BLOCK_N": 64, "num_stages": 3, "WARP_SPECIALIZE": True}),
        ("m128n64w8s3+tma+rev", {**hopper, "BLOCK_N": 64, "num_stages": 3, "REVERSE_M": True}),
        ("m128n64w8s3+tma+ws+pers+rev+nreg232",
         {**hopper, "BLOCK_N": 64, "num_stages": 3, "WARP_SPECIALIZE": True, "PERSISTENT": True, "REVERSE_M": True,
          "maxnreg": 232}),
    ]
    return [(name, {**base, **cfg}) for name, cfg in out]


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:300] if text else ''}"


def run_problem(problem: Problem, pool: CompilePool | None, rep_ms: float,
                named: list[tuple[str, dict]] | None = None) -> list[dict]:
    """Compile, check and time (name, config) pairs (default: `configs`) and SDPA's flash and cuDNN on one problem."""
    named = configs(problem.head_dim) if named is None else named
    rows = []
    base = {"problem": problem.key, "D": problem.head_dim, "H": problem.hq, "B": problem.batch, "S": problem.seqlen_q,
            "causal": problem.causal}  # fmt: skip
    compiled: dict[str, dict] = {}
    if pool is not None:
        valid, by_key = [], {}
        for name, cfg in named:
            try:
                full = validate_config(cfg, head_dim=problem.head_dim, vendor="nvidia")
            except Exception as e:  # noqa: BLE001 - reported in the config's row below
                compiled[name] = {"status": "invalid", "reason": _first_line(e)}
                continue
            valid.append(full)
            by_key[json.dumps(full, sort_keys=True)] = name
        try:
            for res in pool.compile(problem, valid):
                name = by_key[json.dumps(res.config, sort_keys=True)]
                compiled[name] = {"status": res.status, "reason": res.reason, "compile_s": round(res.compile_s, 2),
                                  "n_regs": res.n_regs, "n_spills": res.n_spills, "shared_bytes": res.shared_bytes}
        except Exception as e:  # noqa: BLE001 - the pool itself failed: the configs compile at their first call
            print(f"compile pool failed ({_first_line(e)}); compiling in-process", flush=True)
    w = make_workload(problem, device="cuda")
    ref = reference(w)
    flops = problem.flops()
    candidates = [(f"sdpa-{b}", None, sdpa_fn(b, w)) for b in ("flash", "cudnn")]
    candidates += [(name, cfg, (lambda c=cfg: w.run(c))) for name, cfg in named]
    for name, cfg, fn in candidates:
        row = {**base, "name": name, "config": cfg, "status": "ok", "reason": "", "ms": None, "tflops": None,
               "rel_err": None, **{k: v for k, v in compiled.get(name, {}).items() if k not in ("status", "reason")}}
        pre = compiled.get(name)
        if pre is not None and pre["status"] != "ok":
            row.update(status=pre["status"], reason=pre["reason"])
            rows.append(row)
            continue
        try:
            t0 = time.perf_counter()
            out = fn() if cfg is None else w.check_run(cfg)  # ours into a NaN-filled output: unwritten rows fail
            torch.cuda.synchronize()
            row["first_call_s"] = round(time.perf_counter() - t0, 2)
            ok, err = accept(out, ref)
            row["rel_err"] = err
            if not ok:
                row.update(status="wrong", reason=f"rel err {err:.2e} above the acceptance threshold")
            else:
                ms = median_ms(fn, rep_ms=rep_ms)
                row.update(ms=round(ms, 4), tflops=round(tflops(flops, ms), 1))
        except Exception as e:  # noqa: BLE001 - any failure is this config's row, never the run's end
            row.update(status="invalid" if type(e).__name__ == "InvalidConfig" else "error", reason=_first_line(e))
            if os.environ.get("KNOBS_CHECK_TRACEBACK"):
                traceback.print_exc()
            try:
                torch.cuda.synchronize()
            except Exception as e2:  # noqa: BLE001 - a sticky CUDA error: later rows will say so too
                row["reason"] += f" (device: {_first_line(e2)})"
        rows.append(row)
        print(_fmt_row(row), flush=True)
    return rows


def _fmt_row(r: dict) -> str:
    t = f"{r['tflops']:7.1f}" if r.get("tflops") is not None else "      -"
    ms = f"{r['ms']:8.3f}" if r.get("ms") is not None else "       -"
    regs = r.get("n_regs")
    extra = f"regs {regs:>3} smem {r.get('shared_bytes') or 0:>6}" if regs is not None else " " * 20
    causal = "causal" if r["causal"] else "full  "
    return (f"D{r['D']:<3} {causal} {r['name']:<38} {r['status']:<7} {t} TFLOP/s {ms} ms  {extra}  "
            f"{r['reason'][:110]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="knobs.json", help="JSON file for the rows")
    ap.add_argument("--rep-ms", type=float, default=100.0, help="timing budget per config (median of runs)")
    ap.add_argument("--workers", type=int, default=None, help="compile processes (default: CPU cores - 1)")
    ap.add_argument("--compile-timeout", type=float, default=60.0, help="seconds before a compile is given up")
    ap.add_argument("--no-pool", action="store_true", help="compile in this process (a compiler crash ends the run)")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    import triton

    env = {"gpu": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability()),
           "torch": torch.__version__, "triton": triton.__version__,
           "sms": torch.cuda.get_device_properties(0).multi_processor_count}  # fmt: skip
    print(json.dumps(env), flush=True)
    t0 = time.perf_counter()
    rows = []
    pool = None if a.no_pool else CompilePool(a.workers, timeout_s=a.compile_timeout, device="cuda")
    try:
        for p in problems():
            rows += run_problem(p, pool, a.rep_ms)
    finally:
        if pool is not None:
            pool.close()
    wall = time.perf_counter() - t0
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"env": env, "wall_s": round(wall, 1), "rows": rows}, indent=1, default=str))
    print(f"\n{len(rows)} rows, {sum(r['status'] == 'ok' for r in rows)} ok, {wall:.0f} s; wrote {a.out}")
    print("\nsummary (TFLOP/s; - = failed, see reason above):")
    names = list(dict.fromkeys(r["name"] for r in rows))
    probs = list(dict.fromkeys((r["D"], r["causal"]) for r in rows))
    print(f"{'config':<38} " + " ".join(f"D{d}{'c' if c else 'f':<6}" for d, c in probs))
    for n in names:
        cells = []
        for d, c in probs:
            r = next((r for r in rows if r["name"] == n and r["D"] == d and r["causal"] == c), None)
            cells.append(f"{r['tflops']:<8.1f}" if r and r.get("tflops") is not None else f"{'-':<8}")
        print(f"{n:<38} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
