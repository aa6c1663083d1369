"""Where the GP's search starts: the priors of the space file (priors.py) for the problem.

The start is the kernel's default config for the problem (tiles no taller than the sequences), then its one-knob
and coupled neighbours and the file's moves. Each test of a move checks what the design screens and, on a
recorded landscape, that the move is what reaches the best configs in budget (docs/search.md has the numbers)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from raytune_attn.config import default_config
from raytune_attn.tune.search import make_searcher
from raytune_attn.tune.search.landscape import load_landscape
from raytune_attn.tune.search.priors import holds, problem_fields, start_config
from raytune_attn.tune.search.replay import run_searcher
from raytune_attn.tune.search.space import SPACES_DIR, load_space, parse_space

H200 = Path(__file__).parents[1] / "tests/data/h200/llama_exhaustive_x4_nosync.parquet"
W16 = Path(__file__).parents[1] / "tests/data/h200/w16_landscape.parquet"
D256 = Path(__file__).parents[1] / "tests/data/h200/d256_landscape.parquet"
SHORT = Path(__file__).parents[1] / "tests/data/h200/short_landscape.parquet"
PARAMS = ["BLOCK_M", "BLOCK_N", "PRE_LOAD_V", "num_warps", "num_stages"]
WARP_SPECIALIZED = ("warp specialized, wide keys, persistent", "warp specialized",
                    "warp specialized, persistent, one Q buffer",
                    "warp specialized, wide keys, persistent, heavy-first by pairs of heads",
                    "warp specialized, wide keys, heavy-first grid",
                    "warp specialized, persistent, one Q buffer, heavy-first by pairs of heads",
                    "warp specialized, tall tiles, persistent",
                    "warp specialized, tall tiles, band launch")  # fmt: skip


def _gp(space, seed: int = 0, **problem):
    return make_searcher("gp", space, seed=seed, problem=problem)


def _without(space, *moves: str):
    """The space with its priors less the named moves."""
    return space.with_priors(space.priors.without(*moves))


def _first(space, **kw):
    return _gp(space, head_dim=128, **kw).suggest("t0")


@pytest.mark.parametrize("name", ["nvidia/sm90", "nvidia/sm90_study", "nvidia/sm80", "amd/gfx90a", "amd/gfx942"])
def test_the_start_is_the_kernels_default_config_for_the_problem(name):
    # The start entries of every GPU space file reproduce config.default_config, the length-aware default.
    space = load_space(name)
    lengths = [None, 1, 16, 17, 32, 33, 64, 65, 128, 512, 4096]
    for d in (32, 64, 96, 128, 192, 256):
        for sq in lengths:
            for sk in lengths:
                want = default_config(d, sq, sk)
                cfg = start_config(space.priors, space.values,
                                   problem_fields({"head_dim": d, "seqlen_q": sq, "seqlen_k": sk}))
                assert cfg == {k: want.get(k, space.values[k][0]) for k in space.names}, (d, sq, sk)


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


def _closest_pair(X: np.ndarray) -> float:
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    return float(d2[np.triu_indices(len(X), 1)].min())


def test_without_priors_the_design_is_a_spread_out_latin_hypercube():
    from raytune_attn.tune.search._design import Design

    space = load_space("nvidia/sm90_study")
    s = make_searcher("gp", space, seed=0, problem={"head_dim": 128}, priors=False)
    n = max(s.n_initial, min(s._design_min, len(s.candidates) // 45))
    assert len(set(s._design)) == len(s._design) == n
    assert s._design[:6] != _gp(space, head_dim=128)._design[:6]
    multi = sum(len(p.values) > 1 for p in space.params)
    assert len(s._pairs) == multi * (multi - 1) // 2  # no file names the coupled knobs: every pair is tried
    # Maximin: the closest two design points are at least as far apart as in a typical single Latin hypercube.
    d = Design(space, s.candidates, s._index, s._cat, s._X, s.encoding.transform)
    single = [_closest_pair(s._X[d._latin_hypercube([], n, np.random.default_rng(k))]) for k in range(20)]
    assert _closest_pair(s._X[s._design]) >= np.median(single)


def test_conditions_on_unknown_problem_fields_do_not_hold():
    problem = problem_fields({"head_dim": 128})
    assert problem["seqlen_q"] is None and problem["causal"] is None
    move = next(m for m in load_space("nvidia/sm90").priors.moves if m.name == "short causal")
    assert not holds(move.when, {**problem, "BLOCK_M": 128})
    assert holds(move.when, {**problem, "BLOCK_M": 128, "seqlen_q": 512, "causal": True})
    with pytest.raises(ValueError, match="unknown problem field"):
        problem_fields({"head_dims": 128})


@pytest.mark.slow
def test_length_aware_start_reaches_the_16_token_keys_best_in_budget():
    key = "varlen-b128-hq32-hkv8-sq16-sk16-d128-causal-bfloat16"
    land = load_landscape(H200, params=PARAMS, select={"problem_key": key})
    evals = {}
    for name, opts in (("plain", {}), ("length", {"seqlen_q": 16, "seqlen_k": 16})):
        runs = [run_searcher(_gp(land.space, s, head_dim=128, **opts), land, 30) for s in range(2)]
        evals[name] = np.median([r.evals_to(0.98 * land.best, 30) for r in runs])
    assert evals["length"] <= 5 < evals["plain"]


def _tiles(configs) -> list[tuple]:
    return [(c["BLOCK_M"], c["BLOCK_N"], c["num_warps"], c["num_stages"]) for c in configs]


def test_the_screening_also_takes_the_coupled_moves_along_each_pair():
    space = load_space("nvidia/sm90_study")
    design = _gp(space, head_dim=128, seqlen_q=1024, seqlen_k=1024).design_configs()
    tiles = _tiles(design)
    assert tiles[0] == (128, 64, 8, 2)  # the default, then its one-knob neighbours (PRE_LOAD_V flipped among them)
    # 16 rows per warp kept (128/8 -> 64/4; 256 rows would need 16 warps), 128 K/V rows in flight kept (64x2 ->
    # 32x4 and 128x1): the moves that one-knob screening misses.
    assert {(64, 64, 4, 2), (128, 32, 8, 4), (128, 128, 8, 1)} <= set(tiles)
    uncoupled = space.with_priors(dataclasses.replace(space.priors, coupled=()))
    plain = _gp(uncoupled, head_dim=128, seqlen_q=1024, seqlen_k=1024).design_configs()
    assert len(design) == len(plain) + 3
    assert not {(64, 64, 4, 2), (128, 32, 8, 4)} & set(_tiles(plain))


@pytest.mark.slow
def test_coupled_screening_reaches_the_h200_b16_s1024_best_in_budget():
    # Its best (64 x 64, 4 warps, 2 stages) is one coupled move from the default; both one-knob moves are worse
    # than the start (0.76 and 0.83 of the best), and without the coupled pairs no seed reached 98% in 30.
    key = "varlen-b16-hq32-hkv8-sq1024-sk1024-d128-causal-bfloat16"
    land = load_landscape(H200, params=PARAMS, select={"problem_key": key})
    space = _without(land.space, "scale up")
    evals = {}
    for coupled in (False, True):
        sp = space if coupled else space.with_priors(dataclasses.replace(space.priors, coupled=()))
        runs = [run_searcher(_gp(sp, s, head_dim=128, seqlen_q=1024, seqlen_k=1024), land, 30) for s in range(2)]
        evals[coupled] = max(r.evals_to(0.98 * land.best, 30) for r in runs)
    assert evals[True] <= 12 and evals[False] > 30


def _design_tiles(space, **problem) -> list[tuple]:
    design = _gp(space, **problem).design_configs()
    return [(c["BLOCK_M"], c["BLOCK_N"], c["num_warps"], c["num_stages"], c["USE_TMA"]) for c in design]


def _added_by(space, *moves: str, **problem) -> int:
    """How many configs the design screens with the named moves beyond those it screens without them."""
    return len(_gp(space, **problem).design_configs()) - len(_gp(_without(space, *moves), **problem).design_configs())


def _evals_to_98(land, budget: int, space=None, **problem) -> int:
    """Evaluations to 98% of the landscape's best, the worse of seeds 0 and 1 (budget + 1: not reached)."""
    runs = [run_searcher(_gp(space or land.space, s, **problem), land, budget) for s in range(2)]
    return max(r.evals_to(0.98 * land.best, budget) for r in runs)


