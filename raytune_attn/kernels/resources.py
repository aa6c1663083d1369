"""Resource pre-filter: reject configs whose shared memory cannot fit, before anything is compiled.

The rule must never reject a config that compiles, so it compares a LOWER BOUND of the kernel's shared memory
with the architecture's limit. For the FA2-style forward kernel (Q tile [BLOCK_M, D], K/V tiles [BLOCK_N, D],
D = next power of two >= head_dim, min 16, `dtype_bytes` per element):

* num_stages >= 2: Triton's software pipeliner keeps (num_stages - 1) shared-memory buffers of each pipelined
  load in flight; K and V both feed a tl.dot, so both are pipelined:
      smem >= (num_stages - 1) * 2 * BLOCK_N * D * dtype_bytes
  (AMD: not yet calibrated, see `Arch.pipeline_certain`; treated like num_stages == 1.)
* num_stages == 1: no pipelining. Only where the hardware demands it do we count a buffer: Hopper's wgmma reads
  its B operand (K, then V) from shared memory, one tile at a time: smem >= BLOCK_N * D * dtype_bytes. On
  Ampere and AMD the compiler may convert layouts in registers, so nothing is certain: 0.
* Hopper (measured, Triton 3.6 on H100): the Q tile [BLOCK_M, D] also lives in shared memory (wgmma's A
  operand): + BLOCK_M * D * dtype_bytes. Elsewhere the Q tile, the softmax's P tile and layout-conversion scratch
  depend on the backend's choices (registers or shared memory, aliased or not), so the bound leaves them out.

Calibration (tests/data/landscape_h100_d128_causal_s4096.parquet, all 450 study configs compiled on an H100):
the bound is <= the real usage (`shared_bytes` of compiled kernels, "Required" of failed ones) for every config;
it rejects 66 of the 78 configs that fail on shared memory and none that compiled. The real usage there is
num_stages * (K + V) + Q for large tiles and less for small ones, so (num_stages - 1) buffers is the safe count.

A compile that runs out of shared memory fails with Triton's "out of resource: shared memory, Required: R,
Hardware limit: L"; the tuner's `raytune_attn.tune.search.prefilter_report` checks the bound against a table of
real compile outcomes: it must never reject a config that compiled and ran (false rejects = 0), and where R is in
the error text the bound must be <= R.

The Hopper knobs of issue #7 leave the bound as it is (measured, Triton 3.6 on H200, D=128 causal bf16):
WARP_SPECIALIZE, PERSISTENT and REVERSE_M never used less shared memory than the same tile without them (the
persistent kernel and TMA add 32 bytes of barriers; warp specialization keeps num_stages - 1 or more buffers),
and maxnreg moves spills to local memory, not shared memory. ONE_Q_BUFFER takes away the persistent
warp-specialized form's second Q buffer, which the bound never counted (Triton 3.6, sm_90: 229,664 bytes at D=256
128x64, against a bound of 131,072). `smem_lower_bound` therefore ignores them, which can only
under-estimate (never reject a config that compiles).

Registers: the fp32 accumulator [BLOCK_M, D] and score tile [BLOCK_M, BLOCK_N] over num_warps * 32 threads
give a register estimate per thread; above 255 the compiler spills but still compiles, so registers never
reject a config here (see `estimate_registers`, reported for information).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Arch:
    name: str
    vendor: str
    smem_bytes: int | None  # usable shared memory (LDS) per block; None = unlimited (CPU interpreter)
    b_operand_in_smem: bool  # the MMA instruction reads its B operand from shared memory (Hopper wgmma)
    a_operand_in_smem: bool = False  # Triton also stages the Q tile (wgmma's A operand) in shared memory
    # Triton's pipeliner for this backend is known to keep (num_stages - 1) buffers and to fail (not shrink) when
    # they do not fit. Measured for NVIDIA; unknown for AMD's stream pipeliner until compared with a compile
    # table from an MI GPU, so AMD rejects nothing on stages (a false reject is the one error not allowed).
    pipeline_certain: bool = True


ARCHS: dict[str, Arch] = {
    a.name: a
    for a in (
        Arch("sm80", "nvidia", 166912, False),  # A100: 163 KB opt-in
        Arch("sm86", "nvidia", 101376, False),  # 99 KB
        Arch("sm89", "nvidia", 101376, False),
        Arch("sm90", "nvidia", 232448, True, a_operand_in_smem=True),  # H100: 227 KB opt-in
        Arch("gfx90a", "amd", 65536, False, pipeline_certain=False),  # MI200: 64 KB LDS
        Arch("gfx942", "amd", 65536, False, pipeline_certain=False),  # MI300
        Arch("interpreter", "cpu", None, False),
    )
}


MODEL_KNOBS = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")  # the knobs the bounds below read


def block_d(head_dim: int) -> int:
    """The kernel's padded head dimension: next power of two >= head_dim, at least 16."""
    return max(16, 1 << (int(head_dim) - 1).bit_length())


def smem_lower_bound(config: Mapping[str, Any], arch: Arch, *, head_dim: int, dtype_bytes: int = 2) -> int:
    """Bytes of shared memory the config needs at least (see the module docstring for the derivation)."""
    tile = config["BLOCK_N"] * block_d(head_dim) * dtype_bytes
    q = config["BLOCK_M"] * block_d(head_dim) * dtype_bytes if arch.a_operand_in_smem else 0
    stages = config["num_stages"]
    if stages >= 2 and arch.pipeline_certain:
        return (stages - 1) * 2 * tile + q
    return (tile if arch.b_operand_in_smem else 0) + q


def estimate_registers(config: Mapping[str, Any], *, head_dim: int) -> int:
    """32-bit registers per thread for the fp32 accumulator and score tiles alone (a lower bound; no spills)."""
    threads = config["num_warps"] * 32
    return -(-(config["BLOCK_M"] * (block_d(head_dim) + config["BLOCK_N"])) // threads)


@dataclass(frozen=True)
class Prefilter:
    """Accepts or rejects configs for one architecture and problem before compiling."""

    arch: Arch
    head_dim: int = 128
    dtype_bytes: int = 2

    @classmethod
    def for_arch(cls, arch: str, *, head_dim: int = 128, dtype_bytes: int = 2) -> Prefilter:
        if arch not in ARCHS:
            raise ValueError(f"unknown arch {arch!r}; known: {', '.join(ARCHS)}")
        return cls(ARCHS[arch], head_dim, dtype_bytes)

    @classmethod
    def for_problem(cls, arch: str, head_dim: int, dtype: str) -> Prefilter:
        """For a problem's head dim and dtype name ("float32" tiles take 4 bytes an element, the others 2)."""
        return cls.for_arch(arch, head_dim=head_dim, dtype_bytes=4 if dtype == "float32" else 2)

    def reason(self, config: Mapping[str, Any]) -> str | None:
        """Why the config cannot compile, or None when it may."""
        if self.arch.smem_bytes is None:
            return None
        need = smem_lower_bound(config, self.arch, head_dim=self.head_dim, dtype_bytes=self.dtype_bytes)
        if need > self.arch.smem_bytes:
            return f"needs at least {need} B of shared memory, {self.arch.name} has {self.arch.smem_bytes} B"
        return None

    def accepts(self, config: Mapping[str, Any]) -> bool:
        return self.reason(config) is None
