"""The kernel's binaries for a GPU target, built without the GPU: the launch the launcher would make for a problem
and config, specialized by Triton's own binder for the target and compiled, and what each binary uses (shared
memory, registers, spills) read from its metadata. `raytune-attn space compile` (cross_compile.py) and the sweep's
compile pool (compile_pool.py) build with it."""

from __future__ import annotations

import contextlib
import re
import subprocess
import tempfile
import threading
import time
from typing import Any

from raytune_attn.config import AMD_ONLY_KNOBS
from raytune_attn.problem import Problem
from raytune_attn.tune.measure.targets import TARGETS, Target


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
