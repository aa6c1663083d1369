"""Compile a search space's configs for a GPU that is not there: what each binary uses, measured by its compiler.

Triton compiles for any target it has a backend for (`triton.compile(src, target=GPUTarget(...))`), so a machine
without an AMD or NVIDIA GPU still learns, for every config of a space, whether the compiler takes it, how much
shared memory (LDS) the binary asks for, and how many registers it uses and spills: what the resource pre-filter
(`raytune_attn.kernels.resources`) can only estimate. Speed and numerics still need the GPU.

Each config is specialized as the launcher specializes it on the real problem (`launch_spec` runs the launcher
itself on shape-only tensors, then Triton's own binder derives the divisibility, folded constants and, on AMD,
buffer-op pointer ranges), without allocating the problem's tensors. Compiles run in spawned worker processes, with
the Triton interpreter off there.

A row per (config, problem): `status` is "compiled", "refused" (the knob rules, `validate_config`, refuse it;
`message` says why; nothing is compiled), "failed" (the compiler's message, or Triton's out-of-resource text where
the binary needs more shared memory than the target has, as loading it on the GPU would say) or "timeout" (killed
after `timeout_s`: the sweep's compile pool would give up on it too). Beside it, `prefilter_rejects` and
`prefilter_reason`: whether the one validation (`raytune_attn.validation.check` on the target's architecture, what
a sweep screens candidates with) refuses it there, and `smem_estimate`, the shared memory it counts. The config is
compiled either way, so a refusal of a config that compiles shows as much as a failure it let through.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing as mp
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from raytune_attn.config import AMD_ONLY_KNOBS, InvalidConfig, validate_config
from raytune_attn.kernels.resources import ARCHS
from raytune_attn.problem import Problem


@dataclass(frozen=True)
class Target:
    name: str  # as given on the command line, e.g. "hip:gfx942"
    backend: str  # Triton's backend name: "hip" or "cuda"
    arch: str | int  # "gfx942" or a compute capability as an int (90)
    warp_size: int
    vendor: str  # the vendor `validate_config` checks knobs against
    prefilter_arch: str | None  # the pre-filter's architecture (resources.ARCHS); None where it has none
    smem_limit: int  # shared memory (LDS) a block may use, bytes

    def gpu_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget(self.backend, self.arch, self.warp_size)


def _arch_target(name: str, backend: str, arch: str | int, warp: int, prefilter_arch: str) -> Target:
    return Target(name, backend, arch, warp, ARCHS[prefilter_arch].vendor, prefilter_arch,
                  ARCHS[prefilter_arch].smem_bytes)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        _arch_target("hip:gfx90a", "hip", "gfx90a", 64, "gfx90a"),
        _arch_target("hip:gfx942", "hip", "gfx942", 64, "gfx942"),
        _arch_target("cuda:80", "cuda", 80, 32, "sm80"),
        _arch_target("cuda:90", "cuda", 90, 32, "sm90"),
        # Blackwell (B200): 227 KB of shared memory per block like Hopper (CUDA programming guide, compute
        # capability 10.0); the pre-filter has no model of it yet.
        Target("cuda:100", "cuda", 100, 32, "nvidia", None, 232448),
    )
}

STATUSES = ("compiled", "refused", "failed", "timeout")
DEFAULT_TIMEOUT_S = 300.0
COMPILE_NICE = 10  # the machine is shared: compiles yield to interactive work

# Forms of a config the compiler answers to the same way on every problem: head dims 64, 128 and 256 cover the
# kernel's padded widths that change tile sizes (BLOCK_D), masks both ways. Shapes of issue 7's grid at S=4096.
DEFAULT_HEAD_DIMS = (64, 128, 256)


class CrossCompileError(ValueError):
    """Bad input to a cross-compile (target, space, problems, sample): the message names what is wrong."""


def parse_target(text: str) -> Target:
    t = TARGETS.get(str(text).strip().lower())
    if t is None:
        raise CrossCompileError(f"unknown target {text!r}; known targets: {', '.join(TARGETS)}")
    return t


def default_problems(paged: bool = False) -> list[Problem]:
    """One problem per head dim and mask; for the paged kernel's spaces (`paged`) one GQA batch per head dim that
    takes both of its paths: decode rows beside a prefill chunk over a cached prefix."""
    if paged:
        from raytune_attn.paged_problem import PagedProblem

        return [PagedProblem.from_fields({"mix": [{"num_seqs": 4, "q_len": 1, "context": 1000},
                                                  {"num_seqs": 1, "q_len": 300, "context": 700}],
                                          "block_size": 16, "hq": 4 * (1024 // d), "hkv": 1024 // d, "head_dim": d})
                for d in DEFAULT_HEAD_DIMS]  # fmt: skip
    return [Problem(batch=4, hq=2048 // d, hkv=2048 // d, seqlen_q=4096, seqlen_k=4096, head_dim=d, causal=c)
            for d in DEFAULT_HEAD_DIMS for c in (False, True)]


def is_paged_space(space) -> bool:
    """Whether `space` is the paged kernel's (it has the split-KV knob, validation.is_paged)."""
    return "NUM_SEGMENTS" in space.names


