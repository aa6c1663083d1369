"""The resource pre-filter: its lower bound, what it rejects per architecture, and its accuracy report."""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
import pytest

from raytune_attn.kernels.resources import (
    ARCHS,
    Prefilter,
    block_d,
    estimate_registers,
    smem_lower_bound,
)  # fmt: skip
from raytune_attn.tune.search.prefilter_report import prefilter_report
from raytune_attn.tune.search.space import load_space


def cfg(bm=128, bn=64, w=4, st=2):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": st}


def test_block_d():
    assert [block_d(d) for d in (8, 16, 64, 80, 128, 256)] == [16, 16, 64, 128, 128, 256]


def test_lower_bound_counts_pipeline_buffers():
    sm90, sm80 = ARCHS["sm90"], ARCHS["sm80"]
    # Warp-group MMA tiles (64+ rows, 4+ warps): all 4 buffers of K and V, each 128 x 128 x 2 bytes
    q = 128 * 128 * 2  # Hopper stages the Q tile in shared memory too
    assert smem_lower_bound(cfg(bn=128, st=4), sm90, head_dim=128) == 4 * 2 * 128 * 128 * 2 + q
    # 2 warps (no warp group): num_stages - 1 buffers
    assert smem_lower_bound(cfg(bn=128, w=2, st=4), sm90, head_dim=128) == 3 * 2 * 128 * 128 * 2 + q
    assert smem_lower_bound(cfg(bm=32, bn=32, st=4), sm90, head_dim=128) == 3 * 2 * 32 * 128 * 2 + 32 * 128 * 2
    assert smem_lower_bound(cfg(bn=64, st=1), sm90, head_dim=128) == 64 * 128 * 2 + q  # wgmma's B in smem
    assert smem_lower_bound({**cfg(bn=64, st=1), "PRE_LOAD_V": True}, sm90, head_dim=128) == 2 * 64 * 128 * 2 + q
    # Ampere: num_stages - 1 buffers whatever the tile, the Q tile and (one stage) a K or V tile beside them
    assert smem_lower_bound(cfg(bn=64, st=1), sm80, head_dim=128) == 64 * 128 * 2 + q
    assert smem_lower_bound(cfg(bn=64, st=2), sm80, head_dim=64, dtype_bytes=4) == 2 * 64 * 64 * 4 + 128 * 64 * 4
    assert smem_lower_bound(cfg(bn=64, st=4), sm80, head_dim=128) == 3 * 2 * 64 * 128 * 2 + q


def test_rejects_only_clearly_oversized_configs():
    h100 = Prefilter.for_arch("sm90", head_dim=128)
    assert not h100.accepts(cfg(bm=256, bn=256, st=4))
    assert "232448" in h100.reason(cfg(bm=256, bn=256, st=4))
    assert h100.accepts(cfg(bm=64, bn=128, st=4))  # 192 KB of K/V buffers + 16 KB of Q: may fit 227 KB
    assert not h100.accepts(cfg(bm=256, bn=128, st=4))  # + 64 KB of Q: cannot
    assert h100.accepts(cfg(bm=256, bn=256, st=1))
    a100 = Prefilter.for_arch("sm80", head_dim=128)
    assert not a100.accepts(cfg(bm=128, bn=128, st=4))  # 192 KB > 163 KB
    assert Prefilter.for_arch("sm90", head_dim=64).accepts(cfg(bm=128, bn=128, st=4))


def test_interpreter_rejects_nothing():
    pf = Prefilter.for_arch("interpreter", head_dim=256)
    assert all(pf.accepts(c) for c in load_space("cpu/interpreter").configs())


def test_amd_counts_one_kv_pair_at_four_stages():
    # gfx942, D=128 (docs/benchmarks/cross-compile/smem): 128x128 at 4 stages and 8 warps was allotted 65536 bytes of
    # LDS (one K/V pair), at 6 stages 327680 (five pairs); 256x256 at one stage 65536 (one tile, which fits).
    gfx942 = ARCHS["gfx942"]
    assert smem_lower_bound(cfg(bn=128, w=8, st=4), gfx942, head_dim=128) == 65536
    assert smem_lower_bound(cfg(bn=128, st=6), gfx942, head_dim=128) == 327680
    assert Prefilter.for_arch("gfx942", head_dim=128).accepts(cfg(bm=256, bn=256, st=1))


