"""Earlier results as a search's prior (raytune_attn.tune.search.warm): relative scores per group, their mapping
onto another space, the searchers' starts, and the replay of an H100 search warm-started from the H200's data."""

import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import needs_optuna

from raytune_attn.config import default_config
from raytune_attn.tune.search import load_space, make_searcher
from raytune_attn.tune.search.warm import WarmStartError, best_configs, in_space, prior_scores

DATA = Path(__file__).parent / "data"


def _table() -> pd.DataFrame:
    # Two problems on one GPU: speeds 10x apart, the same order but for config (64, 2), failed in one of them.
    rows = []
    for key, scale in (("p-small", 1.0), ("p-large", 10.0)):
        for m, w, v in ((64, 4, 100.0), (128, 8, 50.0), (64, 2, 25.0), (32, 4, None)):
            if key == "p-large" and (m, w) == (64, 2):
                v = None
            rows.append({"problem_key": key, "gpu": "G", "BLOCK_M": m, "num_warps": w, "kind": "trial",
                         "status": "ok" if v else "invalid", "tflops": v * scale if v else float("nan")})
    rows.append({"problem_key": "p-small", "gpu": "G", "BLOCK_M": None, "num_warps": None, "kind": "baseline",
                 "status": "ok", "tflops": 1e6})
    return pd.DataFrame(rows)


def test_scores_are_relative_to_each_groups_best_and_averaged_geometrically():
    scores = dict((tuple(c.values()), s) for c, s in prior_scores(_table(), ["BLOCK_M", "num_warps"]))
    assert scores[(64, 4)] == pytest.approx(1.0)  # best in both groups; the baseline row is not a config
    assert scores[(128, 8)] == pytest.approx(0.5)
    assert scores[(64, 2)] == pytest.approx(0.25)  # measured in one group only
    assert scores[(32, 4)] is None  # failed wherever it ran
    ordered = prior_scores(_table(), ["BLOCK_M", "num_warps"])
    assert [s for _, s in ordered] == sorted([s for _, s in ordered], key=lambda s: -1 if s is None else s,
                                             reverse=True)  # fmt: skip
    assert best_configs(ordered, 2) == [{"BLOCK_M": 64, "num_warps": 4}, {"BLOCK_M": 128, "num_warps": 8}]
    # A time objective: lower is better, the relative score is best / value.
    t = _table().assign(latency_ms=lambda d: 1.0 / d["tflops"])
    times = dict((tuple(c.values()), s) for c, s in prior_scores(t, ["BLOCK_M", "num_warps"],
                                                                 objective="latency_ms", mode="min"))
    assert times[(128, 8)] == pytest.approx(0.5)


def test_a_table_concatenated_from_several_runs_reads_as_one(tmp_path):
    """Frames concatenated without renumbering repeat their row labels (the H200 Llama table of four processes);
    the scores are those of the same rows numbered once."""
    table = _table()
    half = len(table) // 2
    repeated = pd.concat([table.iloc[:half], table.iloc[half:].reset_index(drop=True)])
    assert not repeated.index.is_unique
    repeated.to_parquet(tmp_path / "runs.parquet")
    want = prior_scores(table, ["BLOCK_M", "num_warps"])
    assert prior_scores(repeated, ["BLOCK_M", "num_warps"]) == want
    assert prior_scores(tmp_path / "runs.parquet", ["BLOCK_M", "num_warps"]) == want


def test_a_kernel_knob_the_table_never_recorded_ran_at_its_default():
    # The table records BLOCK_M and num_warps only: its configs ran with the kernel's default BLOCK_N, stages and
    # PRE_LOAD_V for head dim 128 (config.default_config), so only those candidates of the study space get a score.
    space = load_space("nvidia/sm90_study")
    cands = list(space.configs())
    scores = prior_scores(_table(), space.names)
    d = default_config(128)
    assert all(c["BLOCK_N"] == d["BLOCK_N"] and c["num_stages"] == d["num_stages"] for c, _ in scores)
    matched = in_space(scores, cands)
    want = [i for i, c in enumerate(cands) if (c["BLOCK_M"], c["num_warps"]) in {(64, 4), (128, 8), (64, 2), (32, 4)}
            and all(c[k] == d[k] for k in ("BLOCK_N", "num_stages", "PRE_LOAD_V"))]  # fmt: skip
    assert len(want) == 3 and sorted(i for i, _ in matched) == want  # BLOCK_M 32 < BLOCK_N 64: not in the space
    for i, s in matched:
        c = cands[i]
        assert s == {(64, 4): 1.0, (128, 8): 0.5, (64, 2): 0.25, (32, 4): None}[(c["BLOCK_M"], c["num_warps"])]


