"""Kernel variants A/B on Hopper, same run: the tuned winner of each grid cell against the same config with a
variant's knobs, plus hand-picked configs for the short sequences, with SDPA flash and cuDNN timed on the same
inputs.

    python3 benchmarks/kernel_ab.py --out $OUT/ab.json [--variants tma,rev+tma] [--seqs 512,1024,4096,16384]

Cells of the issue-7 grid (B*S = 16384, H*D = 2048; D in 64/128/256, causal and not). Per cell: the tuned winner
(default `docs/benchmarks/h200/sweep_bf16_d128/best_configs.json`, `--winners` for another), the winner with
each variant's knobs, and, for sequences of at most `--short` tokens, the `SHORT` configs of the head dim with and
without the variants. Everything goes through
`gpu_knobs_check.run_problem`: a compile pool first, a check against a float32 reference, then a median time with
the L2 flushed. For the winner and its first variant the script also lists their matmuls and matmul waits in
program order (`dot_schedule`).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import gpu_knobs_check as gkc  # noqa: E402
import torch  # noqa: E402
from grid_table import _short as _label  # noqa: E402 - the grid tables' config labels

from raytune_attn.config import default_config, validate_config  # noqa: E402
from raytune_attn.problem import Problem  # noqa: E402
from raytune_attn.tune.measure.compile_pool import CompilePool  # noqa: E402
from raytune_attn.tune.measure.workload import make_workload  # noqa: E402

WINNERS = HERE.parent / "docs" / "benchmarks" / "h200" / "sweep_bf16_d128" / "best_configs.json"
# Runs 17-19 measured five knobs that are gone since (docs/kernel.md, "Tried and dropped"): pqk = PIPELINE_QK,
# tmaq = TMA_Q, tmao = TMA_O (tmaqo both), qreg = Q_IN_REGS, flat = FLATTEN (with PERSISTENT and no SPLIT_MASK).
# A variant is a set of knob values; add one here to A/B a new knob.
VARIANTS = {"tma": {"USE_TMA": True}, "rev": {"REVERSE_M": True}, "pers": {"PERSISTENT": True},
            "ws": {"WARP_SPECIALIZE": True, "num_warps": 8}, "preV": {"PRE_LOAD_V": True},
            "nocap": {"maxnreg": 0}, "n128": {"BLOCK_N": 128}, "nosplit": {"SPLIT_MASK": False},
            "s3": {"num_stages": 3},
            # Hopper's warp specialization as its pass accepts it: one warp group written (the pass adds a producer
            # and splits the tile's rows over two consumers), every load through a descriptor, one key loop.
            "ws4": {"WARP_SPECIALIZE": True, "num_warps": 4, "USE_TMA": True, "SPLIT_MASK": False, "maxnreg": 0},
            "m64": {"BLOCK_M": 64}, "m128": {"BLOCK_M": 128}, "m256": {"BLOCK_M": 256}, "n32": {"BLOCK_N": 32},
            "n64": {"BLOCK_N": 64}, "s2": {"num_stages": 2}, "w8": {"num_warps": 8}, "s4": {"num_stages": 4},
            # Back to the split loops from a warp-specialized winner: 8 warps, no warp specialization.
            "split8": {"WARP_SPECIALIZE": False, "SPLIT_MASK": True, "num_warps": 8},
            "nopreV": {"PRE_LOAD_V": False},
            # The persistent grid with one Q buffer (warp-specialized forms only).
            "pers1q": {"PERSISTENT": True, "ONE_Q_BUFFER": True}}
TOKENS, WIDTH = 16384, 2048

# Short sequences (S <= 1024), where run 13's winners came closest to SDPA flash: smaller and taller tiles, more
# programs per SM, heavy-first orders.
SHORT = {
    64: [{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
         {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4},
         {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 3},
         {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2, "PRE_LOAD_V": True},
         {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 2, "USE_TMA": True},
         {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "USE_TMA": True, "REVERSE_M": True}],
    128: [{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "USE_TMA": True},
          {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
          {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 3},
          {"BLOCK_M": 128, "BLOCK_N": 32, "num_warps": 8, "num_stages": 3, "maxnreg": 128},
          {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "USE_TMA": True},
          {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2, "maxnreg": 128, "REVERSE_M": True,
           "PERSISTENT": True}],
    256: [{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "USE_TMA": True},
          {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2, "USE_TMA": True},
          {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "USE_TMA": True, "REVERSE_M": True},
          {"BLOCK_M": 128, "BLOCK_N": 32, "num_warps": 8, "num_stages": 2, "USE_TMA": True},
          {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2, "USE_TMA": True, "REVERSE_M": True},
          {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "USE_TMA": True, "REVERSE_M": True,
           "PERSISTENT": True}],
}


def winners(path: Path = WINNERS) -> dict[str, dict]:
    return {e["problem_key"]: e["config"] for e in json.loads(path.read_text())["entries"]}


def variant(spec: str) -> dict:
    """`rev+tma` -> the union of the named variants' knobs."""
    out = {}
    for name in spec.split("+"):
        if name not in VARIANTS:
            raise SystemExit(f"unknown variant {name!r}; variants are {', '.join(VARIANTS)}")
        out.update(VARIANTS[name])
    return out


