import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from raytune_attn.problem import Problem
from raytune_attn.tune import results

P = Problem(2, 4, 2, 256, 256, 64, True, "float16")
DOC = Path(__file__).resolve().parents[1] / "docs" / "results-schema.md"


def prov(accel="H100", arch="sm90"):
    return {"gpu": f"NVIDIA {accel}", "vendor": "nvidia", "arch": arch, "accelerator_type": accel, "driver": "550",
            "cuda_version": "12.4", "rocm_version": "", "triton_version": "3.4.0", "torch_version": "2.8.0",
            "raytune_attn_version": "0.1.0", "kernel_source_hash": "ab" * 32, "python_version": "3.11",
            "hostname": "node1", "timestamp": "2025-01-01T00:00:00+00:00"}


def sweep_rows(sweep_id, accel="H100", arch="sm90", n=4, problem=P):
    rows = []
    for i in range(n):
        ok = i != 1
        rows.append(results.trial_row(
            problem, {"BLOCK_M": 64 * (1 + i % 2), "BLOCK_N": 32, "num_warps": 4, "num_stages": 2,
                      "PRE_LOAD_V": bool(i % 2)},
            {"status": "ok" if ok else "invalid", "reason": None if ok else "smem", "rung": 2 if ok else None,
             "tflops": 100.0 + i if ok else None, "latency_ms": 1.0 / (i + 1) if ok else None, "compile_s": 0.5,
             "bench_s": 1.5, "wall_time_s": 2.0 * i, "timestamp": 1_700_000_000 + i},
            prov(accel, arch), sweep_id=sweep_id, sweep_name="demo", trial_id=f"{sweep_id}-t{i}", searcher="gp",
            seed=7,
        ))
    rows.append(results.baseline_row(problem, "sdpa_flash", {"tflops": 90.0, "latency_ms": 1.2}, prov(accel, arch),
                                     sweep_id=sweep_id, sweep_name="demo"))
    return rows


def test_trial_row_fields_and_extra():
    r = results.trial_row(P, {"BLOCK_M": 64, "weird": 3}, {"status": "ok", "tflops": 5.0, "rung": 1, "p50": 2},
                          prov(), trial_id="t0", note="x")
    assert set(r) == set(results.COLUMNS)
    assert r["problem_key"] == P.key and r["hq"] == 4 and r["causal"] is True and r["kind"] == "trial"
    assert r["BLOCK_M"] == 64 and r["BLOCK_N"] is None
    assert r["accelerator_type"] == "H100" and r["schema_version"] == results.SCHEMA_VERSION
    assert '"config.weird": 3' in r["extra"] and '"p50": 2' in r["extra"] and '"note": "x"' in r["extra"]
    with pytest.raises(ValueError, match="status"):
        results.trial_row(P, {}, {"status": "great"})


def test_dataset_appends_across_sweeps_partitioned_and_reads_back_everywhere(tmp_path):
    out = tmp_path / "trials"
    f1 = results.write_trials(sweep_rows("s1", "H100", "sm90"), out)
    f2 = results.write_trials(sweep_rows("s2", "H100", "sm90") + sweep_rows("s2", "A100", "sm80"), out)
    assert [p.parent.name for p in f1] == ["accelerator_type=H100"]
    assert sorted(p.parent.name for p in f2) == ["accelerator_type=A100", "accelerator_type=H100"]
    assert (out / "accelerator_type=H100").is_dir() and len(list((out / "accelerator_type=H100").iterdir())) == 2

    df = results.read_trials(out)
    assert len(df) == 15 and list(df.columns) == list(results.COLUMNS)
    assert df.groupby("accelerator_type").size().to_dict() == {"A100": 5, "H100": 10}
    assert set(df["sweep_id"]) == {"s1", "s2"}
    assert df["BLOCK_M"].dtype == "Int32" and df["PRE_LOAD_V"].dtype == "boolean"
    ok = df[(df["kind"] == "trial") & (df["status"] == "ok")]
    assert ok["tflops"].max() == 103.0

    pdf = pd.read_parquet(out)  # plain pandas, hive partitions
    assert len(pdf) == 15 and sorted(pdf["accelerator_type"].astype(str).unique()) == ["A100", "H100"]
    tab = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert tab.num_rows == 15 and "accelerator_type" in tab.column_names


