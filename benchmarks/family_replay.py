"""What the final re-measure's sibling winners (`raytune-attn tune --family-k`) add, replayed on recorded landscapes.

Each key of a family (the Llama-3-8B prefill set: one kernel, 15 sizes) gets its own GP search at a given budget,
as in a sweep (seed + the key's index, the length-aware start, 4 configs in flight), driven on that key's
exhaustive landscape (replay.run_searcher). A key's result is the landscape value of the best config its search
measured, and with `--family-k K` the best of that and of the winners of its K nearest sibling searches (nearest
sequence length first, then token count: driver._nearest_siblings), valued on this key's landscape. Prints, per
budget, the keys within 2% of their landscape's best (median over seeds, and the worst seed); writes a CSV.

    python benchmarks/family_replay.py tests/data/h200/llama_exhaustive_x4_nosync.parquet \
        --budgets 8 12 16 24 30 --seeds 5 --out family_replay.csv
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

from raytune_attn.problem import Problem
from raytune_attn.tune.search import make_searcher
from raytune_attn.tune.search.landscape import load_landscape, read_table
from raytune_attn.tune.search.replay import run_searcher
from raytune_attn.tune.sweep.driver import _nearest_siblings
from raytune_attn.tune.sweep.searcher import Search


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("landscape", help="a table of exhaustive measurements of several problem keys of one family")
    ap.add_argument("--budgets", type=int, nargs="+", default=[8, 12, 16, 24, 30])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--family-k", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    problems = sorted((Problem.from_key(k) for k in read_table(a.landscape)["problem_key"].unique()),
                      key=lambda p: (p.seqlen_q, p.batch))
    keys = [p.key for p in problems]
    lands = {k: load_landscape(a.landscape, select={"problem_key": k}) for k in keys}
    # The sweep's own choice of siblings (driver._nearest_siblings), on stand-in searches of one accelerator type.
    stand_ins = [Search(p.key, "GPU", p.to_dict(), None, budget=1, max_concurrent=1) for p in problems]
    nearest = {s.key: [o.key for o in _nearest_siblings(s, stand_ins)[: a.family_k]] for s in stand_ins}
    rows = []
    for budget in a.budgets:
        for seed in range(a.seeds):
            found = {}
            for n, p in enumerate(problems):
                k = p.key
                s = make_searcher("gp", lands[k].space, seed=seed * 100 + n, problem=p)
                run = run_searcher(s, lands[k], budget, concurrency=a.concurrency)
                vals = [lands[k].value(c) for c in run.configs]
                ok = [(v, c) for v, c in zip(vals, run.configs, strict=True) if np.isfinite(v)]
                found[k] = max(ok, key=lambda x: x[0]) if ok else (float("nan"), None)
            for k in keys:
                own = found[k][0]
                # A sibling's winner that this key's table lacks (not measured for these sizes) adds nothing.
                sib = [lands[k].values.get(lands[k].space.key(found[o][1]), math.nan)
                       for o in nearest[k] if found[o][1] is not None]
                fam = max([own, *[v for v in sib if np.isfinite(v)]])
                best = lands[k].best
                rows.append({"budget": budget, "seed": seed, "problem_key": k, "own": own / best, "family": fam / best})
    df = pd.DataFrame(rows)
    print(f"{len(keys)} keys; within 2% of the landscape's best, median over {a.seeds} seeds (worst seed); "
          f"--family-k {a.family_k}")
    print("| budget | own search | + sibling winners | own: median ratio | + siblings: median ratio |")
    print("|---|---|---|---|---|")
    for budget, g in df.groupby("budget"):
        per = g.groupby("seed").agg(own=("own", lambda x: int((x >= 0.98).sum())),
                                    fam=("family", lambda x: int((x >= 0.98).sum())))
        print(f"| {budget} | {per.own.median():g} ({per.own.min()}) | {per.fam.median():g} ({per.fam.min()}) | "
              f"{g.own.median():.3f} | {g.family.median():.3f} |")
    if a.out:
        df.to_csv(a.out, index=False)


if __name__ == "__main__":
    main()