def named_configs(problem: Problem, won: dict | None, variants: list[str], short: bool) -> list[tuple[str, dict]]:
    base = default_config(problem.head_dim)
    out = []
    if won is not None:
        out.append(("winner " + _label(won), won))
        out += [(f"winner+{v}", {**won, **variant(v)}) for v in variants]
    if short:
        for c in SHORT[problem.head_dim]:
            out.append((_label({**base, **c}), c))
            out += [(_label({**base, **c, **variant(v)}), {**c, **variant(v)}) for v in variants]
    seen, uniq = set(), []
    for name, cfg in out:
        full = {**base, **cfg}
        key = json.dumps(full, sort_keys=True)
        if key not in seen:
            seen.add(key)
            uniq.append((name, full))
    return uniq


def dot_schedule(problem: Problem, cfg: dict, ir_path: Path | None = None) -> dict:
    """The compiled kernel's matmuls and matmul waits in program order, from its TTGIR: `D` a wgmma group (`Dr` when
    its first operand is in registers), `W0` a wait for all of them, `Wn` a wait leaving n in flight, `L` a load of
    a matmul operand from shared memory into registers, `for(` / `if(` where a loop / branch starts. A `D` not
    followed by `W0` before the next `D` is a matmul left in flight. Also the PTX's wait counts. `ir_path`: where
    to write the TTGIR."""
    from raytune_attn.kernels.flash_attn import flash_attn_fwd

    w = make_workload(problem, device="cuda")
    full = validate_config(cfg, head_dim=problem.head_dim, vendor="nvidia")
    compiled = flash_attn_fwd(w.q, w.k, w.v, full, causal=problem.causal, compile_only=True)
    ttgir = compiled.asm.get("ttgir", "")
    if ir_path is not None:
        ir_path.parent.mkdir(parents=True, exist_ok=True)
        ir_path.write_text(ttgir)
    seq = []
    for line in ttgir.splitlines():
        if "ttng.warp_group_dot_wait" in line:
            m = re.search(r"pendings\s*=\s*(\d+)", line)
            seq.append(f"W{m.group(1) if m else '?'}")
        elif "ttng.warp_group_dot " in line:
            seq.append("Dr" if re.search(r":\s*tensor<", line) else "D")
        elif "ttg.local_load" in line and "dot_op" in line:
            seq.append("L")
        elif re.search(r"\bscf\.for\b", line):
            seq.append("for(")
        elif re.search(r"\bscf\.if\b", line):
            seq.append("if(")
    ptx = compiled.asm.get("ptx", "")
    waits = collections.Counter(re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", ptx))
    return {"schedule": " ".join(seq), **{f"ptx_wait{n}": c for n, c in sorted(waits.items())}}


def report(rows: list[dict], variants: list[str]) -> None:
    """Per cell: the winner, the winner with each variant, the best config of all and SDPA (TFLOP/s, same run); then
    per variant and head dim the geometric mean of (winner with the variant) / winner over the cells."""
    print(f"\n{'cell':<18} {'winner':>7} " + " ".join(f"{'+' + v:>10}" for v in variants)
          + f" {'best':>7} {'flash':>7} {'cuDNN':>7} {'x flash':>7} {'x cuDNN':>7}  best config")
    cells = list(dict.fromkeys((r["D"], r["causal"], r["S"]) for r in rows))
    for d, c, s in cells:
        rs = [r for r in rows if (r["D"], r["causal"], r["S"]) == (d, c, s)]

        def t(pred, rs=rs):
            vals = [r["tflops"] for r in rs if pred(r) and r.get("tflops") is not None]
            return max(vals) if vals else None

        ours = [r for r in rs if r["config"] and r.get("tflops") is not None]
        best = max(ours, key=lambda r: r["tflops"]) if ours else None
        flash, cudnn = t(lambda r: r["name"] == "sdpa-flash"), t(lambda r: r["name"] == "sdpa-cudnn")
        vals = [t(lambda r: r["name"].startswith("winner ")), *[t(lambda r, v=v: r["name"] == f"winner+{v}")
                                                                for v in variants],
                best["tflops"] if best else None, flash, cudnn]
        ratios = [best["tflops"] / x if best and x else None for x in (flash, cudnn)]
        cell = f"D{d} {'causal' if c else 'full'} S{s}"
        print(f"{cell:<18} " + " ".join(f"{v:7.1f}" if v is not None else f"{'-':>7}" for v in vals[:1])
              + " " + " ".join(f"{v:10.1f}" if v is not None else f"{'-':>10}" for v in vals[1:-3])
              + " " + " ".join(f"{v:7.1f}" if v is not None else f"{'-':>7}" for v in vals[-3:])
              + " " + " ".join(f"{v:7.2f}" if v is not None else f"{'-':>7}" for v in ratios)
              + f"  {best['name'] if best else ''}")
    print(f"\n{'variant':<12} " + " ".join(f"{'D' + str(d):>7}" for d in sorted({r['D'] for r in rows})) + "     all")
    for v in variants:
        line = []
        for dims in [[d] for d in sorted({r["D"] for r in rows})] + [sorted({r["D"] for r in rows})]:
            ratios = []
            for d, c, s in cells:
                if d not in dims:
                    continue
                rs = [r for r in rows if (r["D"], r["causal"], r["S"]) == (d, c, s) and r.get("tflops") is not None]
                won = [r["tflops"] for r in rs if r["name"].startswith("winner ")]
                var = [r["tflops"] for r in rs if r["name"] == f"winner+{v}"]
                if won and var:
                    ratios.append(var[0] / won[0])
            line.append(f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):7.3f}" if ratios else f"{'-':>7}")
        print(f"{'+' + v:<12} " + " ".join(line))


