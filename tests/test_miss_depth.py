"""benchmarks/miss_depth: how far the runs that miss 2% of the best end, replayed from a miss_rate folder."""

import pandas as pd
import pytest

from benchmarks.miss_depth import main, missed, report
from benchmarks.miss_rate import main as miss_rate
from benchmarks.replay_check import ROOT
from benchmarks.search_table import load_cell
from raytune_attn.tune.search.replay import run_seeds

W16 = ROOT / "tests" / "data" / "h200" / "w16_landscape.parquet"


def test_missed_runs_are_those_past_the_count_and_a_short_budget_is_refused():
    runs = pd.DataFrame({"searcher": "a", "seed": [0, 1, 2, 3], "evals_to_98": [5, 6, 21, 7], "budget": 20})
    assert list(missed(runs, 5).seed) == [1, 2, 3]
    assert list(missed(runs, 20).seed) == [2]
    with pytest.raises(ValueError, match="runs of budget 20 cannot say where they are after 30"):
        missed(runs, 30)


def test_each_miss_reached_what_its_run_held_after_the_count(tmp_path):
    runs_dir, out = tmp_path / "runs", tmp_path / "depth"
    assert miss_rate(["--landscape", str(W16), "--searcher", "random", "--seeds", "6", "--budget", "12",
                      "--out", str(runs_dir)]) == 0  # fmt: skip
    at = 4
    assert main([str(runs_dir), "--at", str(at), "--out", str(out)]) == 0
    depth = pd.read_csv(out / "depth.csv")
    committed = pd.read_csv(runs_dir / "runs.csv")
    assert len(depth) == (committed.evals_to_98 > at).sum() and len(depth)
    for r in depth.itertuples():  # the reference: the same seed's run, its best after `at` over the table's best
        land = load_cell(W16, r.problem_key)
        run = run_seeds(land, "random", budget=at, seeds=1, seed_start=r.seed)[0]
        held = run.trace[at - 1]
        assert r.reached == pytest.approx(0.0 if held != held else held / land.best)  # NaN: nothing succeeded yet
        assert r.reached < 0.98
    readme = (out / "README.md").read_text()
    assert "python -m benchmarks.miss_depth" in readme and f"| random | {len(depth)} | 0 |" in readme


def test_a_folder_that_cannot_be_replayed_is_refused_by_name(tmp_path, capsys):
    pd.DataFrame({"searcher": ["gp"]}).to_csv(tmp_path / "runs.csv", index=False)
    (tmp_path / "README.md").write_text("# a table someone wrote by hand\n")
    with pytest.raises(SystemExit):
        main([str(tmp_path)])
    assert f"{tmp_path}: cannot replay its runs" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--at", "0"])
    assert "at least 1" in capsys.readouterr().err
    runs = ROOT / "docs" / "benchmarks" / "search" / "miss_rate_screen"  # budget 100
    with pytest.raises(SystemExit):
        main([str(runs), "--at", "200"])
    assert f"{runs}: runs of budget 100 cannot say where they are after 200" in capsys.readouterr().err


@pytest.mark.parametrize("folder", sorted((ROOT / "docs" / "benchmarks" / "search" / "miss_depth").glob("*/")),
                         ids=lambda p: p.name)
def test_committed_readme_is_the_report_of_its_depth_csv(folder):
    depth = pd.read_csv(folder / "depth.csv", keep_default_na=False)
    assert report(depth, 50) in (folder / "README.md").read_text()
