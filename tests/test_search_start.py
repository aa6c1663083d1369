"""Where the GP's search starts: the length-aware default config (config.default_config) of the problem.

Short sequences start from tiles no taller than the sequences; replayed on the H200's exhaustive Llama-prefill
landscapes (docs/search.md) this is what lets the GP reach the 16- and 64-token keys' best configs in budget."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from raytune_attn.config import default_config
from raytune_attn.tune.search import make_searcher
from raytune_attn.tune.search.gp import warp_specialized
from raytune_attn.tune.search.landscape import load_landscape
from raytune_attn.tune.search.replay import run_searcher
from raytune_attn.tune.search.space import load_space, parse_space

H200 = Path(__file__).parents[1] / "tests/data/h200/llama_exhaustive_x4_nosync.parquet"
W16 = Path(__file__).parents[1] / "tests/data/h200/w16_landscape.parquet"
SM90_YAML = Path(__file__).parents[1] / "search_spaces/nvidia/sm90.yaml"
D256 = Path(__file__).parents[1] / "tests/data/h200/d256_landscape.parquet"
PARAMS = ["BLOCK_M", "BLOCK_N", "PRE_LOAD_V", "num_warps", "num_stages"]


def _first(space, **kw):
    return make_searcher("gp", space, seed=0, head_dim=128, **kw).suggest("t0")


def test_short_sequences_start_from_short_tiles_and_long_ones_from_the_plain_default():
    space = load_space("nvidia/sm90_study")
    plain = _first(space)
    assert _first(space, seqlen_q=4096, seqlen_k=4096) == plain
    short = _first(space, seqlen_q=16, seqlen_k=16)
    want = default_config(128, 16, 16)
    assert {k: short[k] for k in PARAMS} == {k: want[k] for k in PARAMS} and short["BLOCK_M"] == 16


def test_a_start_outside_the_space_snaps_to_the_nearest_candidate():
    space = load_space("nvidia/sm90_study")  # BLOCK_M >= BLOCK_N: a 16-row, 64-column start is not in it
    cfg = _first(space, seqlen_q=16, seqlen_k=4096)
    # Nearest in the GP's inputs (log2 of the tile sizes): 32 x 32 is one step in each, 16 x 16 two in one.
    assert space.contains(cfg) and (cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["num_warps"]) == (32, 32, 2)


def test_length_aware_start_reaches_the_16_token_keys_best_in_budget():
    key = "varlen-b128-hq32-hkv8-sq16-sk16-d128-causal-bfloat16"
    land = load_landscape(H200, params=PARAMS, select={"problem_key": key})
    evals = {}
    for name, opts in (("plain", {}), ("length", {"seqlen_q": 16, "seqlen_k": 16})):
        runs = [run_searcher(make_searcher("gp", land.space, seed=s, head_dim=128, **opts), land, 30)
                for s in range(2)]
        evals[name] = np.median([r.evals_to(0.98 * land.best, 30) for r in runs])
    assert evals["length"] <= 5 < evals["plain"]


def test_the_screening_also_takes_the_coupled_moves_along_each_derived_feature():
    space = load_space("nvidia/sm90_study")
    design = make_searcher("gp", space, seed=0, head_dim=128, seqlen_q=1024, seqlen_k=1024).design_configs()
    tiles = [(c["BLOCK_M"], c["BLOCK_N"], c["num_warps"], c["num_stages"]) for c in design]
    assert tiles[0] == (128, 64, 8, 2)  # the default, then its one-knob neighbours (PRE_LOAD_V flipped among them)
    # 16 rows per warp kept (128/8 -> 64/4; 256 rows would need 16 warps), 128 K/V rows in flight kept (64x2 ->
    # 32x4 and 128x1): the moves that one-knob screening misses.
    assert {(64, 64, 4, 2), (128, 32, 8, 4), (128, 128, 8, 1)} <= set(tiles)
    plain = make_searcher("gp", space, seed=0, head_dim=128, seqlen_q=1024, seqlen_k=1024, screen_coupled=False)
    assert len(design) == len(plain.design_configs()) + 3
    assert not {(64, 64, 4, 2), (128, 32, 8, 4)} & {(c["BLOCK_M"], c["BLOCK_N"], c["num_warps"], c["num_stages"])
                                                    for c in plain.design_configs()}


def test_coupled_screening_reaches_the_h200_b16_s1024_best_in_budget():
    # Its best (64 x 64, 4 warps, 2 stages) is one coupled move from the default; both one-knob moves are worse
    # than the start (0.76 and 0.83 of the best), and without the coupled screening no seed reached 98% in 30.
    key = "varlen-b16-hq32-hkv8-sq1024-sk1024-d128-causal-bfloat16"
    land = load_landscape(H200, params=PARAMS, select={"problem_key": key})
    evals = {}
    for coupled in (False, True):
        runs = [run_searcher(make_searcher("gp", land.space, seed=s, head_dim=128, seqlen_q=1024, seqlen_k=1024,
                                           screen_coupled=coupled, screen_scale=False), land, 30)
                for s in range(2)]
        evals[coupled] = max(r.evals_to(0.98 * land.best, 30) for r in runs)
    assert evals[True] <= 12 and evals[False] > 30


def _design_tiles(space, **kw) -> list[tuple]:
    design = make_searcher("gp", space, seed=0, **kw).design_configs()
    return [(c["BLOCK_M"], c["BLOCK_N"], c["num_warps"], c["num_stages"], c["USE_TMA"]) for c in design]


def _added_by(space, switch: str, **problem) -> int:
    """How many configs the design screens with `switch` on beyond those it screens with it off."""
    def size(**kw) -> int:
        return len(make_searcher("gp", space, seed=0, **problem, **kw).design_configs())
    return size() - size(**{switch: False})


def _evals_to_98(land, budget: int, **kw) -> int:
    """Evaluations to 98% of the landscape's best, the worse of seeds 0 and 1 (budget + 1: not reached)."""
    runs = [run_searcher(make_searcher("gp", land.space, seed=s, **kw), land, budget) for s in range(2)]
    return max(r.evals_to(0.98 * land.best, budget) for r in runs)


