"""Device-to-device copy bandwidth through PyTorch: the memory roof a decode-shaped kernel is judged against.

    python3 benchmarks/h100_copy_bandwidth.py [--gib 1] [--reps 20] [--out bw.json]

One `dst.copy_(src)` of a `--gib` GiB buffer, timed with CUDA events after warm-up copies; the figure counts bytes
read plus bytes written (2 x the buffer) and is the median of `--reps` copies.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch


def copy_bandwidth(gib: float, reps: int, warmup: int = 3) -> dict:
    n = int(gib * 2**30)
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    for _ in range(warmup):
        dst.copy_(src)
    ms = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        ms.append(start.elapsed_time(end))
    if not torch.equal(dst[:4096], src[:4096]) or not torch.equal(dst[-4096:], src[-4096:]):
        raise RuntimeError("the copy did not copy")  # a broken copy would report any speed
    med = statistics.median(ms)
    return {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "bytes_copied": n,
            "bytes_moved_per_copy": 2 * n, "reps": reps, "median_ms": round(med, 4), "min_ms": round(min(ms), 4),
            "max_ms": round(max(ms), 4), "tb_per_s_read_plus_write": round(2 * n / (med * 1e-3) / 1e12, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0, help="buffer size in GiB")
    ap.add_argument("--reps", type=int, default=20, help="timed copies (the median is reported)")
    ap.add_argument("--out", type=Path, help="also write the result as JSON here")
    a = ap.parse_args(argv)
    if a.gib <= 0 or a.reps <= 0:
        print("--gib and --reps must be positive", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    res = copy_bandwidth(a.gib, a.reps)
    print(json.dumps(res))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
