"""One launch of one config on one cell of issue 7's grid, checked against the float32 reference: for kernel builds
that may hang the GPU, run each config in its own process under `timeout`.

    timeout 60 python3 benchmarks/launch_probe.py --dim 256 --seq 512 --causal '{"BLOCK_M": 128, ...}'

Prints one line: the config, then ok / wrong (relative error) / invalid (the reason). Exit status 0 for ok, 1
otherwise; a hang is `timeout`'s 124. (Run 23 ran it at 4686e75, whose launcher built the TMA descriptors on the host
for these contiguous inputs.)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from raytune_attn.config import InvalidConfig  # noqa: E402
from raytune_attn.problem import Problem  # noqa: E402
from raytune_attn.tune.measure.workload import accept, make_workload, reference  # noqa: E402

TOKENS, WIDTH = 16384, 2048


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("config", type=json.loads, help="the config's knobs as a JSON object (the rest: defaults)")
    a = ap.parse_args(argv)
    p = Problem(batch=TOKENS // a.seq, hq=WIDTH // a.dim, hkv=WIDTH // a.dim, seqlen_q=a.seq, seqlen_k=a.seq,
                head_dim=a.dim, causal=a.causal, dtype=a.dtype)
    w = make_workload(p)
    try:
        out = w.check_run(a.config)
        torch.cuda.synchronize()
    except InvalidConfig as e:
        print(json.dumps(a.config), "invalid", str(e)[:200], flush=True)
        return 1
    ok, err = accept(out, reference(w))
    print(json.dumps(a.config), "ok" if ok else "wrong", f"rel err {err:.2e}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