@dataclass(frozen=True)
class Job:
    index: int
    config: dict  # the space's knobs, as the space gives them
    problem: Problem
    full_config: dict | None  # validated, defaults filled in; None when refused
    refused: str | None
    estimate: int | None  # the shared memory the validation counts for it on the target (bytes, a lower bound)
    prefilter_reason: str | None  # why the validation refuses it on the target's architecture (None: accepted)


def _paged_job(index: int, config: dict, problem, target: Target) -> Job:
    """A paged config's job: the paged kernel's rules (validation.check_paged), then their verdict on the target's
    architecture; no shared-memory estimate (the paged kernel has no model beyond one K and one V tile)."""
    from raytune_attn import validation

    kw = dict(head_dim=problem.head_dim, group=problem.gqa_group, vendor=target.vendor, dtype=problem.dtype)
    try:
        full, refused = validation.check_paged(config, **kw), None
    except InvalidConfig as e:
        return Job(index, dict(config), problem, None, str(e), None, None)
    try:
        validation.check_paged(config, arch=target.prefilter_arch, **kw)
        reason = None
    except InvalidConfig as e:
        reason = str(e)
    return Job(index, dict(config), problem, full, refused, None, reason)


def select_configs(space, sample: int | None = None, seed: int = 0) -> list[dict]:
    """Every config of the space, or a seeded sample of `sample` of them (in the space's order)."""
    configs = space.configs()
    if sample is None or sample >= len(configs):
        return configs
    picked = sorted(random.Random(seed).sample(range(len(configs)), sample))
    return [configs[i] for i in picked]


def plan_jobs(configs: Iterable[dict], problems: Iterable[Problem], target: Target) -> list[Job]:
    """One job a (config, problem): the knob rules for the target's vendor (`validate_config`: a refusal compiles
    nothing), then the one validation's verdict on the target's architecture beside it (`validation.check`:
    shared memory, tensor descriptors), which the compile then checks."""
    from raytune_attn import validation

    jobs = []
    for config in configs:
        for problem in problems:
            if validation.is_paged(config):
                jobs.append(_paged_job(len(jobs), config, problem, target))
                continue
            try:
                full, refused = validate_config(config, head_dim=problem.head_dim, vendor=target.vendor), None
            except InvalidConfig as e:
                full, refused = None, str(e)
            estimate = reason = None
            if full is not None and target.prefilter_arch is not None:
                dtype_bytes = 4 if problem.dtype == "float32" else 2
                estimate = validation.shared_memory_need(full, target.prefilter_arch, head_dim=problem.head_dim,
                                                         dtype_bytes=dtype_bytes)
                try:
                    validation.check(full, head_dim=problem.head_dim, vendor=target.vendor,
                                     arch=target.prefilter_arch, dtype=problem.dtype)
                except InvalidConfig as e:
                    reason = str(e)
            jobs.append(Job(len(jobs), dict(config), problem, full, refused, estimate, reason))
    return jobs


