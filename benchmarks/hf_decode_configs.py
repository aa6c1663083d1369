"""Hugging Face decode through raytune-attn: does the integration's default paged config leave speed behind?

`raytune_attn.integrations.transformers` runs a decode step as the paged kernel over transformers' own cache, each
sequence's (Hkv, S, D) keys one page, with `default_paged_config` (the tuned artifact's paged entries are keyed by
a cache block size this layout does not have). This times that call, per decode shape, with the default config and
with every config of a grid of the paged knobs, each checked against float32 SDPA first:

    python -m benchmarks.hf_decode_configs --out DIR [--batches 1 8 32 128] [--contexts 1023 4095 16383]
    python -m benchmarks.hf_decode_configs --tiny --out DIR      # CPU: the Triton interpreter, correctness only
    python -m benchmarks.hf_decode_configs --from-csv DIR/hf_decode_configs.csv --artifact FILE --out DIR2

`--artifact FILE` also times, per shape, the config of FILE's paged entry that a `paged_attention` call of the shape
with 16-slot pages would get (`--artifact-block-size`), whatever GPU it was tuned on; `--from-csv` summarizes an
earlier run's rows again (an artifact's configs found among them) without measuring.

Shapes: Hq 32, Hkv 8, D 128, bf16 (Llama-3-8B), one query per sequence, every key visible (no padding). Contexts
are odd by default: the cache length of a generation step is arbitrary, and a multiple of 16 would give Triton a
divisibility its steps mostly lack. Time per call: `raytune_attn.tune.measure.timing.median_ms` (L2 flushed, CUDA
graph replays). Bandwidth counts K and V read once plus Q and the output, over the time; its fraction is of a 1 GiB
device-to-device copy measured in the same process.

Output: a table on stdout (per shape: the default's time and fraction of copy bandwidth, the grid's best, the
default's rank), DIR/hf_decode_configs.csv (every shape x config), DIR/hf_decode_configs.json (copy, versions,
arguments) and DIR/hf_decode_configs.md (the table).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root on the path for `benchmarks.*`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

HQ, HKV, HEAD_DIM = 32, 8, 128
# Decode tiles: one 16-row tile holds a query's 4 GQA heads; the rest is what the paged spaces search over.
GRID = {"BLOCK_N": (32, 64, 128), "NUM_SEGMENTS": (1, 2, 4, 8, 16, 32), "num_warps": (4, 8), "num_stages": (1, 2, 3)}


def grid_configs(grid: dict = GRID) -> list[dict]:
    return [{"BLOCK_M": 16, **dict(zip(grid, values, strict=True))} for values in itertools.product(*grid.values())]


def decode_inputs(batch: int, context: int, dtype, device, seed: int = 0):
    """query (B, Hq, 1, D), key and value (B, Hkv, S, D): a decode step's call as transformers makes it."""
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(batch, HQ, 1, HEAD_DIM, generator=g, device=device, dtype=dtype)
    k, v = (torch.randn(batch, HKV, context, HEAD_DIM, generator=g, device=device, dtype=dtype) for _ in range(2))
    return q, k, v


def reference(q, k, v) -> torch.Tensor:
    """float32 SDPA, in the integration's output layout (B, Sq, Hq, D)."""
    out = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=True)
    return out.transpose(1, 2)


def bytes_moved(batch: int, context: int, elt: int) -> int:
    """What the call must move (`PagedProblem.bytes_moved`: K and V once, Q read, the output written)."""
    from raytune_attn.paged_problem import Lengths, PagedProblem, SeqGroup

    group = SeqGroup(batch, Lengths(values=(1,)), Lengths(values=(context,)))
    dtype = "float32" if elt == 4 else "bfloat16"
    return PagedProblem.make([group], block_size=16, hq=HQ, hkv=HKV, head_dim=HEAD_DIM, dtype=dtype).bytes_moved()


def artifact_configs(path: str, block_size: int) -> Callable[[int, int], tuple[str, dict] | None]:
    """For each decode shape, the paged entry (problem key, config) of the artifact at `path` that a
    `paged_attention` call of that shape with `block_size`-slot pages would get (its bucket, else the nearest),
    whatever GPU it was tuned on: what the integration would use if it looked its configs up that way."""
    from raytune_attn import artifact, paged_runtime
    from raytune_attn.paged_problem import PagedProblem

    entries = artifact.load(path)["entries"]  # checked as the runtime checks it, whatever GPU it names
    idx = {paged_runtime.problem_bucket(PagedProblem.from_key(e["problem_key"])): (e["problem_key"], e["config"])
           for e in sorted(entries, key=lambda e: e["problem_key"], reverse=True)
           if e["problem_key"].startswith("paged-")}

    def find(batch: int, context: int):
        key = paged_runtime.bucket(num_seqs=batch, max_seqlen_q=1, max_seqlen_k=context, hq=HQ, hkv=HKV,
                                   head_dim=HEAD_DIM, dtype="bfloat16", block_size=block_size)
        return idx.get(key) or paged_runtime._nearest(idx, key)

    return find


