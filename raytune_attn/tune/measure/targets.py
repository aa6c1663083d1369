"""GPU targets to compile the kernel for, named as on the command line (`hip:gfx942`, `cuda:90`, ...) or this
machine's own GPU: Triton's backend, architecture and warp size, the vendor whose knob rules apply, the one
validation's architecture and the shared memory a block may use."""

from __future__ import annotations

from dataclasses import dataclass

from raytune_attn.kernels.resources import ARCHS


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


class CrossCompileError(ValueError):
    """Bad input to a cross-compile (target, space, problems, sample): the message names what is wrong."""


def parse_target(text: str) -> Target:
    t = TARGETS.get(str(text).strip().lower())
    if t is None:
        raise CrossCompileError(f"unknown target {text!r}; known targets: {', '.join(TARGETS)}")
    return t


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