def test_a_sweeps_export_warm_starts_with_the_knobs_its_rows_left_empty_at_their_defaults(tmp_path):
    """A sweep's table has a column for every knob, empty where a row's space did not vary it (the interpreter
    space's trials leave USE_TMA, maxnreg, ... empty, an NVIDIA sweep the AMD options): those rows ran at the
    default, and a knob no row records stays open. `tune --warm-start` checks a table against every knob."""
    from raytune_attn.config import KNOBS
    from raytune_attn.problem import Problem
    from raytune_attn.tune import results

    P_SMALL = Problem(batch=1, hq=2, hkv=2, seqlen_q=64, seqlen_k=64, head_dim=64, causal=True, dtype="float32")
    rows = []
    for i, (m, tf) in enumerate(((16, 2.0), (32, 4.0), (64, None))):
        cfg = {"BLOCK_M": m, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1, "PRE_LOAD_V": False, "SPLIT_MASK": True}
        rows.append(results.trial_row(P_SMALL.to_dict(), cfg, {"status": "ok" if tf else "invalid", "tflops": tf,
                                                                "latency_ms": 1.0, "rung": 1},
                                      {"vendor": "nvidia", "arch": "sm90", "accelerator_type": "H100"},
                                      trial_id=f"t{i}", sweep_id="s"))
    path = results.write_file(rows, tmp_path / "trials.parquet")
    assert results.read_frame(path)["USE_TMA"].isna().all()  # the schema's column, empty for these rows
    scores = prior_scores(path, list(KNOBS))
    d = default_config(P_SMALL.head_dim)
    assert [(c["BLOCK_M"], s) for c, s in scores] == [(32, 1.0), (16, 0.5), (64, None)]
    assert all(c["USE_TMA"] == d["USE_TMA"] and c["maxnreg"] == d["maxnreg"] for c, _ in scores)
    assert all("waves_per_eu" not in c and "kpack" not in c for c, _ in scores)  # no default, no row: open
    space = load_space("nvidia/sm90")
    cands = list(space.configs())
    recorded = {"BLOCK_N": 16, "num_warps": 4, "num_stages": 1, "PRE_LOAD_V": False, "SPLIT_MASK": True}
    want = [i for i, c in enumerate(cands) if c["BLOCK_M"] in (16, 32, 64) and all(
        c[k] == recorded.get(k, d[k]) for k in space.names if k != "BLOCK_M")]
    assert want and sorted(i for i, _ in in_space(prior_scores(path, space.names), cands)) == want


def test_the_default_follows_each_rows_head_dim_and_other_knobs_stay_open():
    table = _table().assign(head_dim=[64, 64, 64, 64, 256, 256, 256, 256, 64])
    scores = prior_scores(table, ["BLOCK_M", "num_warps", "BLOCK_N", "order"])
    by_n = {c["BLOCK_N"] for c, _ in scores}
    assert by_n == {default_config(64)["BLOCK_N"], default_config(256)["BLOCK_N"]} == {64, 32}
    assert all("order" not in c for c, _ in scores)  # not a kernel knob: no default to fill
    cands = [{"BLOCK_M": 64, "num_warps": 4, "BLOCK_N": 64, "order": o} for o in ("a", "b")]
    assert sorted(i for i, _ in in_space(scores, cands)) == [0, 1]  # any value of the open knob matches


def test_a_table_given_to_the_gp_directly_is_read_as_tune_reads_it():
    # Two problems 10x apart in speed: each scaled by its best, not mixed in absolute TFLOP/s; a time objective
    # gives the same relative scores (the GP models -log(latency)).
    space = load_space("nvidia/sm90_study")
    want = {i: None if v is None else math.log(v)
            for i, v in in_space(prior_scores(_table(), space.names), list(space.configs()))}  # fmt: skip
    assert sum(v is not None for v in want.values()) == 3
    for metric, mode, table in (("tflops", "max", _table()),
                                ("latency_ms", "min", _table().assign(latency_ms=lambda d: 1.0 / d["tflops"]))):
        s = make_searcher("gp", space, seed=0, priors=False, metric=metric, mode=mode, warm_start=table)
        got = {s._index[k]: v for _, k, v in s._warm}
        assert got.keys() == want.keys()
        for i, v in want.items():
            assert got[i] == pytest.approx(v) if v is not None else got[i] is None