SURVEYS = sorted((Path(__file__).parents[1] / "docs" / "benchmarks" / "cross-compile" / "smem").glob("*.parquet"))
_VALIDATION_ARCH = {"cuda:80": "sm80", "cuda:90": "sm90", "hip:gfx942": "gfx942", "hip:gfx90a": "gfx90a"}


@pytest.mark.parametrize("path", SURVEYS, ids=[p.stem for p in SURVEYS])
def test_validation_agrees_with_the_compilers_shared_memory(path):
    """Against the shared memory Triton 3.9 allots each config of a space (benchmarks/smem_survey.py, for the
    space's target): the validation's figure is never above the compiler's (it refuses no config that fits), and
    is above the limit wherever the compiler's is (it refuses every config that cannot fit)."""
    from raytune_attn import validation

    table = pd.read_parquet(path)
    table = table[table["shared_bytes"].notna()]
    knobs = [c for c in table.columns if c not in ("target", "head_dim", "causal", "shared_bytes", "error",
                                                   "smem_estimate", "validation_need", "seconds")]
    assert len(table) > 0
    for row in table.to_dict("records"):
        arch = _VALIDATION_ARCH[row["target"]]
        config = {k: row[k] for k in knobs if not pd.isna(row[k])}
        need = validation.shared_memory_need(config, arch, head_dim=int(row["head_dim"]))
        real, limit = int(row["shared_bytes"]), ARCHS[arch].smem_bytes
        assert need <= real, (config, row["head_dim"], need, real)
        assert need > limit or real <= limit, (config, row["head_dim"], need, real)


def test_unknown_arch():
    with pytest.raises(ValueError, match="unknown arch"):
        Prefilter.for_arch("sm70")


def test_registers_estimate():
    # 128 x (128 + 64) fp32 values over 4 warps of 32 threads
    assert estimate_registers(cfg(bm=128, bn=64, w=4), head_dim=128) == 128 * 192 // 128


def _compile_table(limit: int, head_dim: int = 128) -> pd.DataFrame:
    """Outcomes of a compiler whose real need is the K/V buffers plus the Q tile plus 1 KB of scratch."""
    rows = []
    for bm, bn, w, st in itertools.product([16, 32, 64, 128, 256], [16, 32, 64, 128, 256], [2, 4, 8], [1, 2, 4, 6, 8]):
        if bm < bn:
            continue
        # Triton 3.9 on sm_90: all num_stages buffers for warp-group MMA tiles, one fewer otherwise
        buffers = st if bm >= 64 and w >= 4 else max(st - 1, 1)
        need = (buffers * 2 * bn + bm) * head_dim * 2 + 1024
        ok = need <= limit
        err = "" if ok else f"out of resource: shared memory, Required: {need}, Hardware limit: {limit}."
        rows.append({"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": st,
                     "status": "ok" if ok else "compile_error", "error": err})  # fmt: skip
    return pd.DataFrame(rows)


def test_report_against_a_compile_table():
    pf = Prefilter.for_arch("sm90", head_dim=128)
    table = _compile_table(232448)
    rep = prefilter_report(table, pf)
    assert rep["false_rejects"] == [] and rep["bound_above_required"] == []
    assert rep["failed"] == rep["failed_smem"] > 0
    assert 0 < rep["caught"] <= rep["failed_smem"]
    assert rep["caught"] + len(rep["missed"]) == rep["failed_smem"]
    assert rep["rejected"] == rep["caught"]


def test_report_flags_a_false_reject():
    pf = Prefilter.for_arch("sm90", head_dim=128)
    table = _compile_table(232448)
    big = (table.BLOCK_N == 256) & (table.num_stages == 8)
    table.loc[big, "status"] = "ok"  # pretend these compiled: the filter rejected them wrongly
    rep = prefilter_report(table, pf)
    assert len(rep["false_rejects"]) == int(big.sum()) > 0


def test_report_needs_status():
    with pytest.raises(ValueError, match="status"):
        prefilter_report(pd.DataFrame({"BLOCK_M": [16]}), Prefilter.for_arch("sm90"))


