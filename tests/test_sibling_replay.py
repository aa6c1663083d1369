"""benchmarks/sibling_replay: lockstep searches alone match independent replays; sharing gives each search the other
problems' results as a sweep with --share-results does."""

import math
from pathlib import Path

import pytest

from benchmarks.sibling_replay import lockstep, main
from raytune_attn.tune.search.gp import GPSearcher
from raytune_attn.tune.search.landscape import load_landscape, read_table
from raytune_attn.tune.search.replay import noise_factors, run_searcher, run_seeds
from raytune_attn.tune.search.warm import group_log_weight

TABLE = Path("tests/data/heldout/h200_short_full.parquet")


def _lands():
    df = read_table(TABLE)
    return {k: load_landscape(df[df["problem_key"] == k]) for k in sorted(df["problem_key"].unique())}


def test_searches_alone_in_lockstep_are_independent_replays():
    budget, seed, noise = 30, 3, 0.02  # long enough for cost-aware global steps (the compile seconds told)
    got = lockstep(TABLE, "alone", seed, budget, noise)
    for key, land in _lands().items():
        s = GPSearcher(land.space, seed=seed, priors=False, problem=land.problem or None)
        run = run_searcher(s, land, budget, noise=noise_factors(land, noise, seed))
        assert got[key].evals == run.evals_to(0.98 * land.best, budget), key


def test_screened_searches_alone_are_the_screened_replays():
    """--screen: each search tries the candidates a sweep on the table's GPU would, as `replay --screen` does."""
    budget, seed = 12, 1
    got = lockstep(TABLE, "alone", seed, budget, 0.0, screen=True)
    for key, land in _lands().items():
        (run,) = run_seeds(land, "gp", budget=budget, seeds=1, seed_start=seed, options={"priors": False}, screen=True)
        assert got[key].evals == run.evals_to(0.98 * land.best, budget), key


def test_sharing_gives_each_search_the_other_problems_results_of_every_round(monkeypatch):
    """`siblings`: after each round every search holds the other problems' results so far, as a sweep with
    --share-results sends them; `near siblings` only those of the problems of its kernel at most twice or half its
    length; `siblings after design` keeps each search's design."""
    import benchmarks.sibling_replay as sr

    budget, seed = 8, 0
    lands = _lands()

    def canon(rows):
        return sorted((tuple(sorted(r.items())) for r in rows), key=repr)

    made: list[GPSearcher] = []

    class Spy(GPSearcher):
        def __init__(self, space, **kw):
            super().__init__(space, **kw)
            made.append(self)

    for mode in ("siblings", "near siblings", "siblings after design"):
        made.clear()

        monkeypatch.setattr(sr, "GPSearcher", Spy)
        monkeypatch.setattr(sr, "_KeepDesign", type("KeepSpy", (Spy,), {"_skip_design_if_known": lambda self: None}))
        lockstep(TABLE, mode, seed, budget, 0.0)
        searches = dict(zip(lands, made, strict=True))
        told = [{"problem_key": k, **cfg, "status": "ok" if v is not None else "invalid", "tflops": v}
                for k, s in searches.items() for cfg, v in s.observations]  # fmt: skip
        for k, s in searches.items():
            among = {j for j in lands if j != k}
            if mode == "near siblings":  # here: the other head dim at the same length, the same at 2x or 1/2
                among = {j for j in among if group_log_weight(sr._fields(j), sr._fields(k)) >= sr.NEAR}
                assert len(among) == 2
            assert canon(s._related) == canon([r for r in told if r["problem_key"] in among])
            if mode == "siblings after design":
                own = GPSearcher(lands[k].space, seed=seed, priors=False, problem=lands[k].problem or None)
                first = own.design_configs()[:budget]
                assert [c for c, _ in s.observations[: len(first)]] == first


