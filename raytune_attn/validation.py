"""Whether a config can run a problem: the one place that decides it, for the API, the kernel, the tuner and the
artifact. Every refusal is an `InvalidConfig` naming the reason.

- `check(config, head_dim=..., vendor=..., arch=..., dtype=...)`: without tensors (an artifact's entries, the
  runtime's table, a search's candidates): the knob values and the rules among them (`config.validate_config`)
  and, for an architecture, what it can hold: shared memory (`fits`) and tensor descriptors. Returns the complete
  config (defaults filled in).
- `Screen`: `check` for one architecture and problem as a search's pre-filter (`accepts`, `reason`).
- `prepare(config, q, k, v)`: before the first launch on these tensors (`raytune_attn.attention`, the tuner's
  workloads): `check` for the tensors' device, against that device's real shared-memory limit, and the tensors'
  alignment where the config reads them through tensor descriptors. Callers cache its answer per config and
  shapes; `check_tma_alignment` is the part that depends on base addresses.
- `check_backend(...)`: what this Triton and this backend can honour; the kernel asks at launch.
- `check_paged(config, head_dim=..., group=..., ...)`: the paged-KV kernel's configs (`raytune_attn.paged_attention`,
  knobs in `kernels.paged_config.PAGED_KNOBS`). A config holding NUM_SEGMENTS is the paged kernel's: `check` and
  `Screen` judge it by these rules, `prepare` (the dense and varlen kernel's) refuses it.

The shared-memory model is the kernel's (`raytune_attn.kernels.resources`, a lower bound that never refuses a
config that compiles, calibrated against the compiler's own figure: docs/cross-compile.md); on an architecture it
does not model, one K tile and one V tile, the operands of the two matmuls, are counted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from raytune_attn.config import InvalidConfig, validate_config

if TYPE_CHECKING:
    import torch

# torch, Triton and the kernel's shared-memory model load where a check needs them: an artifact's checks (the
# tuner's export, the runtime's load) need none of them.

__all__ = ["InvalidConfig", "Screen", "check", "check_backend", "check_paged", "check_tma_alignment", "fits",
           "is_paged", "prepare", "shared_memory_need"]


def _dtype_bytes(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


def _arch_vendor(arch: str) -> str:
    if arch == "interpreter":
        return "cpu"
    return "amd" if arch.startswith("gfx") else "nvidia"


def shared_memory_need(config: Mapping[str, Any], arch: str, *, head_dim: int, dtype_bytes: int = 2) -> int:
    """Bytes of shared memory `config` needs at least on `arch` (an architecture name such as "sm90"): the kernel's
    lower bound where `kernels.resources` models the architecture, else one K and one V tile. (Not both where it
    is modelled: on AMD one stage keeps a single K or V tile, 64 KB for 256 x 256 at D=128, which fits.)"""
    from raytune_attn.kernels import resources  # with its model, only when a limit is to be checked

    kv = 2 * config["BLOCK_N"] * resources.block_d(head_dim) * dtype_bytes
    model = resources.ARCHS.get(arch)
    if model is None:
        return kv
    return resources.smem_lower_bound(config, model, head_dim=head_dim, dtype_bytes=dtype_bytes)


def fits(config: Mapping[str, Any], arch: str, limit: int | None, *, head_dim: int, dtype_bytes: int = 2) -> None:
    """Raise InvalidConfig if `config` (complete) cannot fit `limit` bytes of shared memory per block on `arch`."""
    if not limit:
        return
    need = shared_memory_need(config, arch, head_dim=head_dim, dtype_bytes=dtype_bytes)
    if need > limit:
        raise InvalidConfig(
            f"BLOCK_M={config['BLOCK_M']} BLOCK_N={config['BLOCK_N']} num_stages={config['num_stages']} with head "
            f"dim {head_dim}: needs at least {need} bytes of shared memory, {arch} has {limit}"
        )


def _tma_on_arch(config: Mapping[str, Any], arch: str) -> None:
    if not config["USE_TMA"]:
        return
    older = arch.startswith("sm") and arch[2:].isdigit() and int(arch[2:]) < 90
    if older or arch.startswith("gfx"):
        raise InvalidConfig(f"USE_TMA needs an NVIDIA GPU of compute capability 9.0 (Hopper) or newer, not {arch}")


def check(config: Mapping[str, Any], *, head_dim: int = 128, vendor: str | None = None, arch: str | None = None,
          dtype: str = "bfloat16", group: int = 1) -> dict[str, Any]:
    """The complete config if it can run a problem of `head_dim` and `dtype` on `vendor`'s GPUs ("nvidia", "amd",
    "cpu": the interpreter; default: `arch`'s vendor, else "cpu") of architecture `arch` (None: any); else raise
    InvalidConfig naming the reason. A paged config (`is_paged`) is judged by `check_paged`, `group` (Hq // Hkv)
    its GQA group."""
    if is_paged(config):
        return check_paged(config, head_dim=head_dim, group=group, vendor=vendor, arch=arch, dtype=dtype)
    if vendor is None:
        vendor = _arch_vendor(arch) if arch else "cpu"
    cfg = validate_config(config, head_dim=head_dim, vendor=vendor)
    if arch:
        from raytune_attn.kernels.resources import ARCHS

        model = ARCHS.get(arch)
        fits(cfg, arch, model.smem_bytes if model else None, head_dim=head_dim, dtype_bytes=_dtype_bytes(dtype))
        _tma_on_arch(cfg, arch)
    return cfg


@dataclass(frozen=True)
class Screen:
    """`check` for one architecture and problem, as a search's pre-filter: `accepts(config)`, `reason(config)`."""

    arch: str
    head_dim: int = 128
    dtype: str = "bfloat16"
    group: int = 1  # Hq // Hkv: the paged kernel's tiles must hold a whole GQA group

    @classmethod
    def for_problem(cls, arch: str, head_dim: int, dtype: str, group: int = 1) -> Screen:
        from raytune_attn.kernels.resources import ARCHS

        if arch not in ARCHS:
            raise ValueError(f"unknown arch {arch!r}; known: {', '.join(ARCHS)}")
        return cls(arch, head_dim, dtype, group)

    def reason(self, config: Mapping[str, Any]) -> str | None:
        """Why the config cannot run here, or None when it may."""
        return _screen_reason(tuple(sorted(config.items())), self.arch, self.head_dim, self.dtype, self.group)

    def accepts(self, config: Mapping[str, Any]) -> bool:
        return self.reason(config) is None


@functools.lru_cache(maxsize=1 << 16)
def _screen_reason(items: tuple, arch: str, head_dim: int, dtype: str, group: int = 1) -> str | None:
    # Cached: the searches of one sweep screen the same space once per problem, and share head dims and dtypes.
    try:
        check(dict(items), head_dim=head_dim, arch=arch, dtype=dtype, group=group)
    except InvalidConfig as e:
        return str(e)
    return None


# ------------------------------------------------------------------------------------------ on tensors


@dataclass(frozen=True)
class _Device:
    vendor: str  # "nvidia", "amd" or "cpu" (tensors on the host: the interpreter)
    arch: str
    smem_bytes: int | None  # per block, opt-in; None: no limit
    capability: tuple[int, int] | None


_HOST = _Device("cpu", "interpreter", None, None)


@functools.lru_cache(maxsize=16)
def _gpu(index: int) -> _Device:
    import torch

    props = torch.cuda.get_device_properties(index)
    smem = getattr(props, "shared_memory_per_block_optin", 0) or getattr(props, "shared_memory_per_block", 0)
    if torch.version.hip:
        return _Device("amd", props.gcnArchName.split(":")[0], smem or None, None)
    cap = torch.cuda.get_device_capability(index)
    return _Device("nvidia", f"sm{cap[0]}{cap[1]}", smem or None, cap)


def _device(t: torch.Tensor) -> _Device:
    if not t.is_cuda:
        return _HOST
    if t.device.index is None:
        import torch

        return _gpu(torch.cuda.current_device())
    return _gpu(t.device.index)


def prepare(config: Mapping[str, Any], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict[str, Any]:
    """The complete config if it can run on these tensors (their device, head dim and dtype, and their alignment
    where it reads them through tensor descriptors); else raise InvalidConfig naming the reason."""
    import triton
    import triton.language as tl

    if is_paged(config):
        raise InvalidConfig("NUM_SEGMENTS is a knob of the paged kernel (raytune_attn.paged_attention), not of "
                            "attention / varlen_attention")
    dev = _device(q)
    head_dim = q.shape[-1]
    cfg = validate_config(config, head_dim=head_dim, vendor=dev.vendor)
    fits(cfg, dev.arch, dev.smem_bytes, head_dim=head_dim, dtype_bytes=q.element_size())
    if cfg["USE_TMA"]:
        if not hasattr(tl, "make_tensor_descriptor"):
            raise InvalidConfig(f"USE_TMA needs tensor descriptors, which Triton {triton.__version__} lacks")
        if dev.vendor == "amd" or (dev.capability is not None and dev.capability < (9, 0)):
            raise InvalidConfig("USE_TMA needs an NVIDIA GPU of compute capability 9.0 (Hopper) or newer")
        check_tma_alignment(q, k, v)
    return cfg


def check_tma_alignment(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """The copy engine moves 16-byte-aligned rows: every row stride and base address of k and v must be 16-byte
    aligned (base addresses change from call to call: callers that cache `prepare` ask this on every call)."""
    for name, t in (("k", k), ("v", v)):
        row_stride = t.stride(-3) if t.dim() == 3 else t.stride(-2)
        head_stride = t.stride(-2) if t.dim() == 3 else t.stride(1)
        bad = [s for s in (row_stride, head_stride) if (s * t.element_size()) % 16]
        if bad or t.data_ptr() % 16 or (t.shape[-1] * t.element_size()) % 16:
            raise InvalidConfig(
                f"USE_TMA needs 16-byte aligned rows of {name}: head dim {t.shape[-1]} x {t.element_size()} "
                f"bytes and strides {tuple(t.stride())} do not all qualify"
            )


def check_backend(config: Mapping[str, Any], q: torch.Tensor, *, interpreting: bool, has_warp_specialize: bool,
                  launch_options: Callable[[], frozenset]) -> None:
    """Refuse, with the reason, the knobs this Triton or this backend cannot honour (rather than crash in the
    compiler or silently ignore them). The kernel module passes what it knows of its Triton: whether
    `tl.range` takes `warp_specialize`, and the NVIDIA backend's launch options."""
    if config.get("WARP_SPECIALIZE") and not has_warp_specialize:
        import triton

        raise InvalidConfig(f"WARP_SPECIALIZE needs tl.range(warp_specialize=...), which Triton {triton.__version__} "
                            "lacks")
    if config.get("maxnreg") and not interpreting:  # (the imports below are dictionary lookups once loaded)
        import torch
        import triton

        if torch.version.hip:
            raise InvalidConfig("maxnreg is an NVIDIA launch option; the HIP backend has none")
        if q.is_cuda and "maxnreg" not in launch_options():
            raise InvalidConfig(f"maxnreg is not a launch option of Triton {triton.__version__}'s NVIDIA backend")


# ------------------------------------------------------------------------------------------ the paged kernel

_PAGED_TILES = (16, 32, 64, 128, 256)  # tl.dot needs every dimension >= 16 and powers of two
_PAGED_SEGMENTS = (1, 2, 4, 8, 16, 32, 64)  # the reduce loads all segments of a row as one power-of-two vector


def is_paged(config: Any) -> bool:
    """Whether `config` is the paged kernel's: it sets NUM_SEGMENTS (split-KV), a knob no other kernel has."""
    return isinstance(config, Mapping) and "NUM_SEGMENTS" in config


def check_paged(config: Mapping[str, Any], *, head_dim: int = 128, group: int = 1, vendor: str | None = None,
                arch: str | None = None, dtype: str = "bfloat16") -> dict[str, Any]:
    """The complete paged config (`kernels.paged_config.default_paged_config` filling what is not given) if the
    paged kernel can run it for a problem of `head_dim`, GQA `group` (Hq // Hkv) and `dtype` on `arch`; else
    raise InvalidConfig naming the knob. The kernel has no vendor-only knob, so `vendor` refuses nothing."""
    from raytune_attn.kernels.paged_config import PAGED_KNOBS, default_paged_config

    if not isinstance(config, Mapping):
        raise InvalidConfig(f"config must be a dict of knob values, got {type(config).__name__}")
    unknown = sorted(set(config) - set(PAGED_KNOBS))
    if unknown:
        raise InvalidConfig(f"unknown paged knob(s) {unknown}; known knobs are {sorted(PAGED_KNOBS)}")
    out = default_paged_config(head_dim=head_dim, group=group)
    for name, value in config.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidConfig(f"knob {name} must be an integer, got {value!r}")
        out[name] = value
    for name in ("BLOCK_M", "BLOCK_N"):
        if out[name] not in _PAGED_TILES:
            raise InvalidConfig(f"{name}={out[name]} must be one of {_PAGED_TILES} (tl.dot needs >= 16, powers of 2)")
    if out["BLOCK_M"] < group:
        raise InvalidConfig(f"BLOCK_M={out['BLOCK_M']} is smaller than the GQA group ({group} query heads per KV "
                            "head): a tile must hold every query head of its KV head")
    if out["NUM_SEGMENTS"] not in _PAGED_SEGMENTS:
        raise InvalidConfig(f"NUM_SEGMENTS={out['NUM_SEGMENTS']} must be one of {_PAGED_SEGMENTS}")
    if out["num_warps"] not in (1, 2, 4, 8, 16):
        raise InvalidConfig(f"num_warps={out['num_warps']} must be a power of two from 1 to 16")
    if not 1 <= out["num_stages"] <= 8:
        raise InvalidConfig(f"num_stages={out['num_stages']} must be between 1 and 8")
    if arch:
        from raytune_attn.kernels import resources

        model = resources.ARCHS.get(arch)
        # One K and one V tile at least, as for the dense kernel (the paged kernel has no model of its own).
        need = 2 * out["BLOCK_N"] * resources.block_d(head_dim) * _dtype_bytes(dtype)
        if model and model.smem_bytes and need > model.smem_bytes:
            raise InvalidConfig(f"BLOCK_N={out['BLOCK_N']} with head dim {head_dim}: needs at least {need} bytes "
                                f"of shared memory, {arch} has {model.smem_bytes}")
    return out