def measure(batch: int, context: int, configs: list[dict], *, dtype, device, rep_ms: float,
            extra: dict | None = None) -> list[dict]:
    """One row per config (the default first, `extra`'s named configs last): its error against the reference,
    then its median time."""
    from raytune_attn.integrations.transformers import _paged
    from raytune_attn.kernels.paged_config import default_paged_config
    from raytune_attn.tune.measure.timing import median_ms

    q, k, v = decode_inputs(batch, context, dtype, device)
    ref = reference(q, k, v)
    default = default_paged_config(head_dim=HEAD_DIM, group=HQ // HKV, max_seqlen_q=1, max_seqlen_k=context,
                                   num_seqs=batch, num_kv_heads=HKV)
    rows = []
    for name, cfg in [("default", default)] + [("grid", c) for c in configs] + list((extra or {}).items()):
        row = {"batch": batch, "context": context, "which": name, "config": json.dumps(cfg, sort_keys=True)}
        try:
            out = _paged(q, k, v, None, True, None, config=cfg)
            row["err"] = float((out.float() - ref).abs().max())
            row["ok"] = row["err"] < (2e-2 if dtype != torch.float32 else 1e-4)
            row["ms"] = median_ms(lambda cfg=cfg: _paged(q, k, v, None, True, None, config=cfg), rep_ms=rep_ms) \
                if row["ok"] else float("nan")
        except Exception as e:  # noqa: BLE001 - a config that fails to compile or launch is a row, not the end
            row.update(ok=False, err=float("nan"), ms=float("nan"), note=f"{type(e).__name__}: {e}"[:200])
        rows.append(row)
    return rows


def summarize(rows: list[dict], copy_tb_s: float | None, elt: int, artifact=None) -> list[dict]:
    """Per shape: the default, the grid's best and the default's rank among the grid's timed configs; with
    `artifact` (`artifact_configs`), the time of the artifact's config for the shape over the grid's best."""
    out = []
    for (b, s), group in itertools.groupby(rows, key=lambda r: (r["batch"], r["context"])):
        group = list(group)
        default = group[0]
        timed = sorted((r for r in group if r["which"] == "grid" and r["ok"]), key=lambda r: r["ms"])
        best = timed[0] if timed else None
        moved = bytes_moved(b, s, elt)

        def frac(r, moved=moved):
            return moved / (r["ms"] * 1e-3) / 1e12 / copy_tb_s if copy_tb_s and r is not None and r["ok"] else None

        rank = 1 + sum(r["ms"] < default["ms"] for r in timed) if default["ok"] else None
        out.append({
            "batch": b, "context": s, "default_config": default["config"], "default_ms": default["ms"],
            "default_frac_copy": frac(default),
            "best_config": best["config"] if best else None, "best_ms": best["ms"] if best else None,
            "best_frac_copy": frac(best),
            "default_over_best": default["ms"] / best["ms"] if best and default["ok"] else None,
            "default_rank": rank, "grid_timed": len(timed),
            "grid_failed": sum(r["which"] == "grid" for r in group) - len(timed),
        })
        if artifact is not None:
            entry = artifact(b, s)
            cfg = json.dumps(entry[1], sort_keys=True) if entry else None
            same = [r for r in group if r["config"] == cfg and r["ok"]]
            ms = min((r["ms"] for r in same), default=None)
            out[-1].update(artifact_entry=entry[0] if entry else None, artifact_config=cfg,
                           artifact_over_best=ms / best["ms"] if ms and best else None)
    return out


