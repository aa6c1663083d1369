"""benchmarks/score_vs_exhaustive: a sweep's winner and the configs it tried, valued on an exhaustive landscape."""

import pandas as pd
import pytest

from benchmarks.score_vs_exhaustive import load_landscapes, score, trials_to

KEY = "dense-b1-hq2-hkv2-sq64-sk64-d64-full-float16"


def _cfg(m: int, n: int, warps: int = 4) -> dict:
    return {"BLOCK_M": m, "BLOCK_N": n, "PRE_LOAD_V": False, "num_warps": warps, "num_stages": 2}


def _row(cfg: dict, tflops: float | None, *, trial_id: str, t: int, status: str = "ok", kind: str = "trial") -> dict:
    return {"problem_key": KEY, "kind": kind, "trial_id": trial_id, "status": status, "tflops": tflops,
            "timestamp": pd.Timestamp("2026-11-28", tz="UTC") + pd.Timedelta(seconds=t), **cfg}


@pytest.fixture
def landscape(tmp_path):
    rows = [_row(_cfg(64, 32), 50.0, trial_id="a", t=0), _row(_cfg(64, 64), 99.0, trial_id="b", t=1),
            _row(_cfg(128, 64), 100.0, trial_id="c", t=2), _row(_cfg(128, 128), None, trial_id="d", t=3,
                                                                status="invalid")]  # fmt: skip
    path = tmp_path / "landscape.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_trials_to_counts_from_one_and_none_when_never_reached():
    assert trials_to([0.5, 0.97, 0.99, 1.0], 0.98) == 3
    assert trials_to([0.5, 0.9], 0.98) is None


def test_score_values_the_final_winner_and_counts_trials_in_finishing_order(landscape, tmp_path):
    lands = load_landscapes([str(landscape)])
    assert lands[KEY] == {(64, 32, False, 4, 2): 50.0, (64, 64, False, 4, 2): 99.0, (128, 64, False, 4, 2): 100.0}
    trials = pd.DataFrame([
        _row(_cfg(64, 64), 97.0, trial_id="t4", t=40),  # finished last: the 4th trial
        _row(_cfg(64, 32), 51.0, trial_id="t1", t=10),
        _row(_cfg(128, 128), None, trial_id="t2", t=20, status="invalid"),  # a failed trial is still a trial
        _row(_cfg(64, 32), 20.0, trial_id="t3", t=30, status="stopped"),
        _row(_cfg(64, 64), 98.5, trial_id="t4-final", t=50),  # the final re-measure names the winner
        _row(_cfg(64, 32), 52.0, trial_id="t1-final", t=51),
        _row(_cfg(128, 64), 500.0, trial_id="base", t=5, kind="baseline"),  # not a trial of the search
    ])  # fmt: skip
    path = tmp_path / "trials.parquet"
    trials.to_parquet(path)
    (row,) = score("run", str(path), lands)
    assert row["sweep_best_tflops"] == 98.5
    assert row["winner_in_exhaustive"] == pytest.approx(0.99)
    assert row["best_measured_in_exhaustive"] == pytest.approx(0.99)
    assert row["trials_to_98"] == 4  # 51, failed, stopped 64x32, then 64x64 at 0.99 of the best
    assert row["trials"] == 4  # the final re-measure's two are not trials of the search
    assert row["exhaustive_best"] == 100.0 and row["exhaustive_configs"] == 3


def test_a_later_landscape_replaces_an_earlier_ones_keys(landscape, tmp_path):
    again = tmp_path / "again.parquet"
    pd.DataFrame([_row(_cfg(64, 32), 120.0, trial_id="x", t=0)]).to_parquet(again)
    assert load_landscapes([str(landscape), str(again)])[KEY] == {(64, 32, False, 4, 2): 120.0}


