"""benchmarks/landscape_remeasure: the top configs it picks, its summary, and the refined landscape replays use;
benchmarks/search_table reads FILE::KEY and --remeasured."""

import numpy as np
import pandas as pd
import pytest

from benchmarks.landscape_remeasure import refined, summary, top_configs
from benchmarks.search_table import landscapes, measure
from benchmarks.search_table import main as search_table_main
from raytune_attn.tune.search.landscape import load_landscape

KEY = "dense-b1-hq2-hkv2-sq64-sk64-d32-full-float16"
GPU = "NVIDIA H100 80GB HBM3"


def _table(tmp_path, name="toy"):
    # 4 configs of one problem; the best recorded (BLOCK_M 64, BLOCK_N 32) is one the re-measure puts second.
    rows = [(32, 16, 100.0), (32, 32, 90.0), (64, 16, 80.0), (64, 32, 101.0)]
    df = pd.DataFrame([{"gpu": GPU, "problem_key": KEY, "BLOCK_M": m, "BLOCK_N": n, "num_warps": 4, "status": "ok",
                        "tflops": t} for m, n, t in rows])  # fmt: skip
    other = df.assign(problem_key=KEY.replace("sq64", "sq128"), tflops=df["tflops"] * 2)
    path = tmp_path / f"{name}.parquet"
    pd.concat([df, other]).to_parquet(path, index=False)
    return path


def _remeasure(path, rounds):
    """Rows as the script writes them: `rounds` maps (BLOCK_M, BLOCK_N) -> re-measured TFLOP/s per round."""
    recorded = {(32, 16): 100.0, (32, 32): 90.0, (64, 16): 80.0, (64, 32): 101.0}
    rows = []
    for i, ((m, n), values) in enumerate(rounds.items()):
        cfg = str({"BLOCK_M": m, "BLOCK_N": n, "num_warps": 4})
        rows += [{"landscape": path.stem, "problem_key": KEY, "gpu": GPU, "config": cfg,
                  "recorded_tflops": recorded[m, n], "config_index": i, "round": r, "status": "ok", "reason": "",
                  "tflops": v} for r, v in enumerate(values)]  # fmt: skip
    return pd.DataFrame(rows)


def test_top_configs_are_the_recorded_best_of_the_first_key(tmp_path):
    path = _table(tmp_path)
    key, best = top_configs(str(path), None, 2)
    assert key == KEY.replace("sq64", "sq128")  # sorted keys: "sq128" < "sq64"
    assert [(c["BLOCK_M"], c["BLOCK_N"]) for c, _ in best] == [(64, 32), (32, 16)]
    assert [v for _, v in best] == [202.0, 200.0]
    key, best = top_configs(str(path), KEY, 3)
    assert key == KEY and [v for _, v in best] == [101.0, 100.0, 90.0]