def _group(name: str) -> str:
    """A row's config group: "winner" for the cell's winner, whatever its config; else the variant's name."""
    return "winner" if name.startswith("winner ") else name


def report_vs(rows: list[dict], base: list[dict]) -> None:
    """The same configs against another run's output (`--baseline`: the same cells and config names, another kernel
    build; or another `--winners` artifact, whose winners are matched cell by cell whatever their configs): per config
    group (the winner, each variant) and head dim, the geometric mean and range of this run's TFLOP/s over the
    baseline's; then the winners' ratio cell by cell."""
    old = {(r["D"], r["causal"], r["S"], _group(r["name"])): r["tflops"] for r in base if r.get("tflops")}
    groups = collections.defaultdict(list)
    cells = []
    for r in rows:
        was = old.get((r["D"], r["causal"], r["S"], _group(r["name"])))
        if r.get("tflops") and was and r["config"]:
            groups[(_group(r["name"]), r["D"], r["causal"])].append(r["tflops"] / was)
            if _group(r["name"]) == "winner":
                cells.append((r["D"], r["causal"], r["S"], was, r["tflops"], r["name"][len("winner "):]))
    print("\nwinners against --baseline's, cell by cell: the baseline's rate -> this run's, ratio")
    for d, causal, s, was, now, label in sorted(cells):
        print(f"D{d} {'causal' if causal else 'full':<6} S{s:<6} {was:7.1f} -> {now:7.1f}  {now / was:6.3f}  {label}")
    print("\nagainst --baseline: this run / baseline, geo (min-max) over the sequence lengths")
    print(f"{'config':<28} {'D':>4} {'mask':<7} {'geo':>6} {'min':>6} {'max':>6}")
    for (group, d, causal), ratios in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"{group:<28} {d:>4} {'causal' if causal else 'full':<7} {geo:6.3f} {min(ratios):6.3f} "
              f"{max(ratios):6.3f}")


def _rows(path, flag: str) -> list[dict]:
    """The rows of an earlier run's output; ValueError naming the flag when the file is not one."""
    try:
        return json.loads(Path(path).read_text())["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{flag} {path}: not this script's output ({type(e).__name__}: {e})") from None


