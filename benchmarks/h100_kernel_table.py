"""The kernel's TFLOP/s on one GPU for the D=128 cells of the issue-7 grid, with configs tuned on another GPU,
beside SDPA's flash and cuDNN backends timed on the same inputs.

    python3 -m benchmarks.h100_kernel_table --winners WINNERS.json --out kernel.json --md kernel.md

Cells: B*S = 16384 tokens, H*D = 2048 (D = 128: 16 heads), S in `--seqs`, causal and not, in `--dtype`. Each cell
runs the winner the `--winners` best-configs artifact holds for it (tuned on the GPU its entries name), checked
against a float32 reference and timed by `benchmarks.gpu_knobs_check.run_problem` (median, L2 flushed), as
kernel_ab.py times them. The markdown table puts the artifact's own TFLOP/s and cuDNN figure, measured on its
GPU, beside this GPU's: a ratio across machines, unlike the same-run columns. Each `--variant` (a JSON object of
knobs laid over every winner, e.g. '{"PERSISTENT": false}') is timed beside the winner in the same run, and a second
table gives its TFLOP/s and its ratio to the winner cell by cell.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shlex
import sys
import time
from pathlib import Path

from benchmarks import gpu_knobs_check as gkc
from benchmarks.grid_table import _short as label
from raytune_attn.problem import Problem

TOKENS, WIDTH = 16384, 2048


def cells(dim: int, seqs: list[int], dtype: str) -> list[Problem]:
    return [Problem(batch=TOKENS // s, hq=WIDTH // dim, hkv=WIDTH // dim, seqlen_q=s, seqlen_k=s, head_dim=dim,
                    causal=causal, dtype=dtype) for causal in (False, True) for s in seqs]  # fmt: skip


def read_winners(path: Path, problems: list[Problem]) -> dict[str, dict]:
    """The artifact's entry of each cell; ValueError naming the file and the cells it lacks."""
    try:
        entries = {e["problem_key"]: e for e in json.loads(path.read_text())["entries"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"--winners {path}: not a best-configs artifact ({type(e).__name__}: {e})") from None
    missing = [p.key for p in problems if p.key not in entries]
    if missing:
        raise ValueError(f"--winners {path}: no entry for {', '.join(missing)}")
    return {p.key: entries[p.key] for p in problems}


def _ratio(a, b):
    return a / b if a and b else None


def table(rows: list[dict], won: dict[str, dict], gpu: str) -> str:
    """One markdown row a cell: this GPU's kernel, flash and cuDNN, their ratios, and the artifact's figures."""
    ref = next(iter(won.values()))
    lines = [f"| mask | S | B | kernel ({gpu}) | SDPA flash | cuDNN | x flash | x cuDNN | kernel ({ref['gpu']}) | "
             f"cuDNN ({ref['gpu']}) | config |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios = {"flash": [], "cudnn": []}
    for key, entry in won.items():
        by = {r["name"].split(" ")[0]: r for r in rows if r["problem"] == key}
        ours, flash, cudnn = (by.get(n, {}).get("tflops") for n in ("winner", "sdpa-flash", "sdpa-cudnn"))
        rf, rc = _ratio(ours, flash), _ratio(ours, cudnn)
        ratios["flash"] += [rf] if rf else []
        ratios["cudnn"] += [rc] if rc else []
        p = Problem.from_key(key)
        status = "" if ours else f" ({by.get('winner', {}).get('status', 'not run')})"
        cols = [_mask(p.causal), p.seqlen_q, p.batch, _num(ours) + status, _num(flash), _num(cudnn), _num(rf, 2),
                _num(rc, 2), _num(entry["tflops"]), _num(entry.get("baseline_tflops")), label(entry["config"])]
        lines.append("| " + " | ".join(map(str, cols)) + " |")
    geo = {k: math.exp(sum(map(math.log, v)) / len(v)) if v else None for k, v in ratios.items()}
    lines.append(f"\ngeometric mean over {len(won)} cells: x flash {_num(geo['flash'], 3)}, x cuDNN "
                 f"{_num(geo['cudnn'], 3)}")
    return "\n".join(lines) + "\n"


def variant_table(rows: list[dict], variants: list[dict]) -> str:
    """Per cell: the winner's TFLOP/s and each variant's, with its ratio to the winner (same run)."""
    heads = " | ".join(f"{_variant_name(v)} | x" for v in variants)
    lines = [f"| mask | S | winner | {heads} |", "|---|---|---|" + "---|---|" * len(variants)]
    for key in dict.fromkeys(r["problem"] for r in rows):
        by = {r["name"]: r.get("tflops") for r in rows if r["problem"] == key}
        won = next((t for n, t in by.items() if n.startswith("winner ")), None)
        cols = []
        for v in variants:
            t = by.get(_variant_name(v))
            cols += [_num(t), _num(_ratio(t, won), 3)]
        p = Problem.from_key(key)
        lines.append("| " + " | ".join(map(str, [_mask(p.causal), p.seqlen_q, _num(won), *cols])) + " |")
    return "\n".join(lines) + "\n"


def _variant_name(knobs: dict) -> str:
    return "winner+" + ",".join(f"{k}={json.dumps(v)}" for k, v in knobs.items())


def _variant(text: str) -> dict:
    try:
        knobs = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object of knobs") from None
    if not isinstance(knobs, dict) or not knobs:
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object of knobs")
    return knobs


def _mask(causal: bool) -> str:
    return "causal" if causal else "full"


def _num(x, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _seqs(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    bad = [v for v in vals if v <= 0 or TOKENS % v]
    if not vals or bad:
        raise argparse.ArgumentTypeError(f"{text!r}: sequence lengths must divide {TOKENS} ({bad or 'none given'})")
    return vals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--winners", type=Path, required=True, help="best-configs artifact holding each cell's winner")
    ap.add_argument("--out", type=Path, default=Path("kernel_table.json"), help="JSON file for the rows")
    ap.add_argument("--md", type=Path, help="also write the markdown table here")
    ap.add_argument("--seqs", type=_seqs, default=[512, 1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--dim", type=int, default=128, choices=(64, 128, 256))
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--rep-ms", type=float, default=100.0, help="timing budget per candidate (median of runs)")
    ap.add_argument("--variant", type=_variant, action="append", default=[],
                    help="a JSON object of knobs laid over every winner, timed beside it (repeatable)")
    a = ap.parse_args(argv)
    problems = cells(a.dim, a.seqs, a.dtype)
    try:
        won = read_winners(a.winners, problems)  # a wrong file fails here, before anything is compiled
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    import torch
    import triton

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    env = {"gpu": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability()),
           "sms": torch.cuda.get_device_properties(0).multi_processor_count, "torch": torch.__version__,
           "triton": triton.__version__, "cuda": torch.version.cuda,
           "command": "python3 -m benchmarks.h100_kernel_table " + shlex.join(sys.argv[1:] if argv is None else argv),
           "winners": str(a.winners), "winners_sha256": hashlib.sha256(a.winners.read_bytes()).hexdigest()}
    print(json.dumps(env), flush=True)
    t0 = time.perf_counter()
    rows = []
    for p in problems:
        cfg = won[p.key]["config"]
        named = [(f"winner {label(cfg)}", cfg)] + [(_variant_name(v), {**cfg, **v}) for v in a.variant]
        rows += gkc.run_problem(p, None, a.rep_ms, named)
    md = table(rows, won, env["gpu"])
    if a.variant:
        md += "\nVariants, same run (TFLOP/s and x the winner):\n\n" + variant_table(rows, a.variant)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"env": env, "wall_s": round(time.perf_counter() - t0, 1), "rows": rows}, indent=1,
                                default=str) + "\n")
    if a.md:
        a.md.write_text(md)
    print("\n" + md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
