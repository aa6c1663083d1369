"""Does a GPU that sat idle time a short kernel's first run slowly? (run 18: the rung-2 false caps of a
compile-bound sweep.)

    python3 benchmarks/idle_first_run.py --out $OUT/idle_first_run.json

After the GPU idles for IDLE seconds (the host sleeps, nothing queued), one run timed as timing.median_ms times a
rung's first run (`timing.queue_run`: L2 flushed, the 150 us spin, CUDA events around the kernel), then a second at
once, then a third after the confirming run's spin (`timing.CONFIRM_SPIN_CYCLES`, 20 ms at the boost clock).
Repeated; medians printed per idle time, next to the kernel's steady-state median. The kernel: run 13's D=128 start
(128 x 64, 8 warps, 2 stages) on the fp16 grid's D=128 full S=512 cell, a 0.27 ms kernel on an H200.

`--load N`: the same with N compile processes (the sweep's compile pool) compiling other configs of
the Hopper space the whole time, a compile-bound sweep's host.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from raytune_attn.config import validate_config  # noqa: E402
from raytune_attn.problem import Problem  # noqa: E402
from raytune_attn.tune.measure.compile_pool import CompilePool  # noqa: E402
from raytune_attn.tune.measure.timing import CONFIRM_SPIN_CYCLES, SPIN_CYCLES, median_ms, queue_run  # noqa: E402
from raytune_attn.tune.measure.workload import make_workload  # noqa: E402
from raytune_attn.tune.search.space import load_space  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="idle_first_run.json")
    ap.add_argument("--idle", type=float, nargs="+", default=[0.0, 0.05, 0.2, 1.0, 3.0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--load", type=int, default=0, help="compile processes busy the whole time")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    import triton

    p = Problem(batch=32, hq=16, hkv=16, seqlen_q=512, seqlen_k=512, head_dim=128, causal=False, dtype="float16")
    w = make_workload(p, device="cuda")
    cfg = validate_config({"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2}, head_dim=128,
                          vendor="nvidia")
    buf = torch.empty_like(w.q)
    fn = lambda: w.run(cfg, out=buf)  # noqa: E731
    fn()
    torch.cuda.synchronize()
    steady = median_ms(fn, rep_ms=100)
    cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()

    def timed(spin: int) -> float:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        queue_run(fn, cache, s, e, spin)
        torch.cuda.synchronize()
        return s.elapsed_time(e)

    stop, compiled = threading.Event(), [0]
    pool = busy_thread = None
    if a.load:
        pool = CompilePool(a.load, timeout_s=60.0, device="cuda")
        space = load_space("nvidia/sm90")
        configs = [c for c in space.configs() if c != {k: cfg[k] for k in c}]
        random.Random(0).shuffle(configs)

        def busy() -> None:
            for _ in pool.compile(p, configs):
                compiled[0] += 1
                if stop.is_set():
                    return

        busy_thread = threading.Thread(target=busy, daemon=True)
        busy_thread.start()
        time.sleep(5.0)  # the workers started and compiling
    rows = []
    for idle in a.idle:
        for r in range(a.repeats):
            time.sleep(idle)
            first = timed(SPIN_CYCLES)
            second = timed(SPIN_CYCLES)
            time.sleep(idle)
            pre = timed(CONFIRM_SPIN_CYCLES)
            rows.append({"idle_s": idle, "repeat": r, "first_ms": first, "second_ms": second, "after_pre_spin_ms": pre})
    stop.set()
    if pool is not None:
        busy_thread.join()  # its next result ends it; then no one reads from the workers the pool closes
        pool.close()
    print(f"compile processes {a.load}, configs compiled meanwhile {compiled[0]}")
    print(f"kernel steady-state median {steady:.4f} ms ({torch.cuda.get_device_name()}, triton {triton.__version__})")
    print(f"{'idle s':>7} {'first':>9} {'second':>9} {'pre-spin':>9}   (medians over {a.repeats}, ms; max first)")
    for idle in a.idle:
        rs = [x for x in rows if x["idle_s"] == idle]
        med = {k: statistics.median(x[k] for x in rs) for k in ("first_ms", "second_ms", "after_pre_spin_ms")}
        print(f"{idle:7.2f} {med['first_ms']:9.4f} {med['second_ms']:9.4f} {med['after_pre_spin_ms']:9.4f}"
              f"   {max(x['first_ms'] for x in rs):.4f}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "steady_ms": steady,
                                       "pre_spin_cycles": CONFIRM_SPIN_CYCLES,
                                       "load": a.load, "compiled": compiled[0], "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