# ---- what runs in a worker: the launch as the launcher would make it, specialized and compiled for the target ----

class _Buffer:
    """A tensor argument without its memory: Triton's binder reads only the dtype, the address's alignment and
    (AMD buffer ops) the byte range the pointer spans. The address is 16-byte aligned as every allocation is."""

    def __init__(self, dtype, nbytes: int):
        self.dtype = dtype
        self.nbytes = nbytes

    def data_ptr(self) -> int:
        return 1 << 40

    def ptr_range(self) -> int:
        return self.nbytes


class _Launch:
    """Stands where the kernel is while the launcher runs with `compile_only`: keeps what it would compile."""

    def __init__(self, kernel):
        self.kernel, self.seen = kernel, None

    def warmup(self, *args, grid=None, **kwargs):
        self.seen = (self.kernel, args, kwargs)
        return self

    def _init_handles(self) -> None:
        pass


_LAUNCH_LOCK = threading.Lock()  # the launcher's kernels are module globals, stood in for one launch at a time


@contextlib.contextmanager
def _stood_in(*kernels: tuple):
    """The kernels of each (module, names) pair replaced by `_Launch` stand-ins while the block runs (one launch at
    a time); yields {name: stand-in} in that order, each holding what the launcher would have compiled."""
    with _LAUNCH_LOCK:  # read inside the lock too: outside it another launch's stand-in may be in place
        saved = [(mod, name, getattr(mod, name)) for mod, names in kernels for name in names]
        launch = {name: _Launch(kernel) for _, name, kernel in saved}
        try:
            for mod, name, _ in saved:
                setattr(mod, name, launch[name])
            yield launch
        finally:
            for mod, name, kernel in saved:
                setattr(mod, name, kernel)


def _buffers(args: tuple) -> tuple:
    """A launch's arguments with each tensor as a `_Buffer` (its dtype and size: all a compile needs)."""
    import torch

    return tuple(_Buffer(a.dtype, a.numel() * a.element_size()) if isinstance(a, torch.Tensor) else a for a in args)


def launch_spec(problem: Problem, config: dict, backend: str) -> tuple[Any, tuple, dict]:
    """The main kernel's launch_specs."""
    return launch_specs(problem, config, backend)[0]


def launch_specs(problem: Problem, config: dict, backend: str) -> list[tuple[Any, tuple, dict]]:
    """(kernel, positional arguments, keyword arguments) of each kernel (the main one, then the causal band's
    where `BAND_LAUNCH` has one: kernels/causal_band.py) that `flash_attn_fwd` compiles for contiguous inputs of
    `problem` with a validated `config`, on a GPU of Triton backend `backend` ("hip" or "cuda"), without memory:
    the launcher itself runs on shape-only (meta) tensors with the kernel stood in for, so every argument and
    constexpr it derives (EVEN_K, WHOLE_DESC, new ones) is its own; tensors come back as `_Buffer`s and the
    launch options are the target backend's (the launcher picks them for the GPU of the process it runs in)."""
    import torch

    from raytune_attn.kernels import causal_band as cb
    from raytune_attn.kernels import flash_attn as fa

    p, d = problem, problem.head_dim
    dtype = getattr(torch, p.dtype)

    def meta(*shape, dt=dtype):
        return torch.empty(shape, dtype=dt, device="meta")

    kw = dict(causal=p.causal, compile_only=True)
    if p.varlen:
        tokens = p.batch * p.seqlen_q  # packed tokens at most; only the byte range depends on it
        q, k = meta(tokens, p.hq, d), meta(tokens, p.hkv, d)
        cu = meta(p.batch + 1, dt=torch.int32)
        kw.update(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=p.seqlen_q, max_seqlen_k=p.seqlen_k)
    else:
        q, k = meta(p.batch, p.hq, p.seqlen_q, d), meta(p.batch, p.hkv, p.seqlen_k, d)
    with _stood_in((fa, ("_attn_fwd", "_attn_fwd_persistent")), (cb, ("_attn_band",))) as launch:
        fa.flash_attn_fwd(q, k, torch.empty_like(k), config, out=torch.empty_like(q), **kw)
    specs = []
    for stand_in in launch.values():
        if stand_in.seen is None:
            continue
        kernel, args, kwargs = stand_in.seen
        kwargs = {n: v for n, v in kwargs.items() if n not in AMD_ONLY_KNOBS and n != "maxnreg"}
        if kernel is not cb._attn_band:  # the band launch has its own fixed options (num_warps, num_stages)
            if backend == "hip":
                kwargs.update({name: config[name] for name in AMD_ONLY_KNOBS if name in config})
            elif config.get("maxnreg"):
                kwargs["maxnreg"] = config["maxnreg"]
        specs.append((kernel, _buffers(args), kwargs))
    return specs


