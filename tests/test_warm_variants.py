"""benchmarks/warm_variants: its pairs, its reference column against search_table's, the best-mean variant's steps."""

import numpy as np

from benchmarks.search_table import DATA, WARM_PAIRS, measure_warm
from benchmarks.warm_variants import BestMeanAmongLocalSteps, main, measure, pairs
from raytune_attn.tune.search.space import SearchSpace


def test_the_pairs_are_search_tables_and_both_directions_of_the_two_gpus_tables():
    ps = pairs()
    assert len(ps) == 24 and len(set(ps)) == 24
    assert ps[: len(WARM_PAIRS)] == [(DATA / t, k, DATA / s) for t, k, s in WARM_PAIRS]
    for target, _, source in ps:
        assert target.is_file() and source.is_file() and target != source
    for target, _, source in ps[len(WARM_PAIRS):]:  # the same shape on the other GPU
        assert source.name.replace("h200_", "h100_") == target.name.replace("h200_", "h100_")


def test_the_warm_model_column_is_the_replay_of_search_table():
    target, key, source = pairs()[1]  # H100 D=64 full from the H200's short full table
    want = measure_warm(target, key, source, seeds=2, budget=4)["gp warm (model)"]
    assert list(measure(target, key, source, "warm model", 2, 4)) == want


def test_the_best_mean_joins_the_local_steps_only_with_earlier_results():
    space = SearchSpace.from_values({"BLOCK_M": [16, 32, 64, 128], "num_warps": [1, 2, 4, 8]})
    # Earlier results rate (128, 8) best, three knob values away from what this search measures first.
    earlier = [({"BLOCK_M": m, "num_warps": w}, 0.1 + m * w / 1024) for m in (16, 32, 64, 128) for w in (1, 2, 4, 8)]
    for warm, joins in ((earlier, True), (None, False)):
        s = BestMeanAmongLocalSteps(space, seed=0, priors=False, n_initial=1, warm_start=warm)
        s._design = []
        for cfg, v in (({"BLOCK_M": 16, "num_warps": 1}, 1.0), ({"BLOCK_M": 16, "num_warps": 2}, 1.5)):
            i = s._index[space.key(cfg)]
            s._taken[i] = True
            s._observe(i, v)
        X, y, n_fit = s._training_data([])
        gp = s._fit(X, y, n_fit)
        available = np.flatnonzero(~s._taken)
        plain = super(BestMeanAmongLocalSteps, s)._neighbours(available)
        got = s._neighbours(available)
        top = int(available[np.argmax(gp.predict(s._F[available]))])
        assert set(plain) <= set(got)
        assert (top in got) and (top not in plain) if joins else list(got) == list(plain)


def test_the_command_writes_its_table(tmp_path, monkeypatch, capsys):
    import benchmarks.warm_variants as wv

    monkeypatch.setattr(wv, "pairs", lambda: pairs()[1:2])
    out = tmp_path / "t.md"
    assert main(["--seeds", "1", "--budget", "2", "--variant", "warm model", "--out", str(out)]) == 0
    target, key, source = pairs()[1]
    median, worst, reached = measure(target, key, source, "warm model", 1, 2)
    row = f"| cross-GPU pairs | {target.stem} <- {source.stem} | {median:g} / {worst} ({reached}/1) |"
    assert row in capsys.readouterr().out
    assert row in out.read_text() and "--variant 'warm model'" in out.read_text()
