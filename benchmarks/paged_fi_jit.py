"""Builds the FlashInfer modules the paged benchmark uses, ahead of their first use, in a process of its own.

FlashInfer compiles its kernels with nvcc at first use (minutes). `paged_bench` starts this script as a subprocess
when it starts, so the build runs on the CPUs while the GPU times the other methods, and the FlashInfer columns
are measured last. Only the modules of the benchmark's one configuration are built: batch decode (CUDA-core
kernel) and batch prefill (`--backend`, fa2 by default) for the dtype and head dim given, int32 indices, no
positional encoding, sliding window or soft cap; for one GPU architecture (FLASHINFER_CUDA_ARCH_LIST, set by
`arch_env` from the GPU). The modules land in FlashInfer's JIT cache (under FLASHINFER_WORKSPACE_BASE), where the
benchmark's wrappers find them.

    python -m benchmarks.paged_fi_jit --dtype bfloat16 --head-dim 128 --backend fa2
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def arch_env() -> dict[str, str]:
    """FLASHINFER_CUDA_ARCH_LIST for this machine's GPU 0 (sm_90 builds as 9.0a: FlashInfer's Hopper kernels need
    it), MAX_JOBS for ninja, both unless already set."""
    import torch

    env = {}
    if "FLASHINFER_CUDA_ARCH_LIST" not in os.environ and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(0)
        env["FLASHINFER_CUDA_ARCH_LIST"] = f"{major}.{minor}" + ("a" if major >= 9 else "")
    if "MAX_JOBS" not in os.environ:
        env["MAX_JOBS"] = str(max(1, (os.cpu_count() or 2) - 2))  # two cores left to the GPU timing
    return env


def build(dtype_name: str, head_dim: int, backend: str) -> None:
    import torch
    from flashinfer.jit import build_jit_specs
    from flashinfer.jit.attention.modules import gen_batch_decode_module, gen_batch_prefill_module

    dt = getattr(torch, dtype_name)
    # The arguments the wrappers' plan() passes (decode.py, prefill.py): q, kv and output dtypes, index dtype,
    # head dims, no positional encoding, no sliding window, no soft cap (and for prefill no fp16 QK reduction).
    specs = [gen_batch_decode_module(dt, dt, dt, torch.int32, head_dim, head_dim, 0, False, False),
             gen_batch_prefill_module(backend, dt, dt, dt, torch.int32, head_dim, head_dim, 0, False, False, False)]
    build_jit_specs(specs, verbose=False)


def start(dtype_name: str, head_dim: int, backend: str, log: Path) -> tuple[subprocess.Popen, float, object]:
    """The build as a subprocess writing to `log`: (process, start time, open log file)."""
    os.environ.update(arch_env())  # the wrappers in this process must look up the same architecture's modules
    fh = open(log, "w")  # noqa: SIM115 - closed by wait()
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "benchmarks.paged_fi_jit", "--dtype", dtype_name, "--head-dim", str(head_dim),
           "--backend", backend]
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=root)
    return proc, time.perf_counter(), fh


def wait(handle, deadline_s: float) -> tuple[float, str | None]:
    """(seconds the build took, None) or (seconds, why it failed); stops a build past `deadline_s` seconds from
    its start. The seconds are the build's own (it reports them), not the wait's: it may have ended long before."""
    proc, t0, fh = handle
    try:
        proc.wait(timeout=max(0.0, deadline_s - (time.perf_counter() - t0)))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        fh.close()
        return time.perf_counter() - t0, f"n/a (JIT past {deadline_s:.0f} s, stopped)"
    fh.close()
    log = Path(fh.name).read_text(errors="replace")
    took = re.findall(r"^flashinfer JIT: ([0-9.]+) s", log, re.M)
    took = float(took[-1]) if took else float("nan")
    if proc.returncode != 0:
        lines = [ln for ln in log.strip().splitlines() if not ln.startswith("flashinfer JIT: ")][-1:] or [""]
        return took, f"n/a (JIT failed rc={proc.returncode}: {lines[0][:160]})"
    return took, None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--backend", default="fa2", choices=("fa2", "fa3"))
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        os.environ.update(arch_env())
        build(a.dtype, a.head_dim, a.backend)
    finally:  # `wait` reads this line, a failed build's included
        print(f"flashinfer JIT: {time.perf_counter() - t0:.1f} s (arch {os.environ.get('FLASHINFER_CUDA_ARCH_LIST')}"
              f", MAX_JOBS {os.environ.get('MAX_JOBS')})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