def specialize(kernel, args: tuple, kwargs: dict, target: Target) -> tuple[dict, dict, dict, dict]:
    """(signature, constexprs, attrs, options) of one launch, by the JIT's own binder for `target`'s backend."""
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    backend = make_backend(target.gpu_target())
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = kernel._pack_args(backend, kwargs, bound, specialization, options)
    return signature, constexprs, attrs, options.__dict__


def compile_kernel(target: Target, problem: Problem, config: dict):
    """The binary `flash_attn_fwd` launches for `problem` with `config` (validated), compiled for `target` into
    Triton's cache (TRITON_CACHE_DIR): the same cache entry the launcher's JIT looks up on a GPU of that kind,
    so a machine without one can warm the cache for it."""
    import triton
    from triton.compiler import ASTSource

    if getattr(problem, "kind", None) == "paged":
        specs = paged_launch_specs(problem, config)
    else:
        specs = launch_specs(problem, config, target.backend)
    compiled = []
    for kernel, args, kwargs in specs:
        signature, constexprs, attrs, options = specialize(kernel, args, kwargs, target)
        compiled.append(triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=target.gpu_target(),
                                       options=options))
    return compiled[0]  # the main kernel (a paged config with segments also builds its reduce, a band launch its band)


def paged_launch_specs(problem, config: dict) -> list[tuple[Any, tuple, dict]]:
    """(kernel, args, kwargs) of each kernel `paged_attn_fwd` builds for `problem` with a validated paged
    `config` (the split-KV kernel, and the reduce where it has segments), from shape-only tensors of the problem's
    compile twin (paged_workload: the same binaries), the kernels stood in for as in `launch_spec`."""
    import torch

    from raytune_attn.kernels import paged_attn as pa
    from raytune_attn.tune.measure.paged_workload import compile_twin

    p = compile_twin(problem)
    lens = p.lengths()
    pages = max(-(-k // p.block_size) for _, k in lens)
    total_q, dtype = sum(q for q, _ in lens), getattr(torch, p.dtype)

    def meta(*shape, dt=dtype):
        return torch.empty(shape, dtype=dt, device="meta")

    q = meta(total_q, p.hq, p.head_dim)
    cache = meta(len(lens) * pages + 1, p.block_size, p.hkv, p.head_dim)
    ints = [meta(*shape, dt=torch.int32) for shape in ((len(lens), pages), (len(lens),), (len(lens) + 1,))]
    with _stood_in((pa, ("_paged_fwd", "_paged_reduce"))) as launch:
        pa.paged_attn_fwd(q, cache, torch.empty_like(cache), torch.empty_like(q), *ints, p.seqlen_q, config,
                          causal=True, scale=p.head_dim ** -0.5, compile_only=True)
    return [(kernel, _buffers(args), kwargs) for kernel, args, kwargs in (s.seen for s in launch.values() if s.seen)]


def out_of_shared_memory(shared: int, target: Target) -> str | None:
    """Triton's out-of-resource text for a binary that needs more shared memory than `target` has (what loading
    it on the GPU raises), else None."""
    if shared <= target.smem_limit:
        return None
    from triton.runtime.errors import OutOfResources

    return str(OutOfResources(shared, target.smem_limit, "shared memory")).split(". ")[0]


def binary_resources(compiled, target: Target) -> dict:
    """Registers and spills of a compiled kernel, from its own metadata (no GPU needed)."""
    return (amd_resources(compiled.asm["amdgcn"]) if target.backend == "hip"
            else nvidia_resources(compiled.asm["cubin"]))


def compile_one(target_name: str, problem: dict, config: dict) -> dict:
    """Compile one validated config for one problem; the row's compile fields (status, message, resources)."""
    target = TARGETS[target_name]
    t0, cpu0 = time.perf_counter(), _cpu_s()
    try:
        compiled = compile_kernel(target, Problem.from_dict(problem), config)
    except Exception as e:  # noqa: BLE001 - whatever the compiler raises is this config's answer
        return {"status": "failed", "message": compiler_message(e), "compile_s": time.perf_counter() - t0,
                "compile_cpu_s": _cpu_s() - cpu0}
    row = {"status": "compiled", "message": "", "compile_s": time.perf_counter() - t0,
           "compile_cpu_s": _cpu_s() - cpu0, "shared_bytes": int(compiled.metadata.shared),
           **binary_resources(compiled, target)}
    overflow = out_of_shared_memory(row["shared_bytes"], target)
    if overflow:
        row["status"], row["message"] = "failed", overflow
    return row


def local_target(index: int = 0) -> Target:
    """This machine's GPU `index` as a target: the GPUTarget Triton's JIT compiles for here and the block's
    opt-in shared memory, so a pool compiling for it writes the cache entries the launcher reads."""
    import torch
    from triton.runtime import driver

    gt = driver.active.get_current_target()
    props = torch.cuda.get_device_properties(index)
    smem = getattr(props, "shared_memory_per_block_optin", 0) or props.shared_memory_per_block
    if gt.backend == "hip":
        name, vendor, arch = f"hip:{gt.arch}", "amd", str(gt.arch)
    else:
        name, vendor, arch = f"cuda:{gt.arch}", "nvidia", f"sm{gt.arch}"
    return Target(name, gt.backend, gt.arch, gt.warp_size, vendor, arch if arch in ARCHS else None, int(smem))


def _cpu_s() -> float:
    """CPU seconds of this process and the tools it ran (ptxas, ld.lld): a compile's cost whatever else shares
    the machine, where its wall time is not."""
    import resource

    return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def compiler_message(e: BaseException) -> str:
    """The compiler's own words, short: its error lines (else its last line), prefixed with the exception type."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"error|failed|out of resource|assert", ln, re.IGNORECASE)]
    text = " | ".join(dict.fromkeys(errors[:3] or lines[-1:]))
    return f"{type(e).__name__}: {text}"[:500]


_AMD_FIELDS = {"registers": r"\.vgpr_count:\s*(\d+)", "agprs": r"\.agpr_count:\s*(\d+)",
               "sgprs": r"\.sgpr_count:\s*(\d+)", "vgpr_spills": r"\.vgpr_spill_count:\s*(\d+)",
               "sgpr_spills": r"\.sgpr_spill_count:\s*(\d+)", "scratch_bytes": r"; ScratchSize:\s*(\d+)",
               "occupancy": r"; Occupancy:\s*(\d+)"}


def amd_resources(amdgcn: str) -> dict:
    """VGPRs (`registers`), AGPRs, SGPRs, spill counts, scratch bytes and waves per SIMD, from the kernel's
    metadata in the amdgcn text."""
    out = {}
    for name, pattern in _AMD_FIELDS.items():
        m = re.search(pattern, amdgcn)
        out[name] = int(m.group(1)) if m else None
    out["spilling"] = bool(out["vgpr_spills"] or out["sgpr_spills"])
    return out


def nvidia_resources(cubin: bytes) -> dict:
    """Registers per thread and the stack frame (bytes) from `cuobjdump -res-usage` of the cubin. The kernel keeps
    no arrays in local memory and calls nothing, so a stack frame is spilled registers."""
    from triton import knobs

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        usage = subprocess.run([knobs.nvidia.cuobjdump.path, "-res-usage", f.name], capture_output=True,
                               text=True, check=True).stdout
    regs, stack, local = (re.search(rf"{key}:(\d+)", usage) for key in ("REG", "STACK", "LOCAL"))
    out = {"registers": int(regs.group(1)) if regs else None, "stack_bytes": int(stack.group(1)) if stack else None,
           "local_bytes": int(local.group(1)) if local else None}
    out["spilling"] = bool(out["stack_bytes"] or out["local_bytes"])
    return out


def _worker(conn) -> None:
    # Before anything imports Triton: with TRITON_INTERPRET on (the test suite sets it), @triton.jit makes
    # interpreter functions, which compile nothing.
    os.environ.pop("TRITON_INTERPRET", None)
    os.nice(COMPILE_NICE)
    import warnings

    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
    while (msg := conn.recv()) is not None:
        conn.send(compile_one(*msg))


# ---- the pool: long-lived spawned workers; a compile that kills its worker or runs over time is a failed row ----

class _Pool:
    def __init__(self, workers: int, timeout_s: float):
        self.workers, self.timeout_s = workers, timeout_s
        self._ctx = mp.get_context("spawn")
        self._procs: list = []

    def _spawn(self):
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker, args=(child,), daemon=True)
        proc.start()
        child.close()
        return proc, parent

    def _replace(self, i: int) -> None:
        proc, conn = self._procs[i]
        proc.kill()
        proc.join(5)
        conn.close()
        self._procs[i] = self._spawn()

    def run(self, tasks: list[tuple[int, tuple]]):
        """Yield (task id, result) as compiles finish; `tasks` are (id, compile_one's arguments)."""
        todo = list(reversed(tasks))
        while len(self._procs) < min(self.workers, len(todo)):
            self._procs.append(self._spawn())
        busy: dict[int, tuple[int, float]] = {}  # worker -> (task id, start)
        while todo or busy:
            for i, (_, conn) in enumerate(self._procs):
                if i not in busy and todo:
                    tid, msg = todo.pop()
                    conn.send(msg)
                    busy[i] = (tid, time.monotonic())
            conns = {self._procs[i][1]: i for i in busy}
            for conn in wait(list(conns), timeout=1.0):
                i = conns[conn]
                tid, t0 = busy.pop(i)
                try:
                    yield tid, conn.recv()
                except (EOFError, OSError):  # an LLVM assertion aborts the whole process
                    code = self._procs[i][0].exitcode
                    self._replace(i)
                    yield tid, {"status": "failed", "compile_s": time.monotonic() - t0,
                                "message": f"the compiler killed its process (exit code {code})"}
            for i, (tid, t0) in list(busy.items()):
                if time.monotonic() - t0 > self.timeout_s:
                    busy.pop(i)
                    self._replace(i)
                    yield tid, {"status": "timeout", "compile_s": time.monotonic() - t0,
                                "message": f"compile exceeded {self.timeout_s:.0f} s (killed)"}

    def close(self) -> None:
        for _, conn in self._procs:
            try:
                conn.send(None)
            except OSError:
                pass
        for proc, conn in self._procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(1)
            conn.close()
        self._procs = []


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def cross_compile(space, target: Target | str, problems: list[Problem] | None = None, *, sample: int | None = None,
                  seed: int = 0, workers: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                  progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Compile the space's configs (or a seeded sample) for each problem on `target`; one row a (config, problem),
    in the order configs x problems."""
    target = parse_target(target) if isinstance(target, str) else target
    jobs = plan_jobs(select_configs(space, sample, seed), problems or default_problems(is_paged_space(space)),
                     target)
    rows = [_base_row(job, space, target) for job in jobs]
    tasks = [(j.index, (target.name, j.problem.to_dict(), j.full_config)) for j in jobs if j.refused is None]
    pool = _Pool(workers or default_workers(), timeout_s)
    try:
        for done, (tid, result) in enumerate(pool.run(tasks), 1):
            rows[tid].update(result)
            if progress:
                progress(done, len(tasks))
    finally:
        pool.close()
    for row in rows:
        _judge(row)
    return rows


def _base_row(job: Job, space, target: Target) -> dict:
    p = job.problem
    return {"target": target.name, "space": space.source, "problem": p.key, "head_dim": p.head_dim,
            "causal": p.causal, "dtype": p.dtype, **job.config, "config": json.dumps(job.full_config or job.config),
            "status": "refused" if job.refused else None, "message": job.refused or "", "shared_bytes": None,
            "smem_limit": target.smem_limit, "smem_estimate": job.estimate,
            "prefilter_rejects": bool(job.prefilter_reason), "prefilter_reason": job.prefilter_reason or "",
            "registers": None, "spilling": None, "compile_s": None}


def _judge(row: dict) -> None:
    """Mark what is wrong on a row: `unexpected` (the pre-filter let through a config that failed, or rejected one
    that compiled) and `estimate_above_real` (its lower bound exceeds the binary's shared memory)."""
    real, est = row.get("shared_bytes"), row.get("smem_estimate")
    row["estimate_above_real"] = bool(real is not None and est is not None and est > real)
    failed, rejected = row["status"] in ("failed", "timeout"), row["prefilter_rejects"]
    row["unexpected"] = (failed and not rejected) or (row["status"] == "compiled" and rejected)


def summarize(rows: list[dict]) -> dict:
    """Counts over the rows: statuses, spilling, failures the pre-filter catches, and what is wrong."""
    n = Counter(r["status"] for r in rows)
    return {"rows": len(rows), "configs": len({r["config"] for r in rows}), **{s: n.get(s, 0) for s in STATUSES},
            "failed_prefiltered": sum(r["status"] == "failed" and r["prefilter_rejects"] for r in rows),
            "false_rejects": sum(r["status"] == "compiled" and r["prefilter_rejects"] for r in rows),
            "spilling": sum(bool(r.get("spilling")) and r["status"] == "compiled" for r in rows),
            "estimate_above_real": sum(r["estimate_above_real"] for r in rows),
            "unexpected": sum(r["unexpected"] for r in rows)}


_SHORT = {"BLOCK_M": "M", "BLOCK_N": "N", "num_warps": "w", "num_stages": "s", "PRE_LOAD_V": "pv", "SPLIT_MASK": "sm",
          "USE_TMA": "tma", "WARP_SPECIALIZE": "ws", "PERSISTENT": "pers", "REVERSE_M": "rev", "maxnreg": "reg",
          "ONE_Q_BUFFER": "q1", "waves_per_eu": "wpe", "matrix_instr_nonkdim": "mfma", "kpack": "kp"}


def _short_config(row: dict, names: list[str]) -> str:
    return " ".join(f"{_SHORT.get(n, n)}{int(row[n]) if isinstance(row[n], bool) else row[n]}" for n in names)


def _cell(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def format_table(rows: list[dict], knob_names: list[str]) -> str:
    """A row a (config, problem), then the counts and each distinct failure and refusal with how often."""
    amd = any("sgprs" in r for r in rows)
    head = ["problem", "config", "status", "smem", "estimate", "vgprs" if amd else "regs",
            *(["sgprs", "vgpr spills"] if amd else ["stack"]), "s"]
    body = []
    for r in rows:
        spills = [_cell(r.get("sgprs")), _cell(r.get("vgpr_spills"))] if amd else [_cell(r.get("stack_bytes"))]
        flag = "!" if r["unexpected"] or r["estimate_above_real"] else ""
        body.append([f"d{r['head_dim']}{'c' if r['causal'] else 'f'}", _short_config(r, knob_names),
                     r["status"] + flag, _cell(r["shared_bytes"]), _cell(r["smem_estimate"]), _cell(r["registers"]),
                     *spills, "-" if r["compile_s"] is None else f"{r['compile_s']:.1f}"])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)) for line in [head, *body]]
    s = summarize(rows)
    lines.append(f"{rows[0]['target'] if rows else ''} {rows[0]['space'] if rows else ''}: "
                 + ", ".join(f"{k} {v}" for k, v in s.items()))
    for status in ("failed", "timeout", "refused"):
        for msg, count in Counter(r["message"] for r in rows if r["status"] == status).most_common():
            lines.append(f"  {status} x{count}: {msg}")
    lines.append("  (d128c: head dim 128, causal; smem and estimate in bytes; ! marks a failure the pre-filter let "
                 "through, a config it rejected that compiled, or an estimate above the real figure)")
    return "\n".join(lines)


def write_parquet(rows: list[dict], path: str | Path) -> None:
    import pandas as pd

    pd.DataFrame(rows).to_parquet(path, index=False)


def _load_inputs(space, target, problems, sample, out, workers=None, timeout_s=DEFAULT_TIMEOUT_S, seed=0):
    """Everything the command checks before compiling; raises CrossCompileError with one line."""
    from raytune_attn.tune.search.space import SpaceError, load_space
    from raytune_attn.tune.sweep.problems import ProblemSetError, load_problems

    tgt = parse_target(target)
    try:
        sp = load_space(space)
    except (FileNotFoundError, SpaceError) as e:
        raise CrossCompileError(str(e)) from None
    if sp.vendor != tgt.vendor:
        raise CrossCompileError(f"space {space} is for {sp.vendor} GPUs, target {tgt.name} is {tgt.vendor}")
    paged = is_paged_space(sp)
    try:
        probs = load_problems(problems) if problems else default_problems(paged)
    except (FileNotFoundError, ProblemSetError) as e:
        raise CrossCompileError(str(e)) from None
    wrong = [p.key for p in probs if (getattr(p, "kind", None) == "paged") != paged]
    if wrong:
        kernel = "the paged kernel's (kind: paged problems)" if paged else "the dense and varlen kernel's"
        raise CrossCompileError(f"space {space} is {kernel}; {problems} has problems of the other kernel: {wrong[0]}")
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 1):
        raise CrossCompileError(f"--sample must be a positive number of configs, got {sample!r}")
    if workers is not None and workers < 1:
        raise CrossCompileError(f"--workers must be at least 1, got {workers}")
    if not timeout_s > 0:
        raise CrossCompileError(f"--timeout must be > 0 seconds, got {timeout_s}")
    if seed < 0:
        raise CrossCompileError(f"--seed must be at least 0, got {seed}")
    if out is not None and not Path(out).resolve().parent.is_dir():
        raise CrossCompileError(f"--out {out}: no such directory {Path(out).resolve().parent}")
    return sp, tgt, probs


def space_compile_main(space: str, target: str, problems: str | None = None, sample: int | None = None,
                       out: str | None = None, workers: int | None = None, seed: int = 0,
                       timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    """`raytune-attn space compile`: print the table, write Parquet to `out`; 0 only when every config that the
    validation and the pre-filter accept compiled, the pre-filter rejected none that compiled, and its estimate
    stayed at or below every binary's shared memory; 1 otherwise (also when the validation refused every config:
    nothing was verified); 2 for bad input, before anything compiles."""
    try:
        sp, tgt, probs = _load_inputs(space, target, problems, sample, out, workers, timeout_s, seed)
    except CrossCompileError as e:
        print(f"raytune-attn: error: {e}", file=sys.stderr)  # as the other commands' usage errors
        return 2

    def progress(done: int, total: int) -> None:
        if done % 5 == 0 or done == total:
            print(f"compiled {done}/{total}", file=sys.stderr, flush=True)

    t0 = time.monotonic()
    rows = cross_compile(sp, tgt, probs, sample=sample, seed=seed, workers=workers, timeout_s=timeout_s,
                         progress=progress)
    print(format_table(rows, list(sp.names)))
    print(f"wall time {time.monotonic() - t0:.0f} s")
    if out is not None:
        write_parquet(rows, out)
    s = summarize(rows)
    return 1 if s["unexpected"] or s["estimate_above_real"] or len(rows) == s["refused"] else 0
