"""Inference with a tuned artifact: load `best_configs.json`, call `raytune_attn.attention` without a config
(the runtime picks the tuned one for this GPU and shape), and compare TFLOP/s with PyTorch SDPA in the same run.

    python examples/inference.py raytune-results/<sweep>/best_configs.json [--out inference.json]
"""

import argparse
import json
import sys

import torch

import raytune_attn
from raytune_attn import runtime
from raytune_attn.problem import Problem
from raytune_attn.tune.measure.bench import _sdpa_fn
from raytune_attn.tune.measure.timing import median_ms, tflops
from raytune_attn.tune.measure.workload import accept, make_workload, reference


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifact")
    ap.add_argument("--out", default="inference.json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a GPU: the artifact's configs are tuned for one", file=sys.stderr)
        return 2
    table = raytune_attn.load_configs(args.artifact)  # checked, and merged where a directory is given
    keys = sorted({e["problem_key"] for e in table.artifact["entries"]})
    rows = []
    for key in keys:
        p = Problem.from_key(key)
        if p.varlen:
            continue  # SDPA has no packed layout to compare with here
        w = make_workload(p)
        config, how = runtime.lookup(batch=p.batch, hq=p.hq, hkv=p.hkv, seqlen_q=p.seqlen_q, seqlen_k=p.seqlen_k,
                                     head_dim=p.head_dim, causal=p.causal, dtype=p.dtype, varlen=False)
        ok, err = accept(raytune_attn.attention(w.q, w.k, w.v, causal=p.causal), reference(w))
        row = {"problem_key": key, "lookup": how, "config": config, "rel_err": err, "correct": ok}
        ours = row["raytune-attn"] = tflops(p.flops(), median_ms(
            lambda w=w, p=p: raytune_attn.attention(w.q, w.k, w.v, causal=p.causal), rep_ms=200))
        for b in ("flash", "cudnn"):
            try:
                row[f"sdpa-{b}"] = tflops(p.flops(), median_ms(_sdpa_fn(b, w), rep_ms=200))
            except RuntimeError:  # a backend this GPU or torch build lacks (cuDNN on ROCm): no column
                row[f"sdpa-{b}"] = None
        rows.append(row)
        base = [f"{name} {row[name]:.1f} (x {ours / row[name]:.2f})" for name in ("sdpa-flash", "sdpa-cudnn")
                if row[name]]
        print(f"{key}: raytune-attn {ours:.1f} TFLOP/s ({how}); {', '.join(base) or 'no SDPA baseline here'}")
    json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, open(args.out, "w"), indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