@pytest.mark.slow
def test_the_screening_also_takes_the_scale_up_move_of_the_start():
    space = load_space("nvidia/sm90")
    problem = {"head_dim": 256, "seqlen_q": 4096, "seqlen_k": 4096}
    tiles = _design_tiles(space, **problem)
    assert tiles[0] == (64, 32, 4, 2, False)  # the D=256 default
    # Its tile twice as tall and wide with twice the warps, the other knobs as at the start; not the move down.
    assert (128, 64, 8, 2, False) in tiles and (32, 16, 2, 2, False) not in tiles
    plain = _design_tiles(_without(space, "scale up"), **problem)
    assert len(tiles) == len(plain) + 1 and (128, 64, 8, 2, False) not in plain


@pytest.mark.parametrize("key", ["dense-b4-hq8-hkv8-sq4096-sk4096-d256-full-bfloat16",
                                 "dense-b2-hq8-hkv8-sq8192-sk8192-d256-causal-bfloat16"])
@pytest.mark.slow
def test_scale_screening_reaches_the_d256_best_in_budget(key):
    # 208 configs (tiles, warps, stages, TMA): the best (128 x 64, 8 warps, 2 stages) is one scale-up move from the
    # default (64 x 32, 4 warps), and every one- and two-knob step towards it measured 0.16-0.69 of the best against
    # the start's 0.77-0.83: without the move no search reached 98% within 18.
    land = load_landscape(D256, select={"problem_key": key})
    sq = int(key.split("-sq")[1].split("-")[0])
    problem = {"head_dim": 256, "seqlen_q": sq, "seqlen_k": sq}
    assert _evals_to_98(land, 24, **problem) <= 15
    assert _evals_to_98(land, 24, _without(land.space, "scale up"), **problem) > 18