def test_the_screening_also_takes_the_scale_up_move_of_the_start():
    space = load_space("nvidia/sm90")
    problem = {"head_dim": 256, "seqlen_q": 4096, "seqlen_k": 4096}
    tiles = _design_tiles(space, **problem)
    assert tiles[0] == (64, 32, 4, 2, False)  # the D=256 default
    # Its tile twice as tall and wide with twice the warps, the other knobs as at the start; not the move down.
    assert (128, 64, 8, 2, False) in tiles and (32, 16, 2, 2, False) not in tiles
    plain = _design_tiles(space, screen_scale=False, **problem)
    assert len(tiles) == len(plain) + 1 and (128, 64, 8, 2, False) not in plain


@pytest.mark.parametrize("key", ["dense-b4-hq8-hkv8-sq4096-sk4096-d256-full-bfloat16",
                                 "dense-b2-hq8-hkv8-sq8192-sk8192-d256-causal-bfloat16"])
def test_scale_screening_reaches_the_d256_best_in_budget(key):
    # H200, 208 configs (tiles, warps, stages, TMA): the best (128 x 64, 8 warps, 2 stages) is one scale-up move from
    # the default (64 x 32, 4 warps), and every one- and two-knob step towards it measured 0.16-0.69 of the best
    # against the start's 0.77-0.83: without the move no search reached 98% within 18 (run 12's budget was 24).
    land = load_landscape(D256, select={"problem_key": key})
    sq = int(key.split("-sq")[1].split("-")[0])
    problem = {"head_dim": 256, "seqlen_q": sq, "seqlen_k": sq}
    assert _evals_to_98(land, 24, screen_scale=True, **problem) <= 15
    assert _evals_to_98(land, 24, screen_scale=False, **problem) > 18


@pytest.mark.parametrize("switch, head_dim, start, moved", [
    # Half the warps with TMA loads, from the D=128 start (8 warps, no TMA).
    ("screen_tma", 128, (128, 64, 8, 2, False), (128, 64, 4, 2, True)),
    # Twice the warps and one stage more, from the D=64 start (4 warps: 32 rows a warp, 2 stages).
    ("screen_more_warps", 64, (128, 64, 4, 2, False), (128, 64, 8, 3, False)),
])
def test_the_screening_takes_the_named_move_of_the_start(switch, head_dim, start, moved):
    space = load_space("nvidia/sm90")
    problem = {"head_dim": head_dim, "seqlen_q": 4096, "seqlen_k": 4096}
    tiles = _design_tiles(space, **problem)
    assert tiles[0] == start and moved in tiles
    assert _added_by(space, switch, **problem) == 1