def test_cli_refuses_a_missing_table(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--landscape", str(tmp_path / "none.parquet")])
    assert "no such file" in capsys.readouterr().err


def test_screen_refuses_a_table_without_its_arch_before_any_run(tmp_path, capsys):
    bare = tmp_path / "no_arch.parquet"
    read_table(TABLE).drop(columns="arch").to_parquet(bare)
    with pytest.raises(SystemExit) as e:
        main(["--landscape", str(bare), "--seeds", "1", "--budget", "2", "--mode", "alone", "--screen"])
    assert e.value.code == 2 and capsys.readouterr().err.strip().endswith("the table records no single arch")


def test_the_table_holds_each_problem_s_evaluations_and_names_its_command(tmp_path, capsys):
    out = tmp_path / "t.md"
    assert main(["--landscape", str(TABLE), "--seeds", "1", "--budget", "3", "--mode", "alone", "--out", str(out)]) == 0
    got = lockstep(TABLE, "alone", 0, 3, 0.0)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| dense-")]
    evals = [f"| {k} | {r.evals:g} / {r.evals} ({int(r.evals <= 3)}/1) |" for k, r in got.items()]
    floor3 = {k: math.floor(r.named * 1000) / 1000 for k, r in got.items()}  # 0.9799 prints 0.979, not 0.980
    named = [f"| {k} | {int(r.named >= 0.98)}/1, worst {floor3[k]:.3f} |" for k, r in got.items()]
    assert rows == evals + named
    text = out.read_text()
    assert f"--landscape {TABLE} --seeds 1 --budget 3 --mode 'alone'`" in text and rows[0] in text and rows[-1] in text


def _top(land, n):
    """The landscape's n best configs (as dicts), best first."""
    keys = sorted((k for k, v in land.values.items() if v == v), key=lambda k: -land.values[k])[:n]
    return [dict(zip(land.space.names, k, strict=True)) for k in keys]


def test_the_final_pick_adds_the_nearest_same_kernel_siblings_winner_and_ranks_by_the_values_told():
    """As tune's final re-measure: a search's own top 4 by the values it was told, plus the winner of a sibling of
    its kernel (heads, head dim, mask, dtype) that it did not measure; another head dim's winner is not added. The
    pick is the best recorded value among them."""
    from benchmarks.sibling_replay import final_picks

    lands = _lands()
    d128 = [k for k in lands if "-d128-" in k]
    d64 = [k for k in lands if "-d64-" in k]
    a, b = d128
    best_a, *rest = _top(lands[a], 12)
    own = rest[-6:]  # six configs of A, none its best, best first; told in the reverse order of their speed
    told = {a: [(c, float(i)) for i, c in enumerate(own)] + [(best_a, None)]}
    best_b = _top(lands[b], 1)[0]
    assert best_b not in own + [best_a]
    told[b] = [(best_b, 1.0)]
    for k in d64:
        told[k] = [(best_a, 1.0)]  # a D=64 search's winner: not A's sibling
    worst4 = own[2:]  # the four told fastest
    want = max(lands[a].value(c) for c in worst4 + [best_b]) / lands[a].best
    assert final_picks(lands, told)[a] == pytest.approx(want)
    told[b] = [(best_a, 1.0)]  # A "failed" best_a itself: a config it ran is not added again
    assert final_picks(lands, told)[a] == pytest.approx(max(lands[a].value(c) for c in worst4) / lands[a].best)
    told[a] = told[a][:-1]  # A never ran it: its sibling's winner brings A's best into the re-measure
    assert final_picks(lands, told)[a] == 1.0


def test_a_sibling_s_winner_that_the_key_s_table_lacks_or_failed_is_not_named():
    """Tables may record fewer configs for some keys (the H200 Llama table: 125 and 350 of 450): a sibling's winner
    that this key's table does not hold, or that failed there, is left out of the pick, as a re-measure that fails
    it; the search's own configs still name the winner."""
    import dataclasses

    from benchmarks.sibling_replay import final_picks

    lands = _lands()
    a, b = [k for k in lands if "-d128-" in k]
    own = _top(lands[a], 12)[-4:]
    best_b = _top(lands[b], 1)[0]
    told = {k: [] for k in lands} | {a: [(c, 1.0) for c in own], b: [(best_b, 1.0)]}
    assert lands[a].value(best_b) > max(lands[a].value(c) for c in own)  # the sibling's winner is A's pick
    assert final_picks(lands, told)[a] == pytest.approx(lands[a].value(best_b) / lands[a].best)
    key_b = lands[a].space.key(best_b)
    lacking = {k: v for k, v in lands[a].values.items() if k != key_b}
    for values in (lacking, {**lacking, key_b: math.nan}):
        lands[a] = dataclasses.replace(lands[a], values=values)
        want = max(lands[a].value(c) for c in own) / lands[a].best
        assert final_picks(lands, told)[a] == pytest.approx(want)