@pytest.mark.parametrize("move, head_dim, start, moved", [
    # Half the warps with TMA loads, from the D=128 start (8 warps, no TMA).
    ("fewer warps with TMA", 128, (128, 64, 8, 2, False), (128, 64, 4, 2, True)),
    # Twice the warps and one stage more, from the D=64 start (4 warps: 32 rows a warp, 2 stages).
    ("more warps, deeper pipeline", 64, (128, 64, 4, 2, False), (128, 64, 8, 3, False)),
])  # fmt: skip
@pytest.mark.slow
def test_the_screening_takes_the_named_move_of_the_start(move, head_dim, start, moved):
    space = load_space("nvidia/sm90")
    problem = {"head_dim": head_dim, "seqlen_q": 4096, "seqlen_k": 4096}
    tiles = _design_tiles(space, **problem)
    assert tiles[0] == start and moved in tiles
    assert _added_by(space, move, **problem) == 1


@pytest.mark.slow
def test_the_named_moves_are_left_out_where_they_do_not_apply():
    # The study space has no USE_TMA knob: its file has no such move, and the Hopper file's move does nothing there.
    sm90, study = load_space("nvidia/sm90"), load_space("nvidia/sm90_study")
    assert "fewer warps with TMA" not in [m.name for m in study.priors.moves]
    assert _added_by(study.with_priors(sm90.priors), "fewer warps with TMA", head_dim=128) == 0
    # The D=128 start has 8 warps already (16 rows a warp) and the D=256 one 64 rows with 4 warps (16 a warp).
    assert [_added_by(sm90, "more warps, deeper pipeline", head_dim=d) for d in (128, 256)] == [0, 0]


@pytest.mark.slow
def test_fewer_warps_with_tma_reaches_the_d128_best_in_budget():
    # 76 configs: the best of D=128 full S=4096 (128 x 64, 4 warps, 2 stages, TMA) is two knobs from the default
    # (8 warps, no TMA), and each one-knob step measured worse than the default (4 warps alone spills).
    land = load_landscape(W16, select={"problem_key": "dense-b4-hq16-hkv16-sq4096-sk4096-d128-full-bfloat16"})
    problem = {"head_dim": 128, "seqlen_q": 4096, "seqlen_k": 4096}
    assert _evals_to_98(land, 24, **problem) <= 15
    assert _evals_to_98(land, 24, _without(land.space, "fewer warps with TMA"), **problem) > 24


@pytest.mark.slow
def test_the_screening_takes_the_short_causal_move_where_the_diagonal_wastes_an_eighth():
    space = load_space("nvidia/sm90")
    for d, start in ((128, (128, 64, 8, 2, False)), (64, (128, 64, 4, 2, False))):
        # Causal at 512 and 1024 tokens, 128-row tiles: the diagonal blocks waste 1/4 and 1/8 of the work. The move
        # halves the rows, keeps 16 rows a warp (4 warps, from 8 at D=128 and from 4 at D=64) and adds a stage.
        for s in (512, 1024):
            problem = {"head_dim": d, "seqlen_q": s, "seqlen_k": s, "causal": True}
            tiles = _design_tiles(space, **problem)
            assert tiles[0] == start and (64, 64, 4, 3, False) in tiles
            # Heavy-first where the space has the knob (sm90); the start and its other moves keep their order.
            design = _gp(space, **problem).design_configs()
            moved = [c for c in design if _tiles([c])[0] == (64, 64, 4, 3)]
            assert [c["REVERSE_M"] for c in moved] == [True] and not design[0]["REVERSE_M"]
            assert _added_by(space, "short causal", **problem) == 1
        # Not when the waste is under 1/8 (2048 tokens), nor without a causal mask.
        for s, causal in ((2048, True), (512, False)):
            assert _added_by(space, "short causal", head_dim=d, seqlen_q=s, seqlen_k=s, causal=causal) == 0
        study = load_space("nvidia/sm90_study")  # no REVERSE_M knob: the move without it
        assert (64, 64, 4, 4) in _tiles(_gp(study, head_dim=d, seqlen_q=512, seqlen_k=512, causal=True)
                                        .design_configs())  # fmt: skip


