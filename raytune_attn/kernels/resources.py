"""Resource pre-filter: reject configs whose shared memory cannot fit, before anything is compiled.

The rule must never reject a config that compiles, so it compares a LOWER BOUND of the kernel's shared memory
with the architecture's limit. For the FA2-style forward kernel (Q tile [BLOCK_M, D], K/V tiles [BLOCK_N, D],
D = next power of two >= head_dim, min 16, `dtype_bytes` per element):

* num_stages >= 2: Triton's software pipeliner keeps shared-memory buffers of each pipelined load; K and V both
  feed a tl.dot, so both are pipelined:
      smem >= buffers * 2 * BLOCK_N * D * dtype_bytes
  with buffers = num_stages where the stage being consumed keeps its buffers too (`Arch.all_stages`: Hopper's
  warp-group MMA tiles, 64+ rows over 4+ warps) and num_stages - 1 elsewhere (`kv_buffers`); on AMD one pair at
  4 stages, where the stream pipeliner schedules the two chained dots itself (`Arch.chained_dot_stages`).
* num_stages == 1: no pipelining. The MMA's B operand (K, then V) goes through shared memory on NVIDIA (Hopper's
  wgmma reads it there; on Ampere Triton converts its layout there): smem >= BLOCK_N * D * dtype_bytes, twice
  that on Hopper's warp-group MMA tiles with PRE_LOAD_V (K and V loaded together).
* The Q tile [BLOCK_M, D] also lives in shared memory on NVIDIA (wgmma's A operand on Hopper, a layout
  conversion on Ampere): + BLOCK_M * D * dtype_bytes. The softmax's P tile and layout-conversion scratch depend on
  the backend's choices (registers or shared memory, aliased or not), so the bound leaves them out.

Calibration, Triton 3.9 (`benchmarks/smem_survey.py`: the shared memory Triton allots each config, read at its
allocation pass; tables in docs/benchmarks/cross-compile/smem/, checked by tests/test_resources.py): on every
config of the 450-config study space at D=128 causal, for sm_80 and sm_90, the bound is at most the compiled
figure and above the limit wherever the compiled figure is (102 overflows on sm_80, 78 on sm_90, none let
through, none refused that fits); samples at D=64 and 256 and of the sm90 space's Hopper knobs likewise.
Triton 3.6 on an H100 (tests/data/landscape_h100_d128_causal_s4096.parquet, all 450 study configs compiled
there): the bound is <= the real usage for every config too. AMD, gfx942 at D=128 (80 sampled configs): 16
need more than the 64 KB of LDS, all refused, none refused that fits (docs/cross-compile.md).

A compile that runs out of shared memory fails with Triton's "out of resource: shared memory, Required: R,
Hardware limit: L"; the tuner's `raytune_attn.tune.search.prefilter_report` checks the bound against a table of
real compile outcomes: it must never reject a config that compiled and ran (false rejects = 0), and where R is in
the error text the bound must be <= R.

The Hopper knobs of issue #7 leave the bound as it is (measured, Triton 3.6 on H200 and Triton 3.9 for sm_90):
WARP_SPECIALIZE, PERSISTENT, REVERSE_M and USE_TMA never used less shared memory than the same tile without them
(the persistent kernel and TMA add barriers; warp specialization keeps its buffers), and maxnreg moves spills to
local memory, not shared memory. ONE_Q_BUFFER takes away the persistent warp-specialized form's second Q buffer,
which the bound never counted. `smem_lower_bound` therefore ignores them, which can only under-estimate.

Registers: the fp32 accumulator [BLOCK_M, D] and score tile [BLOCK_M, BLOCK_N] over num_warps * 32 threads
give a register estimate per thread; above 255 the compiler spills but still compiles, so registers never
reject a config here (see `estimate_registers`, reported for information).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


def _warp_group_mma(config: Mapping[str, Any]) -> bool:
    """Hopper's warp-group MMA (wgmma) takes the tile: 64+ query rows over whole warp groups (4+ warps). Its
    operands come from shared memory, so the stage being consumed keeps its buffers. (Measured on tiles no wider
    than tall, the spaces' rule; wider ones keep the num_stages - 1 count.)"""
    return config["BLOCK_M"] >= 64 and config["num_warps"] >= 4 and config["BLOCK_N"] <= config["BLOCK_M"]


@dataclass(frozen=True)
class Arch:
    name: str
    vendor: str
    smem_bytes: int | None  # usable shared memory (LDS) per block; None = unlimited (CPU interpreter)
    b_operand_in_smem: bool  # the MMA instruction reads its B operand from shared memory (Hopper wgmma)
    a_operand_in_smem: bool = False  # Triton also stages the Q tile (wgmma's A operand) in shared memory
    # Triton's pipeliner for this backend is known to keep the buffers `kv_buffers` counts and to fail (not
    # shrink) when they do not fit: measured at the allocation pass for NVIDIA and AMD (Triton 3.9). Off: stages
    # count for nothing (a backend not yet measured; a false reject is the one error not allowed).
    pipeline_certain: bool = True
    # Configs for which the pipeliner keeps all num_stages K and V buffers (not num_stages - 1): the loads of the
    # stage being consumed stay in shared memory beside those in flight (Triton 3.9 and 3.6, measured: see the
    # module docstring). None: num_stages - 1 for every config.
    all_stages: Callable[[Mapping[str, Any]], bool] | None = None
    # The num_stages at which the backend's pipeliner takes a loop of two chained dots (QK^T, then PV) with its own
    # schedule that keeps one buffer of K and of V (AMD's stream pipeliner at 4 stages, measured on gfx942 and
    # gfx90a: LDS of one K/V pair where 3 would be num_stages - 1). None: no such schedule.
    chained_dot_stages: int | None = None


ARCHS: dict[str, Arch] = {
    a.name: a
    for a in (
        # Ampere's MMA (mma.sync) reads registers, but Triton converts the Q tile and (one stage) a K or V tile
        # through shared memory; sm86/sm89 compile through the same path with less shared memory.
        Arch("sm80", "nvidia", 166912, True, a_operand_in_smem=True),  # A100: 163 KB opt-in
        Arch("sm86", "nvidia", 101376, True, a_operand_in_smem=True),  # 99 KB
        Arch("sm89", "nvidia", 101376, True, a_operand_in_smem=True),
        Arch("sm90", "nvidia", 232448, True, a_operand_in_smem=True, all_stages=_warp_group_mma),  # H100: 227 KB
        # AMD (Triton 3.9, measured at the allocation pass): num_stages - 1 K/V buffers except at 4 stages (one),
        # and a K or V tile at one stage; the Q tile stays in registers in some configs, so it is not counted.
        Arch("gfx90a", "amd", 65536, True, chained_dot_stages=4),  # MI200: 64 KB LDS
        Arch("gfx942", "amd", 65536, True, chained_dot_stages=4),  # MI300
        Arch("interpreter", "cpu", None, False),
    )
}


MODEL_KNOBS = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")  # the knobs the bounds below read


def block_d(head_dim: int) -> int:
    """The kernel's padded head dimension: next power of two >= head_dim, at least 16."""
    return max(16, 1 << (int(head_dim) - 1).bit_length())


def kv_buffers(config: Mapping[str, Any], arch: Arch) -> int:
    """Shared-memory buffers of K (and as many of V) the pipeliner certainly keeps for `config` on `arch` with 2
    or more stages: all `num_stages` where the architecture's rule says so (`Arch.all_stages`), else
    num_stages - 1; one where the backend schedules the loop's two chained dots with single-buffered loads
    (`Arch.chained_dot_stages`); 0 where the pipeliner is not known to keep any (`Arch.pipeline_certain` off)."""
    stages = config["num_stages"]
    if stages < 2 or not arch.pipeline_certain:
        return 0
    if stages == arch.chained_dot_stages:
        return 1
    return stages if arch.all_stages is not None and arch.all_stages(config) else stages - 1


def smem_lower_bound(config: Mapping[str, Any], arch: Arch, *, head_dim: int, dtype_bytes: int = 2) -> int:
    """Bytes of shared memory the config needs at least (see the module docstring for the derivation)."""
    tile = config["BLOCK_N"] * block_d(head_dim) * dtype_bytes
    q = config["BLOCK_M"] * block_d(head_dim) * dtype_bytes if arch.a_operand_in_smem else 0
    if config["num_stages"] >= 2 and arch.pipeline_certain:
        return kv_buffers(config, arch) * 2 * tile + q
    if not arch.b_operand_in_smem:
        return q
    # One stage: the MMA's B operand (K, then V) from shared memory; with V loaded before the softmax
    # (PRE_LOAD_V), both at once where the warp-group MMA is used.
    both = config.get("PRE_LOAD_V", False) and arch.all_stages is not None and arch.all_stages(config)
    return (2 if both else 1) * tile + q


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