def test_refined_puts_medians_on_the_recorded_scale(tmp_path):
    path = _table(tmp_path)
    # Re-measured on a machine 5% slower: (64, 32) 95, 96, 97 -> median 96; (32, 16) median 96.9; (32, 32) 85.5.
    rm = _remeasure(path, {(64, 32): [97.0, 95.0, 96.0], (32, 16): [96.9, 97.5, 96.0], (32, 32): [85.5, 85.0, 86.0]})
    land = load_landscape(path, select={"problem_key": KEY})
    out = refined(land, rm, path=path, key=KEY)
    scale = np.median([101.0 / 96.0, 100.0 / 96.9, 90.0 / 85.5])
    assert out.value({"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4}) == pytest.approx(96.0 * scale)
    assert out.value({"BLOCK_M": 32, "BLOCK_N": 16, "num_warps": 4}) == pytest.approx(96.9 * scale)
    assert out.value({"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4}) == pytest.approx(85.5 * scale)
    assert out.value({"BLOCK_M": 64, "BLOCK_N": 16, "num_warps": 4}) == 80.0  # not re-measured: as recorded
    assert land.value({"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4}) == 101.0  # the input is left as it was
    # Another key of the same file has no re-measure: unchanged.
    other = KEY.replace("sq64", "sq128")
    assert refined(load_landscape(path, select={"problem_key": other}), rm, path=path, key=other).best == 202.0


def test_refined_refuses_another_gpu_and_unknown_configs(tmp_path):
    path = _table(tmp_path)
    land = load_landscape(path, select={"problem_key": KEY})
    rm = _remeasure(path, {(64, 32): [97.0, 95.0]})
    with pytest.raises(ValueError, match="re-measured on \\['NVIDIA H200'\\]"):
        refined(land, rm.assign(gpu="NVIDIA H200"), path=path, key=KEY)
    bad = rm.assign(config=str({"BLOCK_M": 128, "BLOCK_N": 32, "num_warps": 4}))
    with pytest.raises(ValueError, match="not in the recorded table"):
        refined(land, bad, path=path, key=KEY)


def test_summary_ranks_by_median_within_each_problem(tmp_path):
    path = _table(tmp_path)
    rm = _remeasure(path, {(64, 32): [97.0, 95.0, 96.0], (32, 16): [96.9, 97.5, 96.0], (32, 32): [85.5, 85.0, 86.0]})
    s = summary(rm).set_index("config_index")
    assert s["rank_remeasured"].tolist() == [2, 1, 3]
    assert s.loc[0, "median_rel"] == pytest.approx(96.0 / 96.9)
    assert s.loc[1, "recorded_rel"] == pytest.approx(100.0 / 101.0)
    assert s.loc[0, "spread"] == pytest.approx(2.0 / 96.0)


def test_search_table_takes_file_and_key(tmp_path):
    path = _table(tmp_path)
    assert landscapes([f"{path}::{KEY}"], 1) == [(path, KEY)]
    assert landscapes([path], 0) == [(path, KEY.replace("sq64", "sq128")), (path, KEY)]


def test_search_table_refuses_a_missing_remeasure_before_any_replay(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        search_table_main(["--remeasured", str(tmp_path / "none.parquet"), "--seeds", "1", "--budget", "1",
                           "--no-warm"])  # fmt: skip
    assert e.value.code == 2
    assert "--remeasured" in capsys.readouterr().err


def test_search_table_refuses_two_remeasures_of_one_problem_before_any_replay(tmp_path, capsys):
    path = _table(tmp_path)
    first, second = tmp_path / "first.parquet", tmp_path / "second.parquet"
    _remeasure(path, {(64, 32): [97.0, 95.0]}).to_parquet(first, index=False)
    _remeasure(path, {(32, 16): [96.0, 96.5]}).to_parquet(second, index=False)
    with pytest.raises(SystemExit) as e:
        search_table_main(["--landscape", f"{path}::{KEY}", "--remeasured", str(first), "--remeasured", str(second),
                           "--seeds", "1", "--budget", "1", "--no-warm"])  # fmt: skip
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"both re-measure {path.stem} {KEY}" in err and "first.parquet" in err and "second.parquet" in err


def test_search_table_refuses_a_remeasure_without_its_columns(tmp_path, capsys):
    bad = tmp_path / "bad.parquet"
    pd.DataFrame({"config": ["{}"], "tflops": [1.0]}).to_parquet(bad, index=False)
    with pytest.raises(SystemExit) as e:
        search_table_main(["--remeasured", str(bad), "--seeds", "1", "--budget", "1", "--no-warm"])
    assert e.value.code == 2
    assert "bad.parquet: not a re-measure table" in capsys.readouterr().err


def test_measure_refines_each_table_from_the_file_that_re_measured_it(tmp_path):
    # Two tables, each re-measured in its own file: given both files, each replay reads its own table's medians,
    # the same figures as given its file alone.
    a, b = _table(tmp_path, "a"), _table(tmp_path, "b")
    rm_a = tmp_path / "rm_a.parquet"
    rm_b = tmp_path / "rm_b.parquet"
    # Re-measured, (32, 16) beats the recorded best of a; of b nothing changes rank.
    _remeasure(a, {(64, 32): [90.0, 91.0, 90.5], (32, 16): [101.0, 100.5, 101.5]}).to_parquet(rm_a, index=False)
    _remeasure(b, {(64, 32): [101.0, 100.0], (32, 16): [99.0, 99.5]}).to_parquet(rm_b, index=False)
    for path, own in ((a, rm_a), (b, rm_b)):
        both = measure(path, KEY, seeds=2, budget=4, noise=0.0, remeasured=[rm_a, rm_b])
        alone = measure(path, KEY, seeds=2, budget=4, noise=0.0, remeasured=[own])
        assert both == alone
    land = load_landscape(a, select={"problem_key": KEY})
    refined_a = refined(land, pd.concat([pd.read_parquet(rm_a), pd.read_parquet(rm_b)]), path=a, key=KEY)
    recorded_best = land.space.key({"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4})
    new_best = land.space.key({"BLOCK_M": 32, "BLOCK_N": 16, "num_warps": 4})
    assert max(land.values, key=land.values.get) == recorded_best
    assert max(refined_a.values, key=refined_a.values.get) == new_best