def test_groups_weigh_by_their_problems_likeness_to_the_searchs():
    from raytune_attn.tune.search.warm import SIMILARITY, group_weight

    p = {"head_dim": 128, "causal": True, "dtype": "bfloat16", "seqlen_q": 1024, "seqlen_k": 1024}
    assert group_weight(p, p) == 1.0
    assert group_weight({**p, "head_dim": 64}, p) == pytest.approx(math.exp(-1 / (2 * SIMILARITY**2)))
    # sequences 4x as long: 2 units for the queries and 2 for the keys
    assert group_weight({**p, "seqlen_q": 4096, "seqlen_k": 4096}, p) == pytest.approx(
        math.exp(-8 / (2 * SIMILARITY**2)))
    assert group_weight({**p, "causal": False}, {"head_dim": 128}) == 1.0  # the search's mask unknown: no term


def test_groups_far_from_the_search_still_score_by_their_relative_weights():
    # Two groups 64 and 128 tokens long, a search 64K tokens long: each weight alone underflows to 0 (10 and 9
    # factors of 2 in both lengths), their ratio exp(38 / (2 SIMILARITY^2)) does not.
    from raytune_attn.tune.search.warm import SIMILARITY, group_log_weight, group_weight

    near, far = "dense-b1-hq2-hkv2-sq128-sk128-d64-full-bfloat16", "dense-b1-hq2-hkv2-sq64-sk64-d64-full-bfloat16"
    problem = {"head_dim": 64, "seqlen_q": 65536, "seqlen_k": 65536}
    assert group_weight({"seqlen_q": 64, "seqlen_k": 64}, problem) == 0.0
    assert group_log_weight({"seqlen_q": 64, "seqlen_k": 64}, problem) == pytest.approx(-200 / (2 * SIMILARITY**2))
    rows = [(near, 64, 100.0), (near, 128, 50.0), (far, 64, 40.0), (far, 128, 100.0), (far, 256, 80.0)]
    table = pd.DataFrame([{"problem_key": k, "BLOCK_M": m, "status": "ok", "tflops": v} for k, m, v in rows])
    got = dict((c["BLOCK_M"], s) for c, s in prior_scores(table, ["BLOCK_M"], problem=problem))
    r = math.exp(-38 / (2 * SIMILARITY**2))  # the far group's weight relative to the near one's: negligible
    assert got[64] == pytest.approx(math.exp(r * math.log(0.4) / (1 + r)))
    assert got[128] == pytest.approx(math.exp(math.log(0.5) / (1 + r)))
    assert got[256] == pytest.approx(0.8)  # measured by the far group alone: its own relative speed


def test_a_search_weighs_the_earlier_table_s_groups_by_their_problems():
    # Config a wins on the search's own shape, config b on another head dim: with the problem given, a leads.
    same, other = "dense-b1-hq2-hkv2-sq64-sk64-d64-full-bfloat16", "dense-b1-hq2-hkv2-sq64-sk64-d128-full-bfloat16"
    rows = [(same, 64, 100.0), (same, 128, 80.0), (other, 64, 50.0), (other, 128, 100.0)]
    table = pd.DataFrame([{"problem_key": k, "gpu": "G", "BLOCK_M": m, "status": "ok", "tflops": v}
                          for k, m, v in rows])  # fmt: skip
    plain = dict((c["BLOCK_M"], s) for c, s in prior_scores(table, ["BLOCK_M"]))
    assert plain[64] == pytest.approx(math.sqrt(0.5)) and plain[128] == pytest.approx(math.sqrt(0.8))
    from raytune_attn.tune.search.warm import SIMILARITY

    w = math.exp(-1 / (2 * SIMILARITY**2))  # the other group's weight: one unit away (head dim)
    weighted = dict((c["BLOCK_M"], s) for c, s in prior_scores(table, ["BLOCK_M"], problem={"head_dim": 64}))
    assert weighted[64] == pytest.approx(math.exp(w * math.log(0.5) / (1 + w)))
    assert weighted[128] == pytest.approx(math.exp(math.log(0.8) / (1 + w)))
    assert weighted[64] > weighted[128]
    assert next(iter(prior_scores(table, ["BLOCK_M"], problem={"head_dim": 64})))[0] == {"BLOCK_M": 64}