def test_the_named_moves_are_left_out_where_they_do_not_apply():
    # No USE_TMA knob in the study space; the D=128 start has 8 warps already (16 rows a warp) and the D=256 one 64
    # rows with 4 warps (16 a warp).
    assert _added_by(load_space("nvidia/sm90_study"), "screen_tma", head_dim=128) == 0
    space = load_space("nvidia/sm90")
    assert [_added_by(space, "screen_more_warps", head_dim=d) for d in (128, 256)] == [0, 0]


def test_fewer_warps_with_tma_reaches_the_d128_best_in_budget():
    # H200, 76 configs: the best of D=128 full S=4096 (128 x 64, 4 warps, 2 stages, TMA) is two knobs from the
    # default (8 warps, no TMA), and each one-knob step measured worse than the default (4 warps alone spills).
    land = load_landscape(W16, select={"problem_key": "dense-b4-hq16-hkv16-sq4096-sk4096-d128-full-bfloat16"})
    problem = {"head_dim": 128, "seqlen_q": 4096, "seqlen_k": 4096}
    assert _evals_to_98(land, 24, screen_tma=True, **problem) <= 15
    assert _evals_to_98(land, 24, screen_tma=False, **problem) > 24


SHORT = Path(__file__).parents[1] / "tests/data/h200/short_landscape.parquet"


def test_the_screening_takes_the_short_causal_move_where_the_diagonal_wastes_an_eighth():
    space = load_space("nvidia/sm90")
    for d, start in ((128, (128, 64, 8, 2, False)), (64, (128, 64, 4, 2, False))):
        # Causal at 512 and 1024 tokens, 128-row tiles: the diagonal blocks waste 1/4 and 1/8 of the work. The move
        # halves the rows, keeps 16 rows a warp (4 warps, from 8 at D=128 and from 4 at D=64) and adds a stage.
        for s in (512, 1024):
            tiles = _design_tiles(space, head_dim=d, seqlen_q=s, seqlen_k=s, causal=True)
            assert tiles[0] == start and (64, 64, 4, 3, False) in tiles
            # Heavy-first where the space has the knob (sm90); the start and its other moves keep their order.
            design = make_searcher("gp", space, seed=0, head_dim=d, seqlen_q=s, seqlen_k=s,
                                   causal=True).design_configs()
            moved = [c for c in design
                     if (c["BLOCK_M"], c["BLOCK_N"], c["num_warps"], c["num_stages"]) == (64, 64, 4, 3)]
            assert [c["REVERSE_M"] for c in moved] == [True] and not design[0]["REVERSE_M"]
            assert _added_by(space, "screen_short_causal", head_dim=d, seqlen_q=s, seqlen_k=s, causal=True) == 1
        # Not when the waste is under 1/8 (2048 tokens), nor without a causal mask.
        for s, causal in ((2048, True), (512, False)):
            assert _added_by(space, "screen_short_causal", head_dim=d, seqlen_q=s, seqlen_k=s, causal=causal) == 0
        study = load_space("nvidia/sm90_study")  # no REVERSE_M knob: the move as it was
        assert (64, 64, 4, 4) in [(c["BLOCK_M"], c["BLOCK_N"], c["num_warps"], c["num_stages"]) for c in make_searcher(
            "gp", study, seed=0, head_dim=d, seqlen_q=512, seqlen_k=512, causal=True).design_configs()]


def test_short_causal_move_reaches_the_d128_causal_s512_best_in_budget():
    # H200, 456 configs (tiles, warps, stages, V preload, TMA, register cap): the best configs of D=128 causal S=512
    # (64 x 32, 4 warps, 2-3 stages) are 1.35x the start (128 x 64, 8 warps, 2 stages) and two moves from the short
    # causal move's config (64 x 64, 4 warps, 3 stages: 0.93 of the best).
    key = "dense-b32-hq16-hkv16-sq512-sk512-d128-causal-bfloat16"
    land = load_landscape(SHORT, select={"problem_key": key})
    problem = {"head_dim": 128, "seqlen_q": 512, "seqlen_k": 512, "causal": True}
    assert _evals_to_98(land, 24, **problem) <= 24
    assert _evals_to_98(land, 24, screen_short_causal=False, **problem) > 24


def _sm90_doc() -> dict:
    """The Hopper space file as parsed YAML, to vary before `parse_space`."""
    return yaml.safe_load(SM90_YAML.read_text())