@pytest.mark.slow
def test_short_causal_move_reaches_the_d128_causal_s512_best_in_budget():
    # 456 configs (tiles, warps, stages, V preload, TMA, register cap): the best configs of D=128 causal S=512
    # (64 x 32, 4 warps, 2-3 stages) are 1.35x the start (128 x 64, 8 warps, 2 stages) and two moves from the short
    # causal move's config (64 x 64, 4 warps, 3 stages: 0.93 of the best).
    key = "dense-b32-hq16-hkv16-sq512-sk512-d128-causal-bfloat16"
    land = load_landscape(SHORT, select={"problem_key": key})
    problem = {"head_dim": 128, "seqlen_q": 512, "seqlen_k": 512, "causal": True}
    assert _evals_to_98(land, 24, **problem) <= 24
    assert _evals_to_98(land, 24, _without(land.space, "short causal"), **problem) > 24


def _sm90_without_priors(edit) -> object:
    """The Hopper space file, varied by `edit` (on the parsed YAML) and parsed without its priors, then given the
    shipped file's priors: entries naming knobs or values it lacks do not apply."""
    doc = yaml.safe_load((SPACES_DIR / "nvidia/sm90.yaml").read_text())
    for key in ("start", "moves", "coupled"):
        doc.pop(key)
    edit(doc)
    return parse_space(doc).with_priors(load_space("nvidia/sm90").priors)


def _form(cfg: dict) -> tuple:
    """(rows, key block, persistent grid, one Q buffer, V preload) of a warp-specialized config."""
    return (cfg["BLOCK_M"], cfg["BLOCK_N"], cfg.get("PERSISTENT", False), cfg.get("ONE_Q_BUFFER", False),
            cfg["PRE_LOAD_V"])


@pytest.mark.slow
def test_the_screening_takes_the_warp_specialized_layout_where_the_space_has_it():
    # FlashAttention-3's layout as Triton's Hopper pass builds it (128 rows, one warp group written, TMA, one key
    # loop, 2 stages) shares no knob value with the D=256 start (64 x 32, 4 warps, no TMA, split loop): screened,
    # with 64-key blocks at D=256 on the plain grid and on the persistent one with one Q buffer (the two-buffer
    # persistent form and 128-key blocks overflow shared memory there), 128 on the persistent grid below, V loaded
    # before the softmax; at D=64 without a mask also 256 rows (each consumer group 128), causal problems not (there
    # the 128-row form comes twice: in launch order and heavy-first by pairs of heads, the next test).
    space = load_space("nvidia/sm90")
    wide, tall = (128, 128, True, False, True), (256, 128, True, False, True)
    for d, s, causal, forms in ((256, 4096, False, [(128, 64, False, False, True), (128, 64, True, True, True)]),
                                (128, 4096, False, [wide]), (64, 512, False, [wide, tall]),
                                (64, 4096, False, [wide, tall]), (64, 4096, True, [wide, wide])):
        problem = {"head_dim": d, "seqlen_q": s, "seqlen_k": s, "causal": causal}
        ws = [c for c in _gp(space, **problem).design_configs() if c["WARP_SPECIALIZE"]]
        assert sorted(_form(c) for c in ws) == forms
        assert all(c["num_warps"] == 4 and c["num_stages"] == 2 and c["USE_TMA"] and not c["SPLIT_MASK"] for c in ws)
        assert _added_by(space, *WARP_SPECIALIZED, **problem) == len(forms)
    # Long causal problems at D=64: the tall form too, heavy-first, with the diagonal band by a second launch (the
    # 128-row form comes in launch order on the persistent grid and heavy-first on the plain one). A space without
    # the band launch does not get the tall form there.
    causal64 = {"head_dim": 64, "seqlen_q": 8192, "seqlen_k": 8192, "causal": True}
    ws = [c for c in _gp(space, **causal64).design_configs() if c["WARP_SPECIALIZE"]]
    assert sorted(_form(c) for c in ws) == [(128, 128, False, False, True), wide, tall]
    assert [(c["REVERSE_M"], c["BAND_LAUNCH"]) for c in ws if c["BLOCK_M"] == 256] == [(True, True)]
    assert not any(c["BAND_LAUNCH"] for c in ws if c["BLOCK_M"] == 128)
    assert _added_by(space, *WARP_SPECIALIZED, **causal64) == 3
    no_band = _sm90_without_priors(lambda doc: doc["parameters"].update(BAND_LAUNCH=[False]))
    assert [c for c in _gp(no_band, **causal64).design_configs() if c["WARP_SPECIALIZE"] and c["BLOCK_M"] == 256] == []
    assert not any(c["BAND_LAUNCH"] for c in _gp(space, **{**causal64, "seqlen_q": 4096, "seqlen_k": 4096})
                   .design_configs())  # fmt: skip
    # No WARP_SPECIALIZE knob in the study space: the Hopper file's moves add nothing there.
    study = load_space("nvidia/sm90_study").with_priors(space.priors)
    assert _added_by(study, *WARP_SPECIALIZED, head_dim=256) == 0
    # A Hopper space without the one-Q-buffer knob gets the D=256 plain-grid form only.
    def drop_one_q(doc):
        del doc["parameters"]["ONE_Q_BUFFER"]
        doc["constraints"] = [c for c in doc["constraints"] if "ONE_Q_BUFFER" not in c]
    cfgs = _gp(_sm90_without_priors(drop_one_q), head_dim=256, seqlen_q=4096, seqlen_k=4096).design_configs()
    assert [_form(c) for c in cfgs if c["WARP_SPECIALIZE"]] == [(128, 64, False, False, True)]


