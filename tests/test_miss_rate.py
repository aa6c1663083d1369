"""benchmarks/miss_rate: its landscapes are the replay tables' of docs/search.md, its runs are replay's, one long run
counts every shorter budget, and its tables count the runs."""

import re
import shlex
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.bootstrap import ratio_interval
from benchmarks.miss_rate import (
    AT,
    SETS,
    against_base,
    by_group,
    main,
    measure,
    medians,
    misses,
    readme_command,
    report,
    saved_runs,
    worst_runs,
)
from benchmarks.search_table import landscapes
from raytune_attn.tune.search.landscape import load_landscape
from raytune_attn.tune.search.replay import replay

ROOT = Path(__file__).parents[1]
BARS_DOC = ROOT / "docs" / "benchmarks" / "search" / "bars.md"
HELDOUT_DOC = ROOT / "docs" / "benchmarks" / "search" / "heldout.md"
SHORT = Path("tests/data/heldout/h200_short_full.parquet")


def test_sets_are_the_held_out_tables_of_the_search_doc():
    """Each held-out set is the --landscape list and --keys-per-file of one search_table command of the held-out
    landscapes' doc, and the bars' doc counts their landscapes."""
    commands = {}
    for line in HELDOUT_DOC.read_text().splitlines():
        if "benchmarks.search_table" in line and "--section" in line and "--warm-from" not in line:
            argv = shlex.split(line.strip())
            section = argv[argv.index("--section") + 1]
            files = [argv[i + 1] for i, a in enumerate(argv) if a == "--landscape"]
            commands[section] = (sorted(files), int(argv[argv.index("--keys-per-file") + 1]))
    got = {(tuple(sorted(str(Path(p).relative_to(ROOT)) for p in files)), per)
           for name, (files, per) in SETS.items() if name != "developed on"}  # fmt: skip
    want = {(tuple(commands[s][0]), commands[s][1])
            for s in ("heldout", "heldout-new", "heldout-h200-short", "heldout-h200-study", "heldout-h200-study2",
                      "heldout-h200-study3")}  # fmt: skip
    assert got == want
    n = sum(len(landscapes(files, per)) for files, per in SETS.values())
    counted = re.search(r"over the \w+ tables of (\d+) landscapes", BARS_DOC.read_text())
    assert counted and n == int(counted.group(1))


def test_runs_are_replays_and_a_longer_budget_counts_every_shorter_one():
    key = sorted(pd.read_parquet(SHORT).problem_key.unique())[0]
    land = load_landscape(SHORT, select={"problem_key": key})
    kw = {"seeds": 3, "seed_start": 2, "noise": 0.0}
    (knobs, long), (_, short) = (measure(SHORT, key, "gp no priors", budget=b, **kw) for b in (24, 12))
    assert knobs == len(land.space.names)
    assert short == [min(e, 13) for e in long]  # a run's n-th suggestion does not depend on the budget
    s = replay(land, ["gp"], budget=24, seeds=3, seed_start=2, options={"gp": {"priors": False}})["gp"]
    assert s["evals_to_98"]["max"] == max(long) and s["reached_98"] == sum(e <= 24 for e in long)


def _runs():
    rows = [("a", "x", "gp", [3, 40, 201]), ("a", "y", "gp", [10, 10, 10]), ("b", "z", "gp", [60, 5, 5]),
            ("a", "x", "tpe", [100, 120, 20]), ("a", "y", "tpe", [1, 2, 3]), ("b", "z", "tpe", [80, 90, 99])]
    return pd.DataFrame([{"set": s, "landscape": land, "problem_key": "", "knobs": 5 if land == "z" else 8,
                          "searcher": name, "seed": i, "evals_to_98": e}
                         for s, land, name, evals in rows for i, e in enumerate(evals)])  # fmt: skip


