"""benchmarks/sibling_replay: lockstep searches alone match independent replays; sharing is a warm start."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.sibling_replay import lockstep, main, share
from raytune_attn.tune.search.gp import GPSearcher
from raytune_attn.tune.search.landscape import load_landscape, read_table
from raytune_attn.tune.search.replay import noise_factors, run_searcher

TABLE = Path("tests/data/heldout/h200_short_full.parquet")


def _lands():
    df = read_table(TABLE)
    return {k: load_landscape(df[df["problem_key"] == k]) for k in sorted(df["problem_key"].unique())}


def test_searches_alone_in_lockstep_are_independent_replays():
    budget, seed, noise = 12, 3, 0.02
    got = lockstep(TABLE, "alone", seed, budget, noise)
    for key, land in _lands().items():
        s = GPSearcher(land.space, seed=seed, priors=False, problem=land.problem or None)
        run = run_searcher(s, land, budget, noise=noise_factors(land, noise, seed))
        assert got[key] == run.evals_to(0.98 * land.best, budget), key


def test_sharing_gives_each_search_the_others_results_as_its_warm_start():
    lands = _lands()
    keys = list(lands)
    rng = np.random.default_rng(0)
    rows = []
    for k, land in lands.items():  # 8 measured configs of each problem, one of them failed
        recorded = list(land.values)
        for n, i in enumerate(rng.permutation(len(recorded))[:8]):
            cfg = land.space.to_config(recorded[i])
            rows.append({"problem_key": k, **cfg, "tflops": np.nan if n == 0 else 10.0 + n,
                         "status": "invalid" if n == 0 else "ok"})  # fmt: skip
    told = pd.DataFrame(rows)

    def fresh():
        return {k: GPSearcher(land.space, seed=0, priors=False, problem=land.problem or None)
                for k, land in lands.items()}  # fmt: skip

    def warm(s):
        return [(key, v) for _, key, v in s._warm]

    def want(k, table):
        land = lands[k]
        return warm(GPSearcher(land.space, seed=0, priors=False, problem=land.problem or None, warm_start=table))

    searchers = fresh()
    share(searchers, told)
    for k, s in searchers.items():
        assert warm(s) == want(k, told[told["problem_key"] != k])
        assert sum(v is not None for _, _, v in s._warm) >= 6 and s.design_configs() == []  # the design skipped
    kept = fresh()
    designs = {k: s.design_configs() for k, s in kept.items()}
    share(kept, told, keep_design=True, among={k: {keys[0]} - {k} for k in keys})
    for k, s in kept.items():
        assert s.design_configs() == designs[k]
        assert warm(s) == ([] if k == keys[0] else want(k, told[told["problem_key"] == keys[0]]))


def test_cli_refuses_a_missing_table(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--landscape", str(tmp_path / "none.parquet")])
    assert "no such file" in capsys.readouterr().err


def test_the_table_holds_each_problem_s_evaluations_and_names_its_command(tmp_path, capsys):
    out = tmp_path / "t.md"
    assert main(["--landscape", str(TABLE), "--seeds", "1", "--budget", "3", "--mode", "alone", "--out", str(out)]) == 0
    got = lockstep(TABLE, "alone", 0, 3, 0.0)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| dense-")]
    assert rows == [f"| {k} | {v:g} / {v} ({int(v <= 3)}/1) |" for k, v in got.items()]
    text = out.read_text()
    assert f"--landscape {TABLE} --seeds 1 --budget 3 --mode 'alone'`" in text and rows[0] in text