@pytest.mark.slow
def test_the_warp_specialized_layout_goes_heavy_first_for_causal_problems():
    # Causal tiles differ in work. The Hopper file screens the layout heavy-first (REVERSE_M) for causal problems:
    # at D=256 both of its forms, and up to 4096 query rows the persistent one also by pairs of heads (LPT_GROUP 2);
    # at D <= 128 up to 4096 query rows the persistent form both in launch order and heavy-first by pairs of heads.
    # A space without the heavy-first order (REVERSE_M false only) gets the launch-order forms.
    sm90 = load_space("nvidia/sm90")
    # LPT_GROUP orders the heavy-first persistent grid: without REVERSE_M it keeps its value 0 only.
    straight_only = _sm90_without_priors(lambda doc: doc["parameters"].update(REVERSE_M=[False], LPT_GROUP=[0]))

    def orders(space, d: int, s: int, causal: bool) -> list[tuple[bool, int]]:
        problem = {"head_dim": d, "seqlen_q": s, "seqlen_k": s, "causal": causal}
        ws = [c for c in _gp(space, **problem).design_configs() if c["WARP_SPECIALIZE"]]
        assert _added_by(space, *WARP_SPECIALIZED, **problem) == len(ws)
        return sorted((c["REVERSE_M"], c.get("LPT_GROUP", 0)) for c in ws)

    for s in (4096, 512):
        assert orders(sm90, 128, s, True) == [(False, 0), (True, 2)]
        assert orders(sm90, 128, s, False) == [(False, 0)]
        assert orders(straight_only, 128, s, True) == [(False, 0)]
    for s in (4096, 512):
        assert orders(sm90, 256, s, True) == [(True, 0), (True, 0), (True, 2)]
        assert orders(sm90, 256, s, False) == [(False, 0), (False, 0)]
        assert orders(straight_only, 256, s, True) == [(False, 0), (False, 0)]
    assert orders(sm90, 256, 8192, True) == [(True, 0), (True, 0)]


@pytest.mark.slow
def test_more_warps_deeper_reaches_the_d64_best_in_budget():
    # 76 configs: the best of D=64 full S=4096 (128 x 64, 8 warps, 3 stages) is two knobs from the start (4 warps,
    # 2 stages), whose one-knob steps measured 0.87 (8 warps) and 0.93 (3 stages) of it.
    land = load_landscape(W16, select={"problem_key": "dense-b4-hq32-hkv32-sq4096-sk4096-d64-full-bfloat16"})
    problem = {"head_dim": 64, "seqlen_q": 4096, "seqlen_k": 4096}
    assert _evals_to_98(land, 24, **problem) <= 12
    assert _evals_to_98(land, 24, _without(land.space, "more warps, deeper pipeline"), **problem) > 18