def test_tables_count_runs_missing_after_each_budget():
    text = misses(_runs(), [25, 50, 100, 300], 200)
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()[2:]}
    assert "| 9 | 3 (33.3%) | 2 (22.2%) | 1 (11.1%) | > 200 (1 runs never) |" in rows["gp"]  # 300 > budget: dropped
    assert "| 9 | 5 (55.6%) | 5 (55.6%) | 1 (11.1%) | 120 |" in rows["tpe"]
    sets = by_group(_runs(), "set", [50, 100])
    assert "| a | 2 | 1 / 1 of 6 | 2 / 1 of 6 |" in sets and "| b | 1 | 1 / 0 of 3 | 3 / 0 of 3 |" in sets
    knobs = by_group(_runs(), "knobs", [50]).splitlines()[2:]
    assert knobs == ["| 8 | 2 | 1 of 6 | 2 of 6 |", "| 5 | 1 | 1 of 3 | 3 of 3 |"]
    worst = worst_runs(_runs(), "gp", [50, 100], 200)
    assert "| x  | 8 | 1 / 1 of 3 | > 200 |" in worst and "| z  | 5 | 1 / 0 of 3 | 60 |" in worst
    assert "| y " not in worst
    assert "| none | | | |" in worst_runs(_runs(), "gp", [250], 200)


def test_bar_a_pools_the_medians_capped_at_the_bar():
    """Per landscape the median of the seeds' evaluations, a run past the bar counted bar + 1; geometric mean over the
    landscapes: gp (40, 10, 5), tpe (51, 2, 51)."""
    assert medians(_runs(), 50) == "3 landscapes: gp 12.6, tpe 17.3"
    named = _runs().replace({"searcher": {"gp": "gp no priors"}})
    capped = named.assign(e=named.evals_to_98.clip(upper=51))
    lo, hi = ratio_interval(*(capped[capped.searcher == s] for s in ("gp no priors", "tpe")),
                            problem=["set", "landscape", "problem_key"], unit="seed", value="e")  # fmt: skip
    assert medians(named, 50).endswith(f"(gp no priors / tpe 0.73x, 95% interval over the seeds {lo:.2f}-{hi:.2f}x)")
    assert medians(named[named.seed == 0], 50).endswith("tpe 0.84x)")  # one seed (3, 10, 51 / 51, 1, 51): no interval
    assert medians(_runs(), 100) == "3 landscapes: gp 12.6, tpe 26.2"  # tpe: x 100, y 2, z 90


def test_command_writes_the_runs_and_the_tables(tmp_path, capsys):
    out = tmp_path / "mr"
    assert main(["--set", "H200 study", "--searcher", "random", "--seeds", "2", "--budget", "6", "--at", "3",
                 "--out", str(out)]) == 0  # fmt: skip
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 4 and set(runs.searcher) == {"random"} and list(runs.seed) == [0, 1, 0, 1]
    for (land, key), r in runs.groupby(["landscape", "problem_key"]):
        assert (r.knobs.iloc[0], list(r.evals_to_98)) == measure(Path(f"tests/data/heldout/{land}.parquet"), key,
                                                                 "random", seeds=2, seed_start=0, budget=6, noise=0.0)
    readme = (out / "README.md").read_text()
    table = misses(runs, [3], 6)
    assert "--set 'H200 study'" in readme and table in readme and table in capsys.readouterr().out


def test_given_landscapes_replace_the_sets_each_file_a_set(tmp_path):
    keys = sorted(pd.read_parquet(SHORT).problem_key.unique())
    other = Path("tests/data/heldout/h200_fp16_d256_full.parquet")
    out = tmp_path / "mr"
    assert main(["--landscape", str(SHORT), "--landscape", f"{other}::{pd.read_parquet(other).problem_key.iloc[0]}",
                 "--searcher", "random", "--seeds", "1", "--budget", "4", "--at", "2", "--out", str(out)]) == 0
    runs = pd.read_csv(out / "runs.csv", keep_default_na=False)
    assert list(runs.set) == [SHORT.stem] * len(keys) + [other.stem]  # every key of a file, or the one named
    assert list(runs.problem_key[: len(keys)]) == keys


