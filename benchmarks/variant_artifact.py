"""A sweep's artifact with one config put in every entry of a head dim: the variant that es_winners.py times
against the sweep's own winners, to ask whether a config the searches missed beats what they named.

    cd docs/benchmarks && python variant_artifact.py h200/run13/grid-bf16_best_configs.json --head-dim 128 \
        --set BLOCK_M=128 --set BLOCK_N=64 --set num_warps=4 --set num_stages=2 --set USE_TMA=true --set maxnreg=0 \
        --out h200/run13/d128_w4tma_bf16_best_configs.json
"""

from __future__ import annotations

import argparse

import yaml

from raytune_attn import artifact


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifact")
    ap.add_argument("--head-dim", type=int, required=True, help="keep only this head dim's entries")
    ap.add_argument("--set", action="append", default=[], help="KNOB=VALUE put in every kept entry's config")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sets = {}
    for item in a.set:
        name, sep, raw = item.partition("=")
        if not sep:
            raise SystemExit(f"--set takes KNOB=VALUE, got {item!r}")
        sets[name] = yaml.safe_load(raw)
    art = artifact.load(a.artifact)
    art["entries"] = [{**e, "config": {**e["config"], **sets}} for e in art["entries"]
                      if e["problem"]["head_dim"] == a.head_dim]
    if not art["entries"]:
        raise SystemExit(f"{a.artifact} has no entry with head dim {a.head_dim}: nothing to write")
    art["checksum"] = artifact.checksum(art)
    artifact.write(art, a.out)
    print(f"{a.out}: {len(art['entries'])} entries with {sets}")


if __name__ == "__main__":
    main()