def test_single_file_append_is_self_contained(tmp_path):
    f = tmp_path / "RESULTS.parquet"
    results.append_trials(f, sweep_rows("s1"))
    results.append_trials(f, sweep_rows("s2", "A100", "sm80"))
    t = pq.read_table(f)
    assert t.num_rows == 10 and "accelerator_type" in t.column_names
    assert t.schema.metadata[results.SCHEMA_METADATA_KEY] == str(results.SCHEMA_VERSION).encode()
    assert sorted(set(pd.read_parquet(f)["accelerator_type"])) == ["A100", "H100"]
    df = results.read_trials(f)
    assert len(df) == 10 and df["timestamp"].dt.tz is not None


def test_duckdb_reads_the_partitioned_dataset_and_a_single_file(tmp_path):
    """The docstring's promise that duckdb reads the results as they are: the same rows as the project's reader. duckdb
    is a test dependency only (the product never imports it), so the check skips, saying so, where it is missing."""
    duckdb = pytest.importorskip("duckdb", reason="duckdb (the test extra) is not installed")
    out, f = tmp_path / "trials", tmp_path / "RESULTS.parquet"
    results.write_trials(sweep_rows("s1", "H100", "sm90"), out)
    results.write_trials(sweep_rows("s2", "H100", "sm90") + sweep_rows("s2", "A100", "sm80"), out)
    results.append_trials(f, sweep_rows("s1"))
    results.append_trials(f, sweep_rows("s2", "A100", "sm80"))

    trials = results.read_trials(out).query("kind == 'trial'")
    want = trials.groupby("accelerator_type", observed=True)["tflops"].agg(["size", "max"])
    got = duckdb.connect().sql(f"select accelerator_type, count(*) n, max(tflops) best from read_parquet("
                               f"'{out}/**/*.parquet', hive_partitioning=true) where kind = 'trial' group by 1 "
                               "order by 1").fetchall()
    assert got == sorted((str(a), int(r["size"]), float(r["max"])) for a, r in want.iterrows())
    assert duckdb.connect().sql(f"select count(*) from '{f}'").fetchall() == [(len(results.read_trials(f)),)]


def test_dataframe_round_trip(tmp_path):
    df = results.read_trials(results.write_file(sweep_rows("s1"), tmp_path / "a.parquet"))
    again = results.read_trials(results.write_file(df, tmp_path / "b.parquet"))
    pd.testing.assert_frame_equal(df, again)


def test_schema_versions_and_bad_files(tmp_path):
    table = results.to_table(sweep_rows("s1"))
    older = table.drop_columns(list(results.LATER_IN_V1))  # a v1 file from before the later knobs
    pq.write_table(older, tmp_path / "old.parquet")
    df = results.read_trials(tmp_path / "old.parquet")
    assert df["BAND_LAUNCH"].isna().all() and df["LPT_GROUP"].isna().all() and len(df) == 5

    newer = table.replace_schema_metadata({results.SCHEMA_METADATA_KEY: b"99"})
    pq.write_table(newer, tmp_path / "new.parquet")
    with pytest.raises(results.ResultsError, match=r"new\.parquet.*v99 is newer"):
        results.read_trials(tmp_path / "new.parquet")

    pq.write_table(pa.table({"a": [1]}), tmp_path / "foreign.parquet")
    with pytest.raises(results.ResultsError, match="foreign.parquet: not a raytune-attn results file"):
        results.read_trials(tmp_path / "foreign.parquet")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(results.ResultsError, match="junk.parquet"):
        results.read_trials(tmp_path / "junk.parquet")
    with pytest.raises(FileNotFoundError):
        results.read_trials(tmp_path / "missing.parquet")


def test_schema_is_documented():
    text = DOC.read_text()
    assert f"schema_version: {results.SCHEMA_VERSION}" in text or f"version {results.SCHEMA_VERSION}" in text
    documented = set(re.findall(r"^\| `([A-Za-z_]+)` \|", text, flags=re.M))
    assert set(results.COLUMNS) <= documented, sorted(set(results.COLUMNS) - documented)