def test_a_table_given_to_the_gp_directly_weighs_its_groups_by_the_searchs_problem():
    # As tune reads it: the search's own shape (D=64 here) leads, where the groups alike would rank the other's best.
    space = load_space("nvidia/sm90_study")
    same, other = "dense-b1-hq2-hkv2-sq64-sk64-d64-full-bfloat16", "dense-b1-hq2-hkv2-sq64-sk64-d128-full-bfloat16"
    rows = [(same, 64, 100.0), (same, 128, 80.0), (other, 64, 50.0), (other, 128, 100.0)]
    table = pd.DataFrame([{"problem_key": k, "gpu": "G", "BLOCK_M": m, "status": "ok", "tflops": v}
                          for k, m, v in rows])  # fmt: skip
    configs = list(space.configs())
    lead = {}
    for problem in ({"head_dim": 64}, None):
        want = {i: math.log(v) for i, v in in_space(prior_scores(table, space.names, problem=problem), configs)}
        s = make_searcher("gp", space, seed=0, priors=False, problem=problem, warm_start=table)
        got = {s._index[k]: v for _, k, v in s._warm}
        assert got.keys() == want.keys()
        assert all(got[i] == pytest.approx(v) for i, v in want.items())
        lead[None if problem is None else 64] = configs[max(got, key=got.get)]["BLOCK_M"]
    assert lead == {64: 64, None: 128}  # weighed, the search's own shape's best leads; alike, the other's


def test_the_other_problems_results_join_the_warm_start_at_the_next_pick():
    """add_related: rows of the sweep's other problems are read as a warm-start table of them would be, beside the
    warm start itself, once the next pick comes; with as many successes as the design, the design is skipped."""
    space = load_space("nvidia/sm90_study")
    mine = "dense-b1-hq2-hkv2-sq64-sk64-d64-full-bfloat16"
    near, far = mine.replace("b1-", "b8-"), mine.replace("sq64-sk64", "sq4096-sk4096")
    configs = list(space.configs())
    file = pd.DataFrame([{"problem_key": far, "status": "ok", "tflops": 10.0 + i, **c}
                         for i, c in enumerate(configs[:3])])  # fmt: skip
    rows = [{"problem_key": k, **c, "status": "ok" if i % 4 else "invalid", "tflops": 50.0 + i if i % 4 else None}
            for k in (near, far) for i, c in enumerate(configs[10:20])]  # fmt: skip
    problem = {"head_dim": 64, "seqlen_q": 64, "seqlen_k": 64}
    s = make_searcher("gp", space, seed=0, priors=False, problem=problem, warm_start=file)
    want_file = [(k, v) for _, k, v in s._warm]
    design = s.design_configs()
    s.add_related(rows[:3])  # rows come a few at a time
    s.add_related(rows[3:])
    assert s.design_configs() == design  # read at the next pick, not per row
    s.suggest("t0")
    want = make_searcher("gp", space, seed=0, priors=False, problem=problem, warm_start=pd.DataFrame(rows))
    assert [(k, v) for _, k, v in s._warm] == want_file
    assert [(k, v) for _, k, v in s._earlier()] == want_file + [(k, v) for _, k, v in want._warm]
    assert s.design_configs() == []  # 3 + 7 successes known (a config measured by both problems counts once)
    state = s.get_state()
    t = make_searcher("gp", space, seed=0, priors=False, problem=problem, warm_start=file)
    t.set_state(state)
    assert t.suggest("t1") == s.suggest("t1")
    only_failed = make_searcher("gp", space, seed=0, priors=False, problem=problem)
    only_failed.add_related([r for r in rows if r["status"] != "ok"])
    first = only_failed.design_configs()[0]
    assert only_failed.suggest("t0") == first and only_failed._related_warm == []


def test_unusable_tables_are_refused_naming_why(tmp_path):
    with pytest.raises(WarmStartError, match="no such file"):
        prior_scores(tmp_path / "nothing.parquet", ["BLOCK_M"])
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(WarmStartError, match="junk.parquet: not a readable results table"):
        prior_scores(tmp_path / "junk.parquet", ["BLOCK_M"])
    with pytest.raises(WarmStartError, match="none of the knob columns"):
        prior_scores(_table(), ["kpack"])
    (tmp_path / "empty_sweep").mkdir()
    with pytest.raises(WarmStartError, match="empty_sweep: holds no results"):
        prior_scores(tmp_path / "empty_sweep", ["BLOCK_M"])
    _table().iloc[:0].to_parquet(tmp_path / "no_rows.parquet")
    with pytest.raises(WarmStartError, match="no_rows.parquet: has no rows"):
        prior_scores(tmp_path / "no_rows.parquet", ["BLOCK_M"])
    with pytest.raises(WarmStartError, match="no successful row"):
        prior_scores(_table().assign(status="error"), ["BLOCK_M"])
    _table().assign(status="error").to_parquet(tmp_path / "all_failed.parquet")
    with pytest.raises(WarmStartError, match="all_failed.parquet: has no successful row"):
        prior_scores(tmp_path / "all_failed.parquet", ["BLOCK_M"])