def table(summary: list[dict]) -> str:
    def f(x, fmt):
        return "-" if x is None else fmt.format(x)

    art = any("artifact_entry" in r for r in summary)
    head = ["batch", "context", "default config", "default ms", "of copy", "grid best config", "best ms", "of copy",
            "default / best time", "default's rank"] + (["artifact entry", "artifact / best time"] if art else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summary:
        cells = [r["batch"], r["context"], f"`{r['default_config']}`", f(r["default_ms"], "{:.4f}"),
                 f(r["default_frac_copy"], "{:.0%}"), f"`{r['best_config']}`", f(r["best_ms"], "{:.4f}"),
                 f(r["best_frac_copy"], "{:.0%}"), f(r["default_over_best"], "{:.3f}"),
                 f"{r['default_rank']} of {r['grid_timed']}"]
        if art:
            cells += [f"`{r['artifact_entry']}`" if r.get("artifact_entry") else "-",
                      f(r.get("artifact_over_best"), "{:.3f}")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    ratios = [r["default_over_best"] for r in summary if r["default_over_best"]]
    if ratios:
        lines.append(f"\ndefault / best time: geometric mean {_geomean(ratios):.3f}, {min(ratios):.3f} to "
                     f"{max(ratios):.3f}" + (_artifact_line(summary) if art else ""))
    return "\n".join(lines)


def _geomean(xs) -> float:
    import math

    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _artifact_line(summary: list[dict]) -> str:
    ratios = [r["artifact_over_best"] for r in summary if r.get("artifact_over_best")]
    return (f"; artifact / best time: geometric mean {_geomean(ratios):.3f}, {min(ratios):.3f} to {max(ratios):.3f}"
            if ratios else "")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--contexts", type=int, nargs="+", default=[1023, 4095, 16383])
    ap.add_argument("--rep-ms", type=float, default=20.0, help="GPU milliseconds of timed runs per config")
    ap.add_argument("--tiny", action="store_true", help="CPU: float32, two tiny shapes, four configs")
    ap.add_argument("--artifact", help="best-configs artifact whose paged entries are timed too (by bucket, any GPU)")
    ap.add_argument("--artifact-block-size", type=int, default=16, help="the page size of the artifact's lookup")
    ap.add_argument("--from-csv", help="summarize this run's CSV again (with --artifact: its configs among the rows) "
                                       "instead of measuring")
    a = ap.parse_args(argv)
    if min(a.batches) < 1 or min(a.contexts) < 1 or a.rep_ms <= 0:
        ap.error("--batches and --contexts must be >= 1, --rep-ms > 0")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    artifact = artifact_configs(a.artifact, a.artifact_block_size) if a.artifact else None
    if a.from_csv:
        import pandas as pd

        rows = pd.read_csv(a.from_csv).to_dict("records")
        before = json.loads(Path(a.from_csv).with_suffix(".json").read_text())
        gpu, copy, elt = before["gpu"], before["copy"], 2 if before["copy"] else 4
    else:
        rows, gpu, copy, elt = _measure_all(a, artifact)
    summary = summarize(rows, copy["tb_per_s_read_plus_write"] if copy else None, elt, artifact)
    text = table(summary)
    (out / "hf_decode_configs.md").write_text(f"{gpu}\n\n{text}\n")
    import triton

    (out / "hf_decode_configs.json").write_text(json.dumps({
        "gpu": gpu, "torch": torch.__version__, "triton": triton.__version__, "copy": copy, "args": vars(a),
        "summary": summary}, indent=2, default=str))
    print(gpu)
    print(text)
    bad = [r for r in rows if not r["ok"] and not isinstance(r.get("note"), str)]
    if bad:  # a config that ran and gave a wrong answer is a kernel bug, not a slow config
        print(f"{len(bad)} config(s) gave wrong outputs: {bad[:3]}", file=sys.stderr)
        return 1
    return 0


def _measure_all(a, artifact):
    """(rows, GPU name, copy measurement or None, bytes per element) of a run on this machine."""
    on_gpu = torch.cuda.is_available() and not a.tiny
    if not on_gpu:
        import os

        os.environ["TRITON_INTERPRET"] = "1"  # read when the kernels' module is first imported, below
    dtype, device = (torch.bfloat16, "cuda") if on_gpu else (torch.float32, "cpu")
    batches, contexts = (a.batches, a.contexts) if on_gpu else ([1, 2], [37])
    configs = grid_configs() if on_gpu else grid_configs({"BLOCK_N": (16, 32), "NUM_SEGMENTS": (1, 2),
                                                          "num_warps": (4,), "num_stages": (1,)})
    copy = None
    if on_gpu:
        from benchmarks.h100_copy_bandwidth import copy_bandwidth

        copy = copy_bandwidth(1.0, reps=20)
    rows = []
    for b, s in itertools.product(batches, contexts):
        entry = artifact(b, s) if artifact else None
        extra = {"artifact": entry[1]} if entry and entry[1] not in configs else None
        shape = measure(b, s, configs, dtype=dtype, device=device, rep_ms=a.rep_ms, extra=extra)
        rows += shape
        print(f"batch {b} context {s}: {sum(r['ok'] for r in shape)} of {len(shape)} configs checked", flush=True)
    import pandas as pd

    pd.DataFrame(rows).to_csv(Path(a.out) / "hf_decode_configs.csv", index=False)
    gpu = torch.cuda.get_device_name() if on_gpu else "CPU (Triton interpreter: timings mean nothing)"
    return rows, gpu, copy, 2 if on_gpu else 4


if __name__ == "__main__":
    raise SystemExit(main())
