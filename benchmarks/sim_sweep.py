"""Measure the sweep pipeline's own overhead without a GPU: a real `raytune-attn tune` on a local Ray cluster whose
GPU nodes are simulated (fake `GPU` and `accelerator_type:H100` resources), with benchmark and compile actors
answering from a recorded landscape (raytune_attn/sweep/simulate.py): a GPU's time is spent as sleep, so the
summary's GPU busy fraction and overhead per trial are those the pipeline would leave on a real GPU.

    python3 benchmarks/sim_sweep.py --gpus 1 --problems llama3_8b_prefill --budget 30 --out /tmp/sim1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=1, help="simulated GPUs (one node each)")
    ap.add_argument("--landscape", default=str(ROOT / "tests/data/landscape_h100_d128_causal_s4096.parquet"))
    ap.add_argument("--compile-scale", type=float, default=1.0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--head-cpus", type=int, default=2)
    args, rest = ap.parse_known_args()

    import ray
    from ray.cluster_utils import Cluster

    os.environ["RAYTUNE_ATTN_SIMULATE"] = json.dumps({"landscape": str(Path(args.landscape).resolve()),
                                                      "compile_scale": args.compile_scale})
    os.environ["RAYTUNE_ATTN_FAKE_DEVICE"] = "nvidia:sm90:NVIDIA H100 80GB HBM3 (simulated)"
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": args.head_cpus, "include_dashboard": False})
    for _ in range(args.gpus):
        c.add_node(num_cpus=0, num_gpus=1, resources={"accelerator_type:H100": 1})
    c.wait_for_nodes()
    from raytune_attn.tune.sweep import main as tune

    t0 = time.time()
    try:
        rc = tune(["--address", c.address, "--out", args.out, "--space",
                   str(ROOT / "search_spaces/nvidia/sm90_study.yaml"), *rest])
    finally:
        ray.shutdown()
        c.shutdown()
    print(f"[sim] rc {rc}, {time.time() - t0:.1f} s", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
