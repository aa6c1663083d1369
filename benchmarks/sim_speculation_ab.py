"""A/B of the searches' speculative compiles (prefetch.Speculator) in a simulated sweep, without a GPU: a fake GPU
node answers from the recorded H100 landscape, and compiles sleep the recorded compile seconds x SCALE.

    SCALE=1.0 python3 benchmarks/sim_speculation_ab.py on 1     # then: ... off 1

Prints the summary's timings and what the trials waited on compiles (the sum of their compile_s).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAND = ROOT / "tests/data/landscape_h100_d128_causal_s4096.parquet"
PROBLEMS = [(4, 256), (8, 512), (2, 1024), (1, 2048)]  # (batch, max length): varlen, D=128, causal, one binary


def main(mode: str, seed: str) -> None:
    import pandas as pd
    import ray
    from ray.cluster_utils import Cluster

    from raytune_attn.tune.sweep import main as tune
    from raytune_attn.tune.sweep import prefetch

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    cluster.add_node(num_cpus=0, num_gpus=1, resources={"accelerator_type:H100": 1})
    cluster.wait_for_nodes()
    os.environ["RAYTUNE_ATTN_SIMULATE"] = json.dumps({"landscape": str(LAND),
                                                      "compile_scale": float(os.environ.get("SCALE", "0.25"))})
    os.environ["RAYTUNE_ATTN_FAKE_DEVICE"] = "nvidia:sm90:NVIDIA H100 80GB HBM3 (simulated)"
    if mode == "off":
        prefetch.speculators = lambda *a, **k: {}
    probs = Path(f"/tmp/ab-{mode}-{seed}.yaml")
    probs.write_text("schema_version: 1\nname: ab\n"
                     "defaults: {hq: 32, hkv: 8, head_dim: 128, causal: true, dtype: bfloat16, varlen: true}\n"
                     "problems:\n" + "".join(f"  - {{batch: {b}, seqlen: {s}}}\n" for b, s in PROBLEMS))
    out = Path(f"/tmp/ab/out-{mode}-{seed}")
    tune(["--address", cluster.address, "--problems", str(probs), "--searcher", "gp", "--budget", "30", "--seed",
          seed, "--space", str(ROOT / "search_spaces/nvidia/sm90_study.yaml"), "--out", str(out), "--no-mlflow",
          "--compile-workers", "8", "--trials-per-gpu", "8", "--rungs", "10,30,60", "--final-rep-ms", "20"])
    s = json.loads((out / "summary.json").read_text())
    df = pd.read_parquet(out / "trials.parquet")
    t = df[(df.kind == "trial") & ~df.trial_id.str.endswith("-final")]
    print(mode, seed, {k: round(s[k], 2) for k in ("tune_wall_s", "idle_compile_bound_s", "gpu_busy_fraction")},
          f"trials {len(t)}, waited on compiles {t.compile_s.sum():.1f} s ({int((t.compile_s > 0.06).sum())} trials)")
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
