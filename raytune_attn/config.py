"""Kernel configs: the knobs the tuner searches, their defaults, and the rules a config must obey.

A config is a plain dict of knob values, the same keys the search spaces (`search_spaces/*.yaml`) use.
Upper-case knobs are Triton constexprs of the kernel; lower-case knobs are launch options.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class InvalidConfig(ValueError):
    """A config that cannot run for a given problem (a kernel rule, a tile that cannot fit, a failed compile)."""


# Every knob the launcher understands, with its type and the values the kernel accepts.
# The search spaces choose subsets of these; `validate_config` enforces them.
KNOBS: dict[str, type] = {
    "BLOCK_M": int,  # query rows per program
    "BLOCK_N": int,  # key rows per inner-loop step
    "num_warps": int,
    "num_stages": int,  # software-pipelining depth of the key/value loop
    "PRE_LOAD_V": bool,  # issue the V load before the softmax instead of after it
    "SPLIT_MASK": bool,  # key loop split into unmasked full blocks and masked (causal diagonal, tail) blocks
    "USE_TMA": bool,  # tensor-descriptor (TMA on Hopper) loads of K and V instead of pointer loads
    # AMD-only launch options, passed through to the HIP backend.
    "waves_per_eu": int,
    "matrix_instr_nonkdim": int,
    "kpack": int,
    # Hopper-oriented knobs (issue #7), listed last so that the positions of the earlier knobs (results columns,
    # the custom ops' encoded configs) stay where they were. Off by default; see docs/kernel.md.
    "WARP_SPECIALIZE": bool,  # tl.range(..., warp_specialize=True) on the key loop: producer/consumer warp groups
    "PERSISTENT": bool,  # persistent grid: one program per resident slot, each looping over (m-block, head) tiles
    "REVERSE_M": bool,  # heavy-first tile order: last (causal: longest) query blocks scheduled first
    # NVIDIA-only launch option: cap on 32-bit registers per thread (ptx .maxnreg); 0 = no cap (compiler's choice).
    "maxnreg": int,
    # With WARP_SPECIALIZE and PERSISTENT: the persistent tile loop unpipelined, so Q gets one shared-memory buffer.
    "ONE_Q_BUFFER": bool,
    # The paged-KV kernel's split-KV segments (raytune_attn.paged_attention; kernels/paged_config.py): a config that
    # sets it is that kernel's, whose knobs are BLOCK_M, BLOCK_N, NUM_SEGMENTS, num_warps and num_stages.
    "NUM_SEGMENTS": int,
    # With PERSISTENT and REVERSE_M: the heavy-first order over groups of this many (sequence, head) pairs at a
    # time, so that a round of the persistent loop reads the K/V of a few heads, not of one head a program (0 = all).
    "LPT_GROUP": int,
    # With WARP_SPECIALIZE, causal problems: the diagonal band by a second launch (kernels/causal_band.py), so that
    # the warp-specialized key loop runs unmasked; a full mask has no band (the knob changes nothing there).
    "BAND_LAUNCH": bool,
}
AMD_ONLY_KNOBS = frozenset({"waves_per_eu", "matrix_instr_nonkdim", "kpack"})
NVIDIA_ONLY_KNOBS = frozenset({"maxnreg"})
CONSTEXPR_KNOBS = ("BLOCK_M", "BLOCK_N", "PRE_LOAD_V", "SPLIT_MASK", "USE_TMA", "WARP_SPECIALIZE", "PERSISTENT",
                   "REVERSE_M", "ONE_Q_BUFFER", "LPT_GROUP", "BAND_LAUNCH")

_POW2_BLOCKS = (16, 32, 64, 128, 256)
_LPT_GROUPS = (0, 1, 2, 4, 8, 16, 32, 64)


def default_config(head_dim: int = 128, max_seqlen_q: int | None = None,
                   max_seqlen_k: int | None = None) -> dict[str, Any]:
    """The documented default used when no config is given and no tuned artifact matches.

    Moderate tiles that fit every supported GPU's shared memory up to head dim 256 (64 x 256 x 2 bytes for each
    of K and V at 2 stages stays under Ampere's 164 KB): 128 x 64 up to head dim 128 (8 warps at 128, 4 below),
    64 x 32 with 4 warps above (16 query rows a warp). The Hopper-oriented knobs
    (warp specialization, persistent grid, heavy-first order, register cap) are off: the default kernel is the
    same one earlier results were measured with.

    With the problem's (maximum) sequence lengths, tiles are no taller than the sequences, rounded up to a power of
    two (at least 16): a 128-row tile over 16 query rows computes 8x the work it keeps. Warps follow the tile (16
    rows per warp, at least 2), and a key loop of one block gets 1 stage (nothing to pipeline): on short keys the
    plain default wastes most of its work (docs/benchmarks has the landscapes); keys of 256 tokens and more keep
    the plain default.
    """
    cfg = _plain_default(head_dim)
    if max_seqlen_q and _tile_for(max_seqlen_q) < cfg["BLOCK_M"]:
        cfg["BLOCK_M"] = _tile_for(max_seqlen_q)
        cfg["num_warps"] = min(cfg["num_warps"], max(2, cfg["BLOCK_M"] // 16))
    if max_seqlen_k:
        cfg["BLOCK_N"] = min(cfg["BLOCK_N"], _tile_for(max_seqlen_k))
        if max_seqlen_k <= cfg["BLOCK_N"]:
            cfg["num_stages"] = 1
    return cfg


def _tile_for(seqlen: int) -> int:
    return max(16, 1 << (int(seqlen) - 1).bit_length())


def _plain_default(head_dim: int) -> dict[str, Any]:
    big = head_dim > 128
    return {
        "BLOCK_M": 64 if big else 128,
        "BLOCK_N": 32 if big else 64,
        # 16 query rows per warp where the head is wide: at D=256 a 64-row tile with 8 warps runs far slower than
        # the same tile with 4 warps (docs/benchmarks).
        "num_warps": 4 if big or head_dim < 128 else 8,
        "num_stages": 2,
        "PRE_LOAD_V": False,
        "SPLIT_MASK": True,
        "USE_TMA": False,
        "WARP_SPECIALIZE": False,
        "PERSISTENT": False,
        "REVERSE_M": False,
        "maxnreg": 0,
        "ONE_Q_BUFFER": False,
        "LPT_GROUP": 0,
        "BAND_LAUNCH": False,
    }


def validate_config(config: Mapping[str, Any], *, head_dim: int = 128, vendor: str = "cpu") -> dict[str, Any]:
    """Return a complete config of the dense and varlen kernel (defaults filled in) or raise InvalidConfig naming
    the bad knob: the knob values and the rules among them. Whether a config can run a problem on a device (these
    rules, shared memory, tensor descriptors, the backend; the paged kernel's configs) is `raytune_attn.validation`'s
    to say; it calls this.

    `vendor` is "nvidia", "amd" or "cpu" (the Triton interpreter); AMD-only knobs are refused on NVIDIA and
    NVIDIA-only ones (maxnreg) on AMD.
    """
    if not isinstance(config, Mapping):
        raise InvalidConfig(f"config must be a dict of knob values, got {type(config).__name__}")
    if "NUM_SEGMENTS" in config:
        raise InvalidConfig("NUM_SEGMENTS is the paged kernel's knob: validation.check judges a paged config")
    out = _typed(config, head_dim)
    _check_ranges(out)
    _check_vendor(config, vendor)
    _check_couplings(out)
    return out


def _typed(config: Mapping[str, Any], head_dim: int) -> dict[str, Any]:
    """`config` over the default for `head_dim`, after refusing unknown knobs and values of the wrong type."""
    unknown = sorted(set(config) - set(KNOBS))
    if unknown:
        raise InvalidConfig(f"unknown knob(s) {unknown}; known knobs are {sorted(KNOBS)}")
    out = default_config(head_dim)
    for name, value in config.items():
        check_knob_type(name, value)
        out[name] = value
    return out


def check_knob_type(name: str, value: Any) -> None:
    """InvalidConfig unless `value` has knob `name`'s type (KNOBS)."""
    # bool is an int subclass: refuse True for an int knob and 1 for a bool knob, both are likely typos.
    if KNOBS[name] is bool:
        if not isinstance(value, bool):
            raise InvalidConfig(f"knob {name} must be true or false, got {value!r}")
    elif isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfig(f"knob {name} must be an integer, got {value!r}")


def _check_ranges(out: dict[str, Any]) -> None:
    """Each knob's own values."""
    for name in ("BLOCK_M", "BLOCK_N"):
        if out[name] not in _POW2_BLOCKS:
            raise InvalidConfig(f"{name}={out[name]} must be one of {_POW2_BLOCKS} (tl.dot needs >= 16, powers of 2)")
    if out["num_warps"] not in (1, 2, 4, 8, 16):
        raise InvalidConfig(f"num_warps={out['num_warps']} must be a power of two from 1 to 16")
    if not 1 <= out["num_stages"] <= 8:
        raise InvalidConfig(f"num_stages={out['num_stages']} must be between 1 and 8")
    if out["maxnreg"] and not 32 <= out["maxnreg"] <= 255:
        raise InvalidConfig(f"maxnreg={out['maxnreg']} must be 0 (no cap) or between 32 and 255")
    if out["LPT_GROUP"] not in _LPT_GROUPS:
        raise InvalidConfig(f"LPT_GROUP={out['LPT_GROUP']} must be one of {_LPT_GROUPS} (0 = one group of all heads)")
    if "waves_per_eu" in out and not 0 <= out["waves_per_eu"] <= 8:
        raise InvalidConfig(f"waves_per_eu={out['waves_per_eu']} must be between 0 and 8")
    if "matrix_instr_nonkdim" in out and out["matrix_instr_nonkdim"] not in (0, 16, 32):
        raise InvalidConfig(f"matrix_instr_nonkdim={out['matrix_instr_nonkdim']} must be 0, 16 or 32")
    if "kpack" in out and out["kpack"] not in (1, 2):
        raise InvalidConfig(f"kpack={out['kpack']} must be 1 or 2")


def _check_vendor(config: Mapping[str, Any], vendor: str) -> None:
    """Knobs of one vendor's backend, asked of the other's."""
    amd = AMD_ONLY_KNOBS & set(config)
    if amd and vendor == "nvidia":
        raise InvalidConfig(f"knob(s) {sorted(amd)} exist only on AMD GPUs")
    nv = sorted(name for name in NVIDIA_ONLY_KNOBS & set(config) if config[name] != 0)
    if nv and vendor == "amd":
        raise InvalidConfig(f"knob(s) {nv} exist only on NVIDIA GPUs")


def _check_couplings(out: dict[str, Any]) -> None:
    """The rules among knobs."""
    if out["maxnreg"] * out["num_warps"] * 32 > 65536:
        raise InvalidConfig(f"maxnreg={out['maxnreg']} x num_warps={out['num_warps']} x 32 threads exceeds the "
                            "65536 registers of a block")
    if out["WARP_SPECIALIZE"]:
        _check_warp_specialize(out)
    if out["ONE_Q_BUFFER"] and not (out["PERSISTENT"] and out["WARP_SPECIALIZE"]):
        # Elsewhere the tile loop's depth changes nothing (the other persistent forms compile to the same PTX): a
        # config with it would be a second name for one kernel, and a search would time it twice.
        raise InvalidConfig("ONE_Q_BUFFER applies to the persistent grid under warp specialization only: it needs "
                            "PERSISTENT and WARP_SPECIALIZE")
    if out["LPT_GROUP"] and not (out["PERSISTENT"] and out["REVERSE_M"]):
        # Only the persistent grid's heavy-first order has groups to form; elsewhere it would be a second name for
        # one kernel.
        raise InvalidConfig("LPT_GROUP orders the persistent grid's heavy-first tiles: it needs PERSISTENT and "
                            "REVERSE_M")
    if out["BAND_LAUNCH"] and not out["WARP_SPECIALIZE"]:
        # The split-loop forms already mask only the band's blocks: there a second launch would add work, not
        # take any away.
        raise InvalidConfig("BAND_LAUNCH takes the causal band out of the warp-specialized one-loop form: it needs "
                            "WARP_SPECIALIZE")


def _check_warp_specialize(out: dict[str, Any]) -> None:
    """What Triton's Hopper warp-specialization pass takes (docs/kernel.md)."""
    if out["num_warps"] % 4:
        raise InvalidConfig(f"WARP_SPECIALIZE needs num_warps a multiple of 4 (whole warp groups), got "
                            f"{out['num_warps']}")
    if not (out["USE_TMA"] and not out["SPLIT_MASK"]):
        # Triton's Hopper pass aborts the process (an LLVM assertion, not an exception) on a pointer load or on a
        # second key loop, so these are refused before they reach a compiler.
        raise InvalidConfig("WARP_SPECIALIZE needs USE_TMA (every load through a tensor descriptor) and SPLIT_MASK "
                            "off (one key loop)")
    if out["num_stages"] != 2:
        # A ring of 3 K/V buffers gave NaN outputs with Triton 3.6; 2 is the depth verified.
        raise InvalidConfig(f"WARP_SPECIALIZE is verified correct with num_stages=2 only (3 gave NaN outputs with "
                            f"Triton 3.6 on Hopper), got {out['num_stages']}")