def test_landscape_and_convergence(tmp_path):
    df = results.read_trials(results.write_file(sweep_rows("s1"), tmp_path / "r.parquet"))
    land = results.landscape(df, P.key)
    assert len(land) == 4 and land[1] == {"problem_key": P.key, "config": land[1]["config"], "tflops": None,
                                          "status": "invalid", "rung": None}
    assert land[0]["config"] == {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2, "PRE_LOAD_V": False}
    assert type(land[0]["config"]["BLOCK_M"]) is int and type(land[0]["config"]["PRE_LOAD_V"]) is bool
    b = results.best_so_far(df)
    assert b["best_tflops"].tolist() == [100.0, 100.0, 102.0, 103.0]
    png = results.plot_convergence(df, tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_landscape_feeds_a_search_space():
    space_mod = pytest.importorskip("raytune_attn.tune.search.space")
    df = results.read_trials(results.write_file(sweep_rows("s1"), Path(pytest.importorskip("tempfile").mkdtemp())
                                                / "r.parquet"))
    land = [p for p in results.landscape(df) if p["status"] == "ok"]
    names = list(land[0]["config"])
    space = space_mod.SearchSpace.from_values({n: [p["config"][n] for p in land] for n in names},
                                              allowed=[tuple(p["config"][n] for n in names) for p in land])
    assert all(space.contains(p["config"]) for p in land)


def _finished_sweep(out):
    """A sweep's files as the driver leaves them: each trial's row written into trials/ as it ended, then every row
    with the final re-measures (top configs timed again; a sibling search's winner too) and baselines in
    trials.parquet."""
    from raytune_attn.tune import winners

    p2 = Problem(1, 4, 4, 128, 128, 64, False, "bfloat16")
    live = [r for r in sweep_rows("s1", n=4) + sweep_rows("s1", n=3, problem=p2) if r["kind"] == "trial"]
    live = [dict(r, trial_id=f"{r['trial_id']}-sq{r['seqlen_q']}") for r in live]  # one id per trial
    for r in live:
        results.write_trials([r], out / "trials")
    finals = []
    for r, remeasured in ((live[3], 101.0), (live[2], 99.0), (live[0], 102.5), (live[4], 50.0)):
        cfg = results.row_config(r)
        metrics = {"status": "ok", "reason": "final re-measure", "rung": 3, "tflops": remeasured, "latency_ms": 1.0,
                   "final_of": r["trial_id"]}
        finals.append(results.trial_row(r["problem_key"], cfg, metrics, prov(), trial_id=f"{r['trial_id']}-final",
                                        sweep_id="s1", sweep_name="demo", searcher="gp", seed=7))
    family = results.trial_row(p2, results.row_config(live[3]), {"status": "ok", "tflops": 51.0, "latency_ms": 1.0},
                               prov(), trial_id=f"{live[3]['trial_id']}-for1-final", sweep_id="s1")
    bases = sweep_rows("s1", n=0) + sweep_rows("s1", n=0, problem=p2)
    every = results.read_trials(out / "trials").to_dict("records") + finals + [family] + bases
    df = results.read_trials(results.write_file(every, out / "trials.parquet"))
    return winners.build_artifact(df), live


@pytest.mark.parametrize("where", ["trials.parquet", "."])
def test_a_sweeps_results_read_as_file_or_directory_export_its_best_configs(tmp_path, where):
    from raytune_attn import artifact
    from raytune_attn.tune import winners
    from raytune_attn.tune.cli import main

    at_end, live = _finished_sweep(tmp_path)
    df = results.read_trials(tmp_path / where)
    trials = df[df["kind"] == "trial"]
    assert trials["trial_id"].is_unique and len(df[df["kind"] == "baseline"]) == 2
    n_live = pd.DataFrame(live).groupby(["accelerator_type", "problem_key"]).size().to_dict()
    assert winners.trial_counts(df) == n_live  # each trial once, re-measures left out
    assert main(["export", str(tmp_path / where), "-o", str(tmp_path / "export.json")]) == 0
    exported = artifact.load(tmp_path / "export.json")
    assert exported["entries"] == at_end["entries"]
    got = {e["problem_key"]: (e["config"], e["n_trials"], e["trial_id"]) for e in exported["entries"]}
    # The winner is the best re-measure, not the best rung: live[3] led its rungs, live[0] re-measured faster.
    assert got[P.key] == (results.row_config(live[0]), n_live[("H100", P.key)], f"{live[0]['trial_id']}-final")
    assert got[live[4]["problem_key"]][2] == f"{live[3]['trial_id']}-for1-final"
    from raytune_attn.tune import report  # the report names the same winners and counts

    assert {s.problem_key: (s.best_config, s.n_trials) for s in report.summarize(df)} == \
        {k: (cfg, n) for k, (cfg, n, _) in got.items()}


def test_a_row_in_the_sweeps_file_and_its_partitions_is_read_once_from_the_file(tmp_path):
    early = sweep_rows("s1")[0]
    results.write_trials([early], tmp_path / "trials")
    rewritten = dict(early, tflops=early["tflops"] + 1, timestamp=early["timestamp"].timestamp() + 60)
    results.write_trials([rewritten], tmp_path / "trials")
    later = dict(early, status="stopped", reason="rewritten at the sweep's end")
    results.write_file([later, sweep_rows("s1")[2]], tmp_path / "trials.parquet")
    df = results.read_trials(tmp_path)
    assert df["trial_id"].tolist() == [early["trial_id"], sweep_rows("s1")[2]["trial_id"]]
    assert df["status"].tolist() == ["stopped", "ok"]
    alone = results.read_trials(tmp_path / "trials")  # the partitions alone: the later copy
    assert alone["tflops"].tolist() == [rewritten["tflops"]]


def test_read_frame_reads_any_parquet_table_and_names_a_bad_file(tmp_path):
    table = pd.DataFrame({"BLOCK_M": [64, 128], "tflops": [1.5, 2.5], "note": ["a", None]})
    good = tmp_path / "landscape.parquet"
    table.to_parquet(good)
    pd.testing.assert_frame_equal(results.read_frame(good), table)  # as written: no schema conformed onto it
    garbage = tmp_path / "garbage.parquet"
    garbage.write_text("not parquet\n")
    with pytest.raises(results.ResultsError, match=r"garbage\.parquet: not a readable Parquet file"):
        results.read_frame(garbage)
    with pytest.raises(FileNotFoundError, match="missing.parquet"):
        results.read_frame(tmp_path / "missing.parquet")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        results.read_frame(tmp_path)
    # A best-configs artifact given where a results table belongs: the error says what to give instead.
    art = tmp_path / "best_configs.json"
    art.write_text('{"schema_version": 1, "entries": []}\n')
    for read in (results.read_frame, results.read_table):
        with pytest.raises(results.ResultsError, match=r"this is a JSON file .* give the sweep's trials\.parquet"):
            read(art)
    with pytest.raises(results.ResultsError) as e:
        results.read_frame(garbage)
    assert "JSON" not in str(e.value)


def test_a_trial_stopped_early_was_told_to_its_searcher_as_ok():
    """told_status: what resume.replay and searcher.related_row tell a searcher for a row; only "stopped" changes."""
    assert [results.told_status(s) for s in results.STATUSES] == ["ok", "invalid", "error", "ok"]
    assert results.told_status(results.INTERRUPTED) == results.INTERRUPTED


# ---------------------------------------------------------------------------------------------------- bad input
# Each: a results file as `export` / `report` get it, refused on read by a ValueError naming the file and what is
# wrong with it (the CLI prints it as one line, exit 2), never a traceback or an artifact built from it.


def _as_pandas_wrote_it(tmp_path, name, edit=lambda df: df):
    """A sweep's file read and rewritten by pandas (no raytune metadata), after `edit` of its frame."""
    df = pd.read_parquet(results.write_file(sweep_rows("s1"), tmp_path / "orig.parquet"))
    path = tmp_path / name
    edit(df).to_parquet(path)
    return path


def _cli_refuses(path, capsys, *needles):
    from raytune_attn.tune.cli import main

    for argv in (["export", str(path), "-o", str(path.with_suffix(".json"))], ["report", "--no-plots", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err and all(n in err for n in needles), err
    assert not path.with_suffix(".json").exists()


def test_a_file_without_rows_or_metadata_reads_as_no_rows(tmp_path, capsys):
    z = _as_pandas_wrote_it(tmp_path, "z.parquet", lambda df: df.head(0))
    assert pq.read_table(z).schema.metadata.get(results.SCHEMA_METADATA_KEY) is None
    assert len(results.read_trials(z)) == 0
    _cli_refuses(z, capsys, "z.parquet: no")  # report: "no result rows"; export: "no trial with status ok"
    pq.write_table(pq.read_table(z).drop_columns(["schema_version"]), tmp_path / "bare.parquet")
    with pytest.raises(results.ResultsError, match=r"bare\.parquet: not a raytune-attn results file"):
        results.read_trials(tmp_path / "bare.parquet")
    nulls = _as_pandas_wrote_it(tmp_path, "nulls.parquet", lambda df: df.assign(schema_version=None))
    with pytest.raises(results.ResultsError, match=r"nulls\.parquet: schema_version is null in every row"):
        results.read_trials(nulls)


@pytest.mark.parametrize("column", ["tflops", "latency_ms"])
@pytest.mark.parametrize("bad", [-5.0, 0.0, float("inf"), float("-inf")])
def test_a_measured_value_not_finite_and_positive_is_refused_naming_file_column_and_rows(tmp_path, capsys, column,
                                                                                          bad):
    def edit(df):
        df.loc[df["trial_id"] == "s1-t2", column] = bad
        return df

    path = _as_pandas_wrote_it(tmp_path, "bad.parquet", edit)
    with pytest.raises(ValueError, match=rf"bad\.parquet: column {column} must be finite and positive where status "
                                         rf"is ok.*{re.escape(repr(bad))} in row 2 \(trial s1-t2\)"):
        results.read_trials(path)
    if column == "tflops":
        _cli_refuses(path, capsys, "bad.parquet", "tflops", "s1-t2")


def test_no_measurement_and_failed_trials_values_still_read(tmp_path):
    """NaN/null where a trial failed (or an ok trial measured nothing) is normal; a failed trial's values are not
    measurements, so not judged."""
    def edit(df):
        df.loc[df["trial_id"] == "s1-t1", ["tflops", "latency_ms"]] = [0.0, float("inf")]  # status invalid
        df.loc[df["trial_id"] == "s1-t3", "latency_ms"] = float("nan")  # status ok, no latency
        return df

    df = results.read_trials(_as_pandas_wrote_it(tmp_path, "fine.parquet", edit))
    assert len(df) == 5 and df.loc[df["trial_id"] == "s1-t3", "latency_ms"].isna().all()


def test_a_missing_required_column_is_refused_but_a_later_knob_absent_from_an_old_file_is_not(tmp_path, capsys):
    path = _as_pandas_wrote_it(tmp_path, "noblock.parquet", lambda df: df.drop(columns=["BLOCK_M", "seed"]))
    with pytest.raises(ValueError, match=r"noblock\.parquet: column\(s\) BLOCK_M, seed missing, required by results "
                                         r"schema v1"):
        results.read_trials(path)
    _cli_refuses(path, capsys, "noblock.parquet", "BLOCK_M")
    old = _as_pandas_wrote_it(tmp_path, "old.parquet", lambda df: df.drop(columns=["BAND_LAUNCH", "LPT_GROUP"]))
    assert results.read_trials(old)["BAND_LAUNCH"].isna().all()
    # A partition's file lacks accelerator_type (its directory holds it); copied out of it, it reads as null.
    (part,) = results.write_trials(sweep_rows("s1"), tmp_path / "trials")
    assert len(results.read_trials(part)) == 5 and results.read_trials(part)[results.PARTITION_COLUMN].notna().all()
    loose = tmp_path / "loose.parquet"
    loose.write_bytes(part.read_bytes())
    assert results.read_trials(loose)[results.PARTITION_COLUMN].isna().all()


def test_a_schema_version_that_is_not_a_number_is_refused_naming_the_file(tmp_path, capsys):
    table = results.to_table(sweep_rows("s1"))
    pq.write_table(table.replace_schema_metadata({results.SCHEMA_METADATA_KEY: b"x"}), tmp_path / "meta.parquet")
    with pytest.raises(ValueError, match=r"meta\.parquet: schema_version 'x' is not a schema version number"):
        results.read_trials(tmp_path / "meta.parquet")
    col = _as_pandas_wrote_it(tmp_path, "col.parquet", lambda df: df.assign(schema_version="abc"))
    with pytest.raises(ValueError, match=r"col\.parquet: schema_version 'abc' is not a schema version number"):
        results.read_trials(col)
    _cli_refuses(col, capsys, "col.parquet", "schema_version 'abc'")
    zero = _as_pandas_wrote_it(tmp_path, "zero.parquet", lambda df: df.assign(schema_version=0))
    with pytest.raises(ValueError, match=r"zero\.parquet: schema_version '0'"):
        results.read_trials(zero)
    as_text = _as_pandas_wrote_it(tmp_path, "text.parquet", lambda df: df.assign(schema_version="1"))
    assert len(results.read_trials(as_text)) == 5  # a number written as text still reads


@pytest.mark.parametrize("key", ["", None, "dense-nonsense"])
def test_a_bad_or_missing_problem_key_is_refused_naming_the_file_and_rows(tmp_path, capsys, key):
    def edit(df):
        df.loc[df["trial_id"] == "s1-t3", "problem_key"] = key
        return df

    path = _as_pandas_wrote_it(tmp_path, "key.parquet", edit)
    what = "problem_key is null" if key is None else f"bad problem_key {key!r}"
    with pytest.raises(ValueError, match=rf"key\.parquet: {re.escape(what)} in row 3 \(trial s1-t3\)"):
        results.read_trials(path)
    _cli_refuses(path, capsys, "key.parquet", "s1-t3")