def test_a_trial_stopped_early_scores_its_last_rung():
    """ASHA's stopped trial reported its last rung's value, which its searcher took; a warm start reads it the same."""
    rows = [(64, "ok", 100.0), (128, "stopped", 40.0), (256, "error", 90.0)]
    table = pd.DataFrame([{"problem_key": "k", "BLOCK_M": m, "status": st, "tflops": v} for m, st, v in rows])
    assert dict((c["BLOCK_M"], s) for c, s in prior_scores(table, ["BLOCK_M"])) == {64: 1.0, 128: 0.4, 256: None}


def test_a_searcher_starts_from_the_initial_configs_it_is_given():
    space = load_space("nvidia/sm90_study")
    first = [{"BLOCK_M": 128, "num_warps": 8}, {"BLOCK_M": 48}, {"BLOCK_M": 128, "num_warps": 8}]
    for name in ("random", "gp"):
        s = make_searcher(name, space, seed=0, initial=first, **({"priors": False} if name == "gp" else {}))
        a, b = s.suggest("t0"), s.suggest("t1")
        # Each initial config is served by the first free candidate that matches it; one that none matches (48 is
        # no BLOCK_M value of the space) is dropped.
        assert (a["BLOCK_M"], a["num_warps"]) == (b["BLOCK_M"], b["num_warps"]) == (128, 8) and a != b
        assert a == next(c for c in s.candidates if (c["BLOCK_M"], c["num_warps"]) == (128, 8))


def test_the_gp_starts_from_the_earlier_results_best_configs():
    """Until a config of this search succeeds, the GP tries what the earlier results measured best, in order."""
    space = load_space("nvidia/sm90_study")
    # The best (64, 4, 2) stands alone among poor neighbours; a smooth ridge of good 128-row configs sits elsewhere.
    rows = [(64, 4, 2, 100.0), (64, 4, 1, 20.0), (64, 2, 2, 15.0), (64, 8, 2, 15.0), (128, 8, 2, 90.0),
            (128, 8, 4, 88.0), (128, 4, 2, 86.0)]  # fmt: skip
    table = pd.DataFrame([{"problem_key": "p", "gpu": "G", "BLOCK_M": m, "num_warps": w, "num_stages": st,
                           "status": "ok", "tflops": v} for m, w, st, v in rows])  # fmt: skip
    s = make_searcher("gp", space, seed=0, priors=False, warm_start=prior_scores(table, space.names))
    assert not s._design  # enough earlier successes: no space-filling design
    picks = []
    for t in range(3):
        cfg = s.suggest(f"t{t}")
        picks.append((cfg["BLOCK_M"], cfg["num_warps"], cfg["num_stages"]))
        s.on_trial_complete(f"t{t}", {"status": "error", "config": cfg})  # nothing succeeds here yet
    assert picks == [(64, 4, 2), (128, 8, 2), (128, 8, 4)]


@pytest.fixture(scope="module")
def h100_evals_to_98():
    """Replays on the recorded H100 landscape of D=128 causal S=4096 (study space), seeds 0-4, budget 50, each
    run once for this module: `run(label)` is the evaluations to 98% of the best of "cold" (the GP without priors),
    "warm" (the same GP warm-started from the H200's table of five problems: the same shape among them, another
    space) or "tpe warm" (TPE started from that table)."""
    from raytune_attn.tune.search.landscape import load_landscape
    from raytune_attn.tune.search.replay import replay

    land = load_landscape(DATA / "landscape_h100_d128_causal_s4096.parquet")
    warm = prior_scores(DATA / "h200" / "w16_landscape.parquet", land.space.names)
    searches = {"cold": ("gp", {"priors": False}, None), "warm": ("gp", {"priors": False}, warm),
                "tpe warm": ("tpe", {}, warm)}
    done = {}

    def run(label):
        if label not in done:
            name, opts, w = searches[label]
            done[label] = replay(land, [name], budget=50, seeds=5, options={name: opts}, warm=w)[name]["evals_to_98"]
        return done[label]

    return run


@pytest.mark.slow
def test_an_h100_search_warm_started_from_the_h200s_results_needs_fewer_evaluations(h100_evals_to_98):
    """The GP warm-started from the H200's results reaches 98% of the H100's best in fewer evaluations than cold."""
    warm, cold = h100_evals_to_98("warm"), h100_evals_to_98("cold")
    assert warm["median"] < cold["median"]
    assert warm["max"] <= 50  # every seed within 2% by the budget


@pytest.mark.slow
@needs_optuna
def test_the_warm_started_gp_needs_fewer_evaluations_than_tpe_started_from_the_same_results(h100_evals_to_98):
    assert h100_evals_to_98("warm")["median"] < h100_evals_to_98("tpe warm")["median"]
