"""What early stopping alone costs, from two sweeps that measured the same configs (the random searcher with the
same seeds, one with ASHA and one with --no-early-stop): the GPU seconds of their rungs, and per problem whether
ASHA's top configs (the final re-measure's candidates) hold the best config that FIFO measured in full.

    python3 benchmarks/early_stop_pair.py h200/run10/call4_llama-rand-asha_trials.parquet \
        h200/run10/call4_llama-rand-fifo_trials.parquet --top-k 4

FIFO's reference values are its trials that ran every rung (`ok`); a config FIFO capped has no full measurement.
"""

from __future__ import annotations

import argparse
import math

import pandas as pd

KNOBS = ["BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "PRE_LOAD_V"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("asha")
    ap.add_argument("fifo")
    ap.add_argument("--top-k", type=int, default=4)
    args = ap.parse_args()
    a, f = (pd.read_parquet(p) for p in (args.asha, args.fifo))
    a, f = (d[d.kind == "trial"] for d in (a, f))
    fin_a, fin_f = (d.trial_id.astype(str).str.endswith("-final") for d in (a, f))
    # Everything each sweep timed on its GPU: the search's rungs and, where it ran, the final re-measure.
    for name, t, fin in (("ASHA", a, fin_a), ("FIFO", f, fin_f)):
        print(f"{name}: rung GPU seconds {t[~fin].bench_s.sum():.1f} over {(~fin).sum()} trials, "
              f"final re-measure {t[fin].bench_s.sum():.1f} over {fin.sum()} configs")
    a, f = a[~fin_a].copy(), f[~fin_f].copy()
    for d in (a, f):
        d["cfg"] = d[KNOBS].astype(str).agg("/".join, axis=1)
    c = a.merge(f, on=["problem_key", "cfg"], suffixes=("_a", "_f"))
    print(f"trials: ASHA {len(a)}, FIFO {len(f)}, same config measured by both {len(c)}")
    print(f"rung GPU seconds over those: ASHA {c.bench_s_a.sum():.1f}, FIFO {c.bench_s_f.sum():.1f}, "
          f"ASHA saves {1 - c.bench_s_a.sum() / c.bench_s_f.sum():.0%}")
    ratios = []
    for pk, g in c.groupby("problem_key"):
        full = g[g.status_f == "ok"]
        best = full.tflops_f.max()
        cand = g[g.status_a.isin(["ok", "stopped"]) & g.tflops_a.notna()].sort_values("tflops_a", ascending=False)
        top = cand.head(args.top_k)
        r = top[top.status_f == "ok"].tflops_f.max() / best
        ratios.append(r)
        print(f"  {pk}: best of ASHA's top {args.top_k} by FIFO's measure {r:.3f}")
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"within 1%: {sum(r >= 0.99 for r in ratios)} of {len(ratios)}; geometric mean {geo:.3f}")


if __name__ == "__main__":
    main()