def _int_list(allowed=None):
    """An argparse type: comma-separated positive integers (from `allowed` when given)."""
    def parse(text: str) -> list[int]:
        try:
            vals = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
        bad = [v for v in vals if v <= 0 or (allowed is not None and v not in allowed)]
        if not vals or bad:
            raise argparse.ArgumentTypeError(f"{text!r}: {bad or 'nothing'} not allowed"
                                             + (f" (allowed: {sorted(allowed)})" if allowed else ""))
        return vals
    return parse


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="ab.json")
    ap.add_argument("--variants", default="tma,rev", help="comma-separated; each a +-joined set of "
                    f"{', '.join(VARIANTS)}")
    ap.add_argument("--seqs", type=_int_list(), default=[512, 1024, 4096, 16384],
                    help="sequence lengths, comma-separated (B = 16384 / S)")
    ap.add_argument("--short", type=int, default=1024, help="add the SHORT configs up to this sequence length")
    ap.add_argument("--dims", type=_int_list(SHORT), default=[64, 128, 256], help="head dims, comma-separated")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"),
                    help="the dtype of the cells (a float16 cell has a winner only in a float16 --winners artifact)")
    ap.add_argument("--masks", default="full,causal", choices=("full,causal", "full", "causal"), metavar="MASKS",
                    help="full,causal (default), full or causal: the masks of each head dim and sequence length")
    ap.add_argument("--winners", type=Path, default=WINNERS,
                    help="a best-configs artifact whose entries are the cells' winners (default: run 13's bf16 grid)")
    ap.add_argument("--rep-ms", type=float, default=100.0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--ir-dir", type=Path, default=None,
                    help="write the TTGIR of each head dim's winner and first variant (longest sequence) here")
    ap.add_argument("--summarize", metavar="JSON", help="print the tables of an earlier run's output and stop")
    ap.add_argument("--baseline", metavar="JSON", type=Path,
                    help="an earlier run's output (another kernel build, same cells and configs): print the ratios")
    a = ap.parse_args(argv)
    try:
        # Read before anything is measured: a wrong --baseline fails here, not after the GPU run.
        base = _rows(a.baseline, "--baseline") if a.baseline else None
        if a.summarize:
            rows = _rows(a.summarize, "--summarize")
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if a.summarize:
        names = dict.fromkeys(r["name"][len("winner+"):] for r in rows if r["name"].startswith("winner+"))
        report(rows, list(names))
        if base is not None:
            report_vs(rows, base)
        return 0
    try:
        won = winners(a.winners)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"--winners {a.winners}: not a best-configs artifact ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    import triton

    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    print(json.dumps(env), flush=True)
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        variant(v)
    t0 = time.perf_counter()
    rows, ptx = [], []
    pool = CompilePool(a.workers, timeout_s=120.0, device="cuda")
    try:
        for d in a.dims:
            for causal in [m == "causal" for m in a.masks.split(",")]:
                for s in a.seqs:
                    p = Problem(batch=TOKENS // s, hq=WIDTH // d, hkv=WIDTH // d, seqlen_q=s, seqlen_k=s,
                                head_dim=d, causal=causal, dtype=a.dtype)
                    named = named_configs(p, won.get(p.key), variants, s <= a.short)
                    rows += gkc.run_problem(p, pool, a.rep_ms, named)
                    if s == max(a.seqs):
                        for name, cfg in named[:2]:
                            try:
                                slug = f"d{d}_{'causal' if causal else 'full'}_{re.sub(r'[^A-Za-z0-9]+', '_', name)}"
                                ir = a.ir_dir / f"{slug}.mlir" if a.ir_dir else None
                                ptx.append({"D": d, "causal": causal, "name": name, **dot_schedule(p, cfg, ir)})
                            except Exception as e:  # noqa: BLE001 - a config that failed above fails here too
                                ptx.append({"D": d, "causal": causal, "name": name, "error": gkc._first_line(e)})
                            print(json.dumps(ptx[-1]), flush=True)
    finally:
        pool.close()
    wall = time.perf_counter() - t0
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"env": env, "wall_s": round(wall, 1), "rows": rows, "ptx": ptx}, indent=1,
                                      default=str))
    print(f"\n{len(rows)} rows, {wall:.0f} s; wrote {a.out}")
    report(rows, variants)
    if base is not None:
        report_vs(rows, base)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