def test_summary_line_counts_own_trials_apart_from_the_final_remeasure_and_names_no_trial_when_none_reached():
    from benchmarks.score_vs_exhaustive import summary_line

    g = pd.DataFrame({"winner_in_exhaustive": [1.0, 0.99, 0.5], "best_measured_in_exhaustive": [1.0, 0.99, 0.9],
                      "trials_to_98": [12.0, None, None]})
    assert summary_line("s0", g) == ("s0: 2 of 3 keys' winners within 2%; own trials within 2% on 1, the last at "
                                     "trial 12; with the final re-measure's 2; min 0.50")
    none = g.assign(trials_to_98=[None, None, None])
    assert "own trials within 2% on 0;" in summary_line("s1", none)


def test_group_line_counts_the_searches_of_every_run_of_a_group_and_names_the_lowest_winner():
    from benchmarks.score_vs_exhaustive import group_line

    g = pd.DataFrame({"run": ["a/s0", "a/s0", "a/s1"], "problem_key": ["k1", "k2", "k1"],
                      "winner_in_exhaustive": [1.0, 0.97, 0.99], "trials_to_98": [12.0, None, 30.0],
                      "trials": [50, 50, 50]})
    # k1: median of 12 and 30 = 21; k2: never, its 50 trials + 1 = 51; sqrt(21 * 51) = 32.7
    assert group_line("a", g) == ("a (2 sweeps, 3 searches): winners within 2% in 2; own trials within 2% in 2, "
                                  "the last at trial 30; trials to 2%, geometric mean over keys of the median: 32.7; "
                                  "lowest winner 0.970 (a/s0, k2)")


def test_ratio_line_divides_two_groups_trials_to_2_percent_and_bounds_it_over_their_sweeps():
    from benchmarks.bootstrap import ratio_interval
    from benchmarks.score_vs_exhaustive import ratio_line

    def group(name, trials_to):  # sweeps x keys k1, k2; None: never within 2% in 50 trials (counted 51)
        return pd.DataFrame([{"run": f"{name}/s{i}", "problem_key": f"k{j + 1}", "trials_to_98": t, "trials": 50}
                             for i, row in enumerate(trials_to) for j, t in enumerate(row)])  # fmt: skip

    a, b = group("a", [[10, 20], [12, None], [8, 30]]), group("b", [[20, 40], [30, 50]])
    # a: k1 median 10, k2 median of 20, 51, 30 = 30; b: k1 25, k2 45; sqrt(300) / sqrt(1125) = 0.516
    lo, hi = ratio_interval(a.assign(v=a.trials_to_98.fillna(51)), b.assign(v=b.trials_to_98.fillna(51)),
                            problem=["problem_key"], unit="run", value="v")  # fmt: skip
    want = f"a / b, trials to 2%: 0.52x (95% interval over the sweeps {lo:.2f}-{hi:.2f}x, 3 and 2 sweeps)"
    assert ratio_line("a", a, "b", b) == want


@pytest.mark.parametrize("ratio", ["a:c", "a", "a:b:c"])
def test_a_ratio_of_groups_not_given_is_refused_before_scoring(ratio, capsys):
    from benchmarks.score_vs_exhaustive import main

    with pytest.raises(SystemExit):
        main(["--landscape", "nowhere.parquet", "--sweep", "a/s0=x.parquet", "--sweep", "b/s0=y.parquet",
              "--ratio", ratio, "--out", "unused.csv"])  # fmt: skip
    assert "--ratio takes A:B, two groups of the --sweep runs (a, b)" in capsys.readouterr().err


def test_a_ratio_of_a_group_with_one_sweep_is_refused_before_scoring(capsys):
    from benchmarks.score_vs_exhaustive import main

    with pytest.raises(SystemExit):
        main(["--landscape", "nowhere.parquet", "--sweep", "a/s0=x.parquet", "--sweep", "a/s1=x.parquet",
              "--sweep", "b/s0=y.parquet", "--ratio", "a:b", "--out", "unused.csv"])  # fmt: skip
    assert "--ratio a:b: its interval draws each group's sweeps again, which needs at least 2 a group; b has 1" in (
        capsys.readouterr().err)


def test_help_prints(capsys):
    from benchmarks.score_vs_exhaustive import main

    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "--ratio" in capsys.readouterr().out
