"""The winners of two sweeps timed against each other on one GPU: what early stopping costs in the best found.

Two sweeps of the same problems (the random searcher with the same seeds, one with ASHA and one with
--no-early-stop) each name a winner per problem in their `best_configs.json`, each from its own final re-measure,
possibly on different GPUs. Here both winners of a key run on the same GPU, in one process, alternating A, B, A,
B... (`--rounds` each, `--rep-ms` of runs per timing, the sweep's timing: L2 flushed, medians), so that the ratio
says which config is faster, not which GPU or which moment was. Prints a table, writes CSV.

    python3 benchmarks/es_winners.py /tmp/llama-rand-asha/best_configs.json \
        /tmp/llama-rand-fifo/best_configs.json --out es_winners.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics


def _race(w, cfg_a: dict, cfg_b: dict, rounds: int, rep_ms: float) -> tuple[list[float], list[float]]:
    """Milliseconds of each config, timed alternately (a config named by both sweeps is timed once)."""
    from raytune_attn.tune.measure.timing import median_ms

    buf = w.q.new_empty(w.q.shape)
    if cfg_a == cfg_b:
        t = [median_ms(lambda: w.run(cfg_a, out=buf), rep_ms=rep_ms)]
        return t, t
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for side, cfg in zip(times, (cfg_a, cfg_b), strict=True):
            side.append(median_ms(lambda cfg=cfg: w.run(cfg, out=buf), rep_ms=rep_ms))
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="best_configs.json of sweep A (ASHA)")
    ap.add_argument("b", help="best_configs.json of sweep B (FIFO)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep-ms", type=float, default=100.0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", required=True, help="CSV file")
    a = ap.parse_args()

    from raytune_attn import artifact
    from raytune_attn.problem import Problem
    from raytune_attn.tune.measure.timing import tflops
    from raytune_attn.tune.measure.workload import make_workload

    wins = [{e["problem_key"]: e["config"] for e in artifact.load(p)["entries"]} for p in (a.a, a.b)]
    keys = sorted(set(wins[0]) & set(wins[1]))
    missing = sorted(set(wins[0]) ^ set(wins[1]))
    if missing:
        print(f"keys named by one sweep only (skipped): {missing}")
    if not keys:
        raise SystemExit(f"{a.a} and {a.b} name no problem key in common: nothing to compare")
    rows = []
    for key in keys:
        p = Problem.from_key(key)
        w = make_workload(p, device=a.device)
        cfg_a, cfg_b = wins[0][key], wins[1][key]
        times = _race(w, cfg_a, cfg_b, a.rounds, a.rep_ms)
        ms_a, ms_b = (statistics.median(t) for t in times)
        rows.append({"problem_key": key, "same_config": cfg_a == cfg_b, "ms_a": ms_a, "ms_b": ms_b,
                     "tflops_a": tflops(p.flops(), ms_a), "tflops_b": tflops(p.flops(), ms_b),
                     "a_over_b": ms_b / ms_a, "config_a": cfg_a, "config_b": cfg_b})
        r = rows[-1]
        print(f"{key}: A {r['tflops_a']:.1f} B {r['tflops_b']:.1f} TFLOP/s, A/B {r['a_over_b']:.3f}"
              f"{' (same config)' if r['same_config'] else ''}")
        del w  # the next key's inputs may need the memory
    with open(a.out, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    ratios = [r["a_over_b"] for r in rows]
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"A's winner within 1% of B's (or faster) on {sum(x >= 0.99 for x in ratios)} of {len(ratios)} keys; "
          f"worst {min(ratios):.3f}; geometric mean {geo:.3f}; same config on {sum(r['same_config'] for r in rows)}")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