RECORDED = sorted((Path(__file__).parent / "data").glob("landscape_h100_*.parquet"))


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_never_rejects_a_config_that_compiled_on_h100(path):
    """Against every study config really compiled on an H100: no false reject, the bound under the real usage."""
    table = pd.read_parquet(path)
    head_dim = int(table["head_dim"].iloc[0]) if "head_dim" in table.columns else 128
    rep = prefilter_report(table, Prefilter.for_arch("sm90", head_dim=head_dim))
    assert rep["false_rejects"] == []
    assert rep["bound_above_required"] == []
    assert rep["caught"] > 0 and rep["caught"] / max(rep["failed_smem"], 1) >= 0.5


# Shared memory of configs with the Hopper knobs of issue #7, compiled with Triton 3.6 on an H200 (bf16):
# (head_dim, BLOCK_M, BLOCK_N, num_warps, num_stages, extra knobs, shared bytes of the compiled kernel).
HOPPER_KNOBS_MEASURED = [
    (128, 128, 64, 8, 1, {"WARP_SPECIALIZE": True}, 49152),
    (128, 128, 64, 8, 1, {"WARP_SPECIALIZE": True, "USE_TMA": True}, 49160),
    (128, 128, 64, 8, 2, {"WARP_SPECIALIZE": True}, 98304),
    (128, 128, 64, 8, 2, {"WARP_SPECIALIZE": True, "USE_TMA": True}, 98336),
    (128, 128, 64, 8, 2, {"WARP_SPECIALIZE": True, "USE_TMA": True, "maxnreg": 128}, 98336),
    (128, 128, 64, 8, 3, {"WARP_SPECIALIZE": True}, 131072),
    (128, 128, 64, 8, 3, {"WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False}, 131128),
    (128, 128, 128, 8, 2, {"WARP_SPECIALIZE": True}, 163840),
    (128, 128, 128, 8, 2, {"WARP_SPECIALIZE": True, "USE_TMA": True}, 164864),
    (128, 128, 64, 8, 2, {"maxnreg": 168}, 98304),
    (128, 128, 64, 8, 2, {"PERSISTENT": True}, 98304),
    (128, 128, 64, 8, 2, {"PERSISTENT": True, "REVERSE_M": True, "USE_TMA": True}, 98336),
    (128, 128, 64, 8, 2, {"PERSISTENT": True, "WARP_SPECIALIZE": True, "USE_TMA": True}, 98336),
    (64, 128, 64, 4, 2, {"PERSISTENT": True, "REVERSE_M": True}, 49152),
    (64, 128, 64, 8, 3, {"WARP_SPECIALIZE": True, "USE_TMA": True}, 66560),
    # Warp specialized as the pass takes it (4 warps, one key loop; compiled for sm_90 with Triton 3.6, no GPU):
    # the pass's producer/consumer buffers and barriers take more than the 8-warp configs above.
    (64, 128, 64, 4, 2, {"WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False}, 65824),
    (128, 128, 64, 4, 2, {"WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False}, 114976),
    (256, 128, 64, 4, 2, {"WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False}, 229664),
    (128, 128, 64, 4, 2, {"WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False, "PERSISTENT": True}, 147752),
]


@pytest.mark.parametrize("row", HOPPER_KNOBS_MEASURED, ids=lambda r: "-".join(map(str, r[:5])) + "-" + "-".join(r[5]))
def test_bound_holds_for_the_hopper_knobs(row):
    head_dim, bm, bn, w, st, extra, shared = row
    c = {**cfg(bm, bn, w, st), **extra}
    assert smem_lower_bound(c, ARCHS["sm90"], head_dim=head_dim) <= shared
    assert Prefilter.for_arch("sm90", head_dim=head_dim).accepts(c)


def test_new_knobs_leave_the_bound_unchanged():
    base = cfg(bm=128, bn=128, st=4)
    for extra in ({"WARP_SPECIALIZE": True}, {"PERSISTENT": True, "REVERSE_M": True}, {"maxnreg": 232}):
        for arch in ("sm80", "sm90", "gfx942"):
            assert smem_lower_bound({**base, **extra}, ARCHS[arch], head_dim=128) == smem_lower_bound(
                base, ARCHS[arch], head_dim=128)


@pytest.mark.slow
def test_sm90_space_rejections_only_on_shared_memory():
    # Every sm90 config the pre-filter rejects would be rejected without the new knobs too.
    pf = Prefilter.for_arch("sm90", head_dim=128)
    for c in load_space("nvidia/sm90").configs():
        if not pf.accepts(c):
            assert not pf.accepts({k: c[k] for k in ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")})