def test_screen_replays_the_candidates_a_sweep_would_try(tmp_path):
    """--screen: each run is replay's with the sweep's screen of that table."""
    from raytune_attn.tune.search.replay import run_seeds

    path = Path("tests/data/heldout/h200_fp16_d256_full.parquet")
    out = tmp_path / "mr"
    assert main(["--landscape", str(path), "--searcher", "random", "--seeds", "2", "--budget", "30", "--at", "10",
                 "--screen", "--out", str(out)]) == 0  # fmt: skip
    land = load_landscape(path)
    want = [r.evals_to(0.98 * land.best, 30) for r in run_seeds(land, "random", budget=30, seeds=2, screen=True)]
    assert list(pd.read_csv(out / "runs.csv").evals_to_98) == want
    assert "--screen" in (out / "README.md").read_text()


def test_saved_runs_pool_into_the_report_of_one_replay_of_every_seed(tmp_path, capsys):
    """--runs: seeds 0-1 and 2 saved apart report as the replay of seeds 0-2 does."""
    common = ["--set", "H200 study", "--searcher", "random", "--budget", "6", "--at", "3"]
    saves = {"a": ["--seeds", "2"], "b": ["--seeds", "1", "--seed-start", "2"], "all": ["--seeds", "3"]}
    for name, seeds in saves.items():
        assert main([*common, *seeds, "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    pooled = ["--runs", str(tmp_path / "a" / "runs.csv"), "--runs", str(tmp_path / "b" / "runs.csv")]
    assert main([*pooled, "--budget", "6", "--at", "3", "--out", str(tmp_path / "pooled")]) == 0
    assert not (tmp_path / "pooled" / "runs.csv").exists()  # the runs stay in the files the command names
    got, want = ((tmp_path / d / "README.md").read_text().split("\n") for d in ("pooled", "all"))
    assert "--runs" in got[4] and got[:4] + got[5:] == want[:4] + want[5:]  # all but the command
    assert "\n".join(got) + "\n" == "# Runs missing 2% of the best, by budget\n\n" + capsys.readouterr().out


def test_saved_runs_are_cut_to_a_smaller_budget_as_a_shorter_replay_would_be(tmp_path):
    common = ["--set", "H200 study", "--searcher", "random", "--seeds", "2", "--at", "3"]
    for name, budget in (("long", "12"), ("short", "5")):
        assert main([*common, "--budget", budget, "--out", str(tmp_path / name)]) == 0
    long, short = (pd.read_csv(tmp_path / d / "runs.csv") for d in ("long", "short"))
    assert (long.evals_to_98 > 6).any()  # the cut changes something
    pd.testing.assert_frame_equal(saved_runs([tmp_path / "long" / "runs.csv"], 5), short)
    short.assign(seed=short.seed + 2).to_csv(tmp_path / "later.csv", index=False)
    pooled = saved_runs([tmp_path / "long" / "runs.csv", tmp_path / "later.csv"])  # no budget: the smallest, 5
    pd.testing.assert_frame_equal(pooled, pd.concat([short, short.assign(seed=short.seed + 2)], ignore_index=True))


@pytest.mark.parametrize("extra, message", [
    (["--screen"], "--screen would choose runs to replay"),
    (["--seeds", "3"], "--seeds would choose"),
    (["--budget", "8"], "ran 6 evaluations, fewer than the budget 8"),
    (["--budget", "200"], "ran 6 evaluations, fewer than the budget 200"),  # a given --budget, not the replays' 200
    (["--searcher", "tpe"], "no run of tpe in the files"),
    (["--runs", "nowhere.csv"], "--runs nowhere.csv: no such file"),
    (["--runs", "{dir}/runs.csv"], "is in two of the runs files"),
    (["--runs", "{dir}/README.md"], "no column set, landscape"),
])  # fmt: skip
def test_bad_saved_runs_are_refused(tmp_path, capsys, extra, message):
    assert main(["--set", "H200 study", "--searcher", "random", "--seeds", "1", "--budget", "6", "--out",
                 str(tmp_path)]) == 0  # fmt: skip
    with pytest.raises(SystemExit):
        main(["--runs", str(tmp_path / "runs.csv"), "--budget", "6", *[e.format(dir=tmp_path) for e in extra]])
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [(["--at", "0"], "--at"), (["--budget", "0"], "--budget"),
                                           (["--set", "nowhere"], "--set"),
                                           (["--landscape", "nowhere.parquet"], "no such file"),
                                           (["--landscape", str(SHORT), "--set", "H200 study"], "give one of them")])
def test_bad_flags_are_refused_before_any_replay(argv, message, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("readme", sorted(p for d in ("miss_rate*", "variants_*")
                                          for p in (ROOT / "docs" / "benchmarks" / "search").glob(f"{d}/**/README.md")),
                         ids=lambda p: str(p.parent.relative_to(ROOT / "docs" / "benchmarks" / "search")))
def test_committed_reports_are_their_runs_reports(readme, capsys):
    """Each committed README.md is what its command prints from the runs.csv beside it (or, for --runs, the files it
    names): the tables and bar (a)'s figures in the docs come from the committed runs."""
    text = readme.read_text()
    command = readme_command(text)
    argv = shlex.split(command)[3:]
    if "--runs" not in argv:
        budget = int(argv[argv.index("--budget") + 1])
        at = sorted({int(argv[i + 1]) for i, a in enumerate(argv) if a == "--at"} or set(AT))
        runs = pd.read_csv(readme.parent / "runs.csv", keep_default_na=False)
        assert set(runs.budget) == {budget}
        assert text == f"# Runs missing 2% of the best, by budget\n\n{report(runs, budget, at, command)}"
    else:
        argv = [str(ROOT / a) if a.endswith("runs.csv") else a for a in argv[: argv.index("--out")]]
        assert main(argv) == 0
        printed = capsys.readouterr().out
        assert text.split("\n")[5:] == printed.split("\n")[3:-1]  # all but the command, whose paths are absolute here


def test_variants_are_set_beside_the_gp_without_priors_on_the_same_seeds():
    """A variant twice as slow on every seed is 2x with no spread, paired; one equal to it 1x."""
    gp = _runs()[lambda r: r.searcher == "gp"]
    base = gp.assign(searcher="gp no priors", evals_to_98=gp.evals_to_98 // 5 + 1)  # 1-41: none capped at 101
    slow = base.assign(searcher="variant: slow", evals_to_98=base.evals_to_98 * 2)
    same = base.assign(searcher="variant: same")
    line = against_base(pd.concat([base, slow, same]), 100)
    assert line.endswith("slow 2.000x (2.00-2.00x); same 1.000x (1.00-1.00x).")
    assert against_base(pd.concat([base, _runs()]), 50) is None  # no variant


def test_a_variant_searcher_runs_the_search_variants_class(tmp_path):
    from benchmarks.search_variants import variant_runs

    path = Path("tests/data/heldout/h200_fp16_d256_full.parquet")
    key = sorted(pd.read_parquet(path).problem_key.unique())[0]
    knobs, evals = measure(path, key, "variant: long length scales", seeds=2, seed_start=0, budget=14, noise=0.0,
                           screen=True)  # fmt: skip
    land, runs = variant_runs(path, key, "long length scales", seeds=2, budget=14, screen=True)
    assert knobs == len(land.space.names) and evals == [r.evals_to(0.98 * land.best, 14) for r in runs]


def test_help_prints_every_searcher(capsys):
    """The help lists the variants, one named with a % sign (argparse formats help strings with %)."""
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "variant: significant 1%" in " ".join(capsys.readouterr().out.split())
