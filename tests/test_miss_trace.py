"""benchmarks/miss_trace: what the GP without priors believed of the best config in the runs that miss it."""

import math

import numpy as np
import pandas as pd
import pytest

from benchmarks.miss_trace import TracedGP, best_config, main, trace
from benchmarks.replay_check import ROOT
from benchmarks.search_table import load_cell
from raytune_attn.tune.search.replay import run_seeds
from raytune_attn.tune.search.space import SearchSpace

TABLE = ROOT / "tests" / "data" / "heldout" / "h100_fp16_d128_causal.parquet"
BUDGET = 16  # short enough that most seeds miss the table's lone best


def test_tracing_leaves_the_run_as_the_kept_gp_makes_it():
    land = load_cell(TABLE, None)
    made = []

    def make(space, **kw):
        made.append(TracedGP(space, target=best_config(land), truth=land.values, **kw))
        return made[-1]

    traced = run_seeds(land, "gp", budget=BUDGET, seeds=2, seed_start=1, options={"priors": False}, cls=make,
                       screen=True)  # fmt: skip
    plain = run_seeds(land, "gp", budget=BUDGET, seeds=2, seed_start=1, options={"priors": False}, screen=True)
    assert [r.configs for r in traced] == [r.configs for r in plain]
    assert all(s.views for s in made)  # both runs made model-based picks with the best not yet measured


def test_a_view_reads_the_target_and_the_candidates_truth_from_the_model():
    space = SearchSpace.from_values({"BLOCK_M": [32, 64, 128], "num_warps": [2, 4, 8], "num_stages": [2, 3, 4]})
    truth = {k: 100.0 * 0.9 ** sum(abs(a - b) for a, b in zip(k, (64, 4, 3), strict=True)) for k in
             (space.key(c) for c in space.configs())}  # fmt: skip
    truth[(32, 2, 2)] = 0.5  # far below a tenth of the best: clipped there, as the GP clips its scores
    s = TracedGP(space, seed=0, priors=False, target=(64, 4, 3), truth=truth)
    idx = {space.key(c): i for i, c in enumerate(s.candidates)}
    for k in ((32, 2, 3), (128, 8, 4), (64, 2, 2), (32, 4, 4), (128, 2, 3)):
        s._scores[idx[k]] = math.log(truth[k])
    X, y, n = s._training_data([])
    gp = s._fit(X, y, n)
    pool = [idx[k] for k in ((64, 4, 3), (32, 2, 2), (64, 8, 3), (128, 4, 2))]
    a = s._local_acquisition(gp, s._F[pool])
    (view,) = s.views
    best = max(s._scores.values())
    mu, sd = gp.predict(s._F[pool], return_std=True)
    assert view["where"] == "local" and view["candidates"] == 4 and view["rank"] == 1 + int((a > a[0]).sum())
    assert view["predicted"] == pytest.approx(math.exp(mu[0] - best))
    assert view["z"] == pytest.approx((mu[0] - best) / sd[0])
    true = [max(math.log(truth[space.key(s.candidates[i])]), best + math.log(0.1)) for i in pool]
    assert view["true_rms"] == pytest.approx(float(np.sqrt(np.mean(((np.array(true) - mu) / sd) ** 2))))
    s._local_acquisition(gp, s._F[pool[1:]])  # the target not among the candidates
    assert s.views[-1]["where"] == "not a candidate" and s.views[-1]["rank"] is None


def test_views_of_missing_runs_match_the_plain_runs():
    land = load_cell(TABLE, None)
    rows = pd.DataFrame(trace(TABLE, None, seeds=4, seed_start=0, budget=BUDGET, screen=True))
    plain = run_seeds(land, "gp", budget=BUDGET, seeds=4, seed_start=0, options={"priors": False}, screen=True)
    missing = [s for s, r in enumerate(plain) if r.evals_to(0.98 * land.best, BUDGET) > BUDGET]
    assert missing and sorted(rows.seed.unique()) == missing
    for r in rows.itertuples():
        run = plain[r.seed]
        assert r.truth == pytest.approx(land.best / run.trace[r.told - 1])  # the reference: the plain run's trace
        assert 0 < r.predicted and math.isfinite(r.z) and r.loo_rms > 0
        if r.where == "not a candidate":
            assert math.isnan(r.rank)
        else:  # never ranked first: the run would have measured it and reached the best
            assert 2 <= r.rank <= r.candidates
    assert {"local", "global"} <= set(rows["where"])


def test_command_writes_every_pick_and_its_table(tmp_path, capsys):
    out = tmp_path / "trace"
    assert main(["--screen", "--seeds", "3", "--budget", str(BUDGET), "--landscape", str(TABLE), "--out",
                 str(out)]) == 0  # fmt: skip
    picks = pd.read_csv(out / "picks.csv", keep_default_na=False)
    readme = (out / "README.md").read_text()
    assert "python -m benchmarks.miss_trace --screen --seeds 3" in readme
    row = next(line for line in readme.splitlines() if line.startswith("| h100_fp16_d128_causal"))
    assert f"| {picks.seed.nunique()} of 3 | {len(picks)} |" in row
    assert row in capsys.readouterr().out


def test_bad_arguments_are_refused_before_any_replay(capsys):
    with pytest.raises(SystemExit):
        main(["--landscape", str(TABLE), "--seeds", "0"])
    assert "--seeds must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([])
    assert "--landscape" in capsys.readouterr().err


def test_committed_readme_is_the_report_of_its_picks():
    from benchmarks.miss_trace import summary

    folder = ROOT / "docs" / "benchmarks" / "search" / "miss_trace"
    picks = pd.read_csv(folder / "picks.csv", keep_default_na=False, na_values={"rank": [""]})
    readme = (folder / "README.md").read_text()
    assert "--seeds 10 " in readme
    assert summary(picks, 10) in readme