def _form(cfg: dict) -> tuple:
    """(key block, persistent grid, one Q buffer, V preload) of a warp-specialized config."""
    return cfg["BLOCK_N"], cfg.get("PERSISTENT", False), cfg.get("ONE_Q_BUFFER", False), cfg["PRE_LOAD_V"]


def test_the_screening_takes_the_warp_specialized_layout_where_the_space_has_it():
    # FlashAttention-3's layout as Triton's Hopper pass builds it (128 rows, one warp group written, TMA, one key
    # loop, 2 stages) shares no knob value with the D=256 start (64 x 32, 4 warps, no TMA, split loop): screened,
    # with 64-key blocks at D=256 on the plain grid and on the persistent one with one Q buffer (the two-buffer
    # persistent form and 128-key blocks overflow shared memory there), 128 on the persistent grid below, V loaded
    # before the softmax.
    space = load_space("nvidia/sm90")
    for d, s, forms in ((256, 4096, {(64, False, False, True), (64, True, True, True)}),
                        (128, 4096, {(128, True, False, True)}), (64, 512, {(128, True, False, True)})):
        cfgs = make_searcher("gp", space, seed=0, head_dim=d, seqlen_q=s, seqlen_k=s).design_configs()
        ws = [c for c in cfgs if c["WARP_SPECIALIZE"]]
        assert {_form(w) for w in warp_specialized(d)} == forms
        assert {_form(c) for c in ws} == forms and len(ws) == len(forms)
        for want in warp_specialized(d):
            assert any({k: c[k] for k in want} == want for c in ws)
        assert _added_by(space, "screen_warp_specialized", head_dim=d, seqlen_q=s, seqlen_k=s) == len(forms)
    study = load_space("nvidia/sm90_study")  # no WARP_SPECIALIZE knob: nothing to add
    assert _added_by(study, "screen_warp_specialized", head_dim=256) == 0
    # A Hopper space without the one-Q-buffer knob (as before run 25) gets the D=256 plain-grid form only.
    doc = _sm90_doc()
    del doc["parameters"]["ONE_Q_BUFFER"]
    doc["constraints"] = [c for c in doc["constraints"] if "ONE_Q_BUFFER" not in c]
    cfgs = make_searcher("gp", parse_space(doc), seed=0, head_dim=256, seqlen_q=4096, seqlen_k=4096).design_configs()
    assert [_form(c) for c in cfgs if c["WARP_SPECIALIZE"]] == [(64, False, False, True)]


def test_the_warp_specialized_layout_goes_heavy_first_for_causal_problems():
    # Causal tiles differ in work: the layout is screened heavy-first (REVERSE_M) where the space has that config,
    # and without it where the space has none (here REVERSE_M is left with the value false only).
    sm90 = load_space("nvidia/sm90")
    doc = _sm90_doc()
    doc["parameters"]["REVERSE_M"] = [False]
    straight_only = parse_space(doc)
    for d, s in ((256, 4096), (128, 4096), (128, 512)):
        for space, causal, heavy_first in ((sm90, True, True), (sm90, False, False), (straight_only, True, False)):
            problem = {"head_dim": d, "seqlen_q": s, "seqlen_k": s, "causal": causal}
            cfgs = make_searcher("gp", space, seed=0, **problem).design_configs()
            ws = [c for c in cfgs if c["WARP_SPECIALIZE"]]
            forms = warp_specialized(d)
            assert len(ws) == len(forms)
            for want in forms:
                assert any({k: c[k] for k in want} == want for c in ws)
            assert all(c["REVERSE_M"] is heavy_first for c in ws)
            assert _added_by(space, "screen_warp_specialized", **problem) == len(forms)


def test_more_warps_deeper_reaches_the_d64_best_in_budget():
    # H200, 76 configs: the best of D=64 full S=4096 (128 x 64, 8 warps, 3 stages) is two knobs from the start
    # (4 warps, 2 stages), whose one-knob steps measured 0.87 (8 warps) and 0.93 (3 stages) of it.
    land = load_landscape(W16, select={"problem_key": "dense-b4-hq32-hkv32-sq4096-sk4096-d64-full-bfloat16"})
    problem = {"head_dim": 64, "seqlen_q": 4096, "seqlen_k": 4096}
    assert _evals_to_98(land, 24, **problem) <= 12
    assert _evals_to_98(land, 24, screen_more_warps=False, **problem) > 18
