"""benchmarks/replay_check.py: the committed replay folders' runs come out again from today's code."""

import pandas as pd
import pytest

from benchmarks.miss_rate import main as miss_rate
from benchmarks.replay_check import ROOT, check, folders, main, sample

W16 = ROOT / "tests" / "data" / "h200" / "w16_landscape.parquet"


@pytest.mark.parametrize("folder", folders(), ids=lambda p: str(p.relative_to(ROOT / "docs" / "benchmarks" / "search")))
def test_committed_runs_replay_as_committed(folder):
    """Each searcher's slowest committed run within 50 evaluations, replayed now, takes the committed evaluations: the
    tables of docs/benchmarks/search are today's searchers' (a searcher change that moves them re-measures them)."""
    assert check(folder) == []


def test_the_sample_is_each_searchers_slowest_run_within_the_bound():
    runs = pd.DataFrame({"set": "s", "landscape": "x", "problem_key": "", "searcher": ["a"] * 4 + ["b"] * 3,
                         "seed": [0, 1, 2, 3, 0, 1, 2], "evals_to_98": [30, 51, 40, 40, 7, 201, 9],
                         "budget": [50, 50, 50, 50, 200, 200, 200]})  # fmt: skip
    picked = sample(runs, 1, 50)
    # a: 51 was never reached, 40 twice (the lowest seed); b: 201 past the bound
    assert list(zip(picked.searcher, picked.seed, strict=True)) == [("a", 2), ("b", 2)]
    assert list(sample(runs, 2, 8).seed) == [0]  # nothing of a within 8


def test_a_run_that_comes_out_different_is_named(tmp_path):
    out = tmp_path / "runs"
    assert miss_rate(["--landscape", str(W16), "--searcher", "gp no priors", "--searcher", "random", "--seeds", "3",
                      "--budget", "20", "--out", str(out)]) == 0  # fmt: skip
    assert check(out, per_searcher=3, within=20) == []
    runs = pd.read_csv(out / "runs.csv", keep_default_na=False)
    slowest = sample(runs, 1, 20)
    row = slowest[slowest.searcher == "gp no priors"].index[0]
    committed = int(runs.loc[row, "evals_to_98"])
    runs.loc[row, "evals_to_98"] = committed - 1  # as if the searcher had changed since
    runs.to_csv(out / "runs.csv", index=False)
    lines = check(out, per_searcher=3, within=20)
    assert len(lines) == 1 and lines[0].endswith(f"committed {committed - 1}, replayed {committed}")
    assert "gp no priors on w16_landscape" in lines[0]
    assert main([str(out)]) == 1


@pytest.mark.parametrize("argv, message", [([], "give folders or --all"), (["--all", "x"], "give folders or --all"),
                                           (["--all", "--within", "0"], "at least 1"),
                                           (["nowhere"], "no runs.csv and README.md in nowhere")])  # fmt: skip
def test_bad_flags_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert message in capsys.readouterr().err


def test_a_folder_without_a_command_is_refused_by_name(tmp_path, capsys):
    pd.DataFrame({"searcher": ["gp"]}).to_csv(tmp_path / "runs.csv", index=False)
    (tmp_path / "README.md").write_text("# a table someone wrote by hand\n")
    with pytest.raises(ValueError, match=f"{tmp_path}: cannot replay its runs"):
        check(tmp_path)
    with pytest.raises(SystemExit):
        main([str(tmp_path)])
    assert "no 'Measured by:' command" in capsys.readouterr().err
