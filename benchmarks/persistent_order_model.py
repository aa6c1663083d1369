"""How evenly the persistent grid's static tile order spreads causal work over its programs: a model, no GPU.

    python3 docs/benchmarks/persistent_order_model.py [--programs 132] [--out order_model.csv]

Issue 7's grid cells (B*S = 16384, H*D = 2048) with 128-row tiles under a causal mask: query block m does m + 1
key blocks, plus a fixed cost of one block a tile. Program p of G runs tiles p, p + G, p + 2G... of an order:
- forward: the plain grid's order (every query block of a head, then the next head);
- straight: longest-first (query blocks from the last to the first, each across every head), dealt round-robin;
- snake: longest-first, odd rounds dealt backwards (the kernel's REVERSE_M on the persistent grid).
Printed: the balance of each, mean work a program / the busiest program's work (1 = even).
"""

from __future__ import annotations

import argparse
import csv

TOKENS, WIDTH, BLOCK_M, FIXED = 16384, 2048, 128, 1.0


def balance(seq: int, head_dim: int, programs: int, order: str) -> float:
    m_blocks, heads = seq // BLOCK_M, (TOKENS // seq) * (WIDTH // head_dim)
    tiles = m_blocks * heads
    load = [0.0] * programs
    for t in range(tiles):
        first, p = t - t % programs, t % programs
        if order == "forward":
            m = t % m_blocks
        else:
            u = t
            if order == "snake" and (first // programs) % 2 == 1:
                u = first + min(programs, tiles - first) - 1 - p
            m = m_blocks - 1 - u // heads
        load[p] += m + 1 + FIXED
    return sum(load) / programs / max(load)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=132, help="programs of the persistent grid (H200: 132 SMs x 1)")
    ap.add_argument("--out", default="order_model.csv")
    a = ap.parse_args(argv)
    orders = ("forward", "straight", "snake")
    rows = [{"head_dim": d, "seqlen": s, **{o: round(balance(s, d, a.programs, o), 3) for o in orders}}
            for d in (64, 128, 256) for s in (512, 1024, 2048, 4096, 8192, 16384)]
    print(f"{'D':>4} {'S':>6} " + " ".join(f"{o:>9}" for o in orders))
    for r in rows:
        print(f"{r['head_dim']:>4} {r['seqlen']:>6} " + " ".join(f"{r[o]:>9.3f}" for o in orders))
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
