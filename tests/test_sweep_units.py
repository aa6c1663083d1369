"""Sweep pieces without a Ray cluster: the multi-search searcher, progress lines, rows, flags, test hooks."""

import dataclasses
import io
import json
import sys
from pathlib import Path

import pytest
from ray.tune.search import Searcher

from raytune_attn.problem import Problem
from raytune_attn.tune.search import load_space, make_searcher
from raytune_attn.tune.sweep.callbacks import row_from_result
from raytune_attn.tune.sweep.config import SweepConfig, SweepUsageError, parse_rungs
from raytune_attn.tune.sweep.progress import Progress
from raytune_attn.tune.sweep.searcher import PerSearchScheduler, Search, SweepSearcher
from raytune_attn.tune.sweep.summary import format_summary

P1 = {"batch": 1, "hq": 2, "hkv": 2, "seqlen_q": 64, "seqlen_k": 64, "head_dim": 32, "causal": True,
      "dtype": "float32", "varlen": False}
P2 = {**P1, "causal": False}


def _sweep(budget=3, conc=2):
    space = load_space("cpu/interpreter")
    searches = [Search(f"CPU/{i}", "CPU", p, make_searcher("random", space, seed=i), budget=budget,
                       max_concurrent=conc) for i, p in enumerate((P1, P2))]
    return SweepSearcher(searches, {"namespace": "ns", "rungs_ms": [10]})


def test_sweep_searcher_interleaves_and_limits():
    s = _sweep()
    got = [s.suggest(f"t{i}") for i in range(5)]
    assert [g["search"] for g in got[:4]] == ["CPU/0", "CPU/1", "CPU/0", "CPU/1"]
    assert got[4] is None  # both searches have max_concurrent trials in flight
    assert got[0]["sweep"] == {"namespace": "ns", "rungs_ms": [10]} and got[0]["problem"] == P1
    s.on_trial_complete("t0", {"status": "ok", "tflops": 1.0, "config": got[0]})
    s.on_trial_complete("t1", {"status": "invalid", "tflops": 0.0, "config": got[1]})
    assert s.suggest("t5")["search"] == "CPU/0"
    assert s.suggest("t6")["search"] == "CPU/1"
    inner = s.searches["CPU/0"].searcher
    assert inner.observations[0][1] == 1.0 and s.searches["CPU/1"].searcher.observations[0][1] is None
    for t in ("t2", "t3", "t5", "t6"):
        s.on_trial_complete(t, {"status": "ok", "tflops": 2.0})
    assert s.suggest("t7") == Searcher.FINISHED  # budget 3 per search reached


def test_sweep_searcher_writes_a_ledger_line_per_trial_and_no_tune_checkpoint(tmp_path):
    from raytune_attn.tune.sweep.state import Ledger

    s = _sweep()
    s.ledger, s.attempt = Ledger(tmp_path / "ledger.jsonl"), 2
    got = {f"t{i}": s.suggest(f"t{i}") for i in range(3)}
    recs = s.ledger.records()
    assert [(r["trial_id"], r["search"], r["config"], r["attempt"]) for r in recs] == [
        (t, g["search"], g["config"], 2) for t, g in got.items()]
    assert recs[0]["problem"] == P1 and recs[0]["accel"] == "CPU"
    s.save_to_dir(str(tmp_path))  # Tune's checkpoint hook: the ledger and the rows are the state, nothing pickled
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.jsonl"]


class _SlowHost:
    """A search host whose suggestions are still being made until `finish()`: as a remote GP mid-fit."""

    def __init__(self, searcher, name):
        self.searcher, self.name, self.asks, self.fast = searcher, name, [], False

    def ask(self, inner):
        class Ask:
            value = None

            def ready(self):
                return self.value is not None

        a = Ask()
        self.asks.append((inner, a))
        if self.fast:
            self.finish()
        return a

    def finish(self):
        for inner, a in self.asks:
            a.value = a.value or self.searcher.suggest(inner)

    def tell(self, inner, result, error):
        self.searcher.on_trial_complete(inner, result, error=error)


def test_a_trial_asked_for_while_no_config_is_made_is_handed_out_deferred():
    """Remote searches whose next configs are still being made: Tune gets a trial at once, its config deferred to
    the trial's process (which takes it from the search actor by name and inner id), not None; one search's
    deferred trials count toward its share like any."""
    s = _sweep(budget=3, conc=1)
    s.remote = True
    for i, x in enumerate(s.searches.values()):
        x.host = _SlowHost(x.searcher, f"search-host-{i}")
    got = [s.suggest(f"t{i}") for i in range(3)]
    assert [g["search"] for g in got[:2]] == ["CPU/0", "CPU/1"] and got[2] is None  # each search's share is 1
    for g, host in zip(got[:2], ("search-host-0", "search-host-1"), strict=True):
        assert "config" not in g and g["deferred"]["host"] == host
    assert s.n_deferred == 2
    for x in s.searches.values():
        x.host.finish()  # the actors make the configs the trials take
    t0 = s.searches["CPU/0"].host.asks[0][1].value
    assert s.config_of("t0") == t0  # the rows' config of a deferred trial that ended before reporting it
    s.on_trial_complete("t0", {"status": "ok", "tflops": 5.0, "config": got[0]})
    assert s.searches["CPU/0"].searcher.observations == [(t0, 5.0)]
    assert s.config_of("t0") == t0  # still known to the callbacks, which Tune calls after the searcher
    nxt = s.suggest("t3")  # CPU/0's next config is asked now and not made yet: deferred again
    assert nxt["search"] == "CPU/0" and nxt["deferred"]["inner"] == s.searches["CPU/0"].host.asks[1][0]
    s.searches["CPU/1"].host.fast = True  # a search whose next config is made when Tune asks: given directly
    s.on_trial_complete("t1", {"status": "ok", "tflops": 1.0, "config": got[1]})
    nxt = s.suggest("t4")
    assert nxt["search"] == "CPU/1" and nxt["config"] == s.searches["CPU/1"].host.asks[1][1].value
    assert s.n_deferred == 3


def test_a_deferred_trial_goes_to_the_search_asked_longest_ago():
    """Its trial holds a slot until its config is made: of the late searches, the one whose model has been fitting
    longest is the likeliest to answer first."""
    s = _sweep(budget=3, conc=1)
    s.remote = True
    for i, (x, since) in enumerate(zip(s.searches.values(), (5.0, 1.0), strict=True)):
        x.host = _SlowHost(x.searcher, f"search-host-{i}")
        x.pending = (f"{x.key}#1", x.host.ask(f"{x.key}#1"))
        x.pending[1].since = since
    g = s.suggest("t0")
    assert g["search"] == "CPU/1" and g["deferred"] == {"host": "search-host-1", "inner": "CPU/1#1"}


def test_shared_results_reach_the_other_searches_of_the_same_gpu_type_only():
    """--share-results: each finished trial goes, as a row, to the GP of every other search of its accelerator type
    (not to its own, nor to another type's); a resume tells each search the others' earlier rows the same way."""
    from raytune_attn.problem import Problem
    from raytune_attn.tune.sweep.resume import relate_done
    from raytune_attn.tune.sweep.searcher import related_row, search_key

    space = load_space("cpu/interpreter")
    k1, k2 = Problem(**P1).key, Problem(**P2).key
    specs = [("CPU", P1, k1), ("CPU", P2, k2), ("GPU", P1, k1)]

    def searches():
        return [Search(search_key(a, k), a, p, make_searcher("gp", space, seed=i, priors=False), budget=4,
                       max_concurrent=2) for i, (a, p, k) in enumerate(specs)]  # fmt: skip

    for share in (True, False):
        s = SweepSearcher(searches(), {"namespace": "ns"}, share_results=share)
        got = [s.suggest(f"t{i}") for i in range(3)]
        assert [g["search"] for g in got] == [search_key(a, k) for a, _, k in specs]
        calls = {key: [] for key in s.searches}  # the batches each searcher is given
        for key, x in s.searches.items():
            add = x.searcher.add_related
            x.searcher.add_related = lambda rows, add=add, got=calls[key]: (got.append(list(rows)), add(rows))
        s.on_trial_complete("t0", {"status": "ok", "tflops": 3.0, "config": got[0]})
        got.append(s.suggest("t3"))  # CPU/k1 again: it has rows, but CPU/k2's result is not in yet
        s.on_trial_complete("t1", {"status": "invalid", "config": got[1]})
        s.on_trial_complete("t3", {"status": "ok", "tflops": 4.0, "config": got[3]})
        assert all(c == [] for c in calls.values())  # given at a search's next suggestion, not one call per trial
        got += [s.suggest(f"t{i}") for i in (4, 5, 6)]
        assert [g["search"] for g in got[3:]] == [search_key("CPU", k1), search_key("CPU", k2),
                                                  search_key("GPU", k1), search_key("CPU", k1)]  # fmt: skip
        if not share:
            assert all(c == [] for c in calls.values())
            continue
        ok = [{"problem_key": k1, **g["config"], "status": "ok", "tflops": v}
              for g, v in ((got[0], 3.0), (got[3], 4.0))]
        assert calls[search_key("CPU", k2)] == [ok]  # both rows in one call
        assert calls[search_key("CPU", k1)] == [[{"problem_key": k2, **got[1]["config"], "status": "invalid",
                                                  "tflops": None}]]  # fmt: skip
        assert calls[search_key("GPU", k1)] == []
        assert s.searches[search_key("CPU", k2)].searcher._related == ok
        spent = s.searches[search_key("CPU", k2)]
        spent.budget = spent.suggested  # nothing more to suggest: no rows held that it would never read
        s.on_trial_complete("t6", {"status": "ok", "tflops": 5.0, "config": got[6]})
        assert spent.related == []
    assert related_row(k1, {"BLOCK_M": 16}, {"status": "stopped", "tflops": 2.0}) == {
        "problem_key": k1, "BLOCK_M": 16, "status": "ok", "tflops": 2.0}  # stopped early: its last rung's value
    fresh = searches()
    cfg = dict(fresh[0].searcher.candidates[0])
    done = {fresh[0].key: [{"problem_key": k1, "accelerator_type": "CPU", **cfg, "status": "stopped", "tflops": "5.0",
                            "trial_id": "a"}]}  # fmt: skip
    relate_done(fresh, done)
    assert fresh[1].searcher._related == [{"problem_key": k1, **cfg, "status": "ok", "tflops": 5.0}]
    assert fresh[0].searcher._related == [] and fresh[2].searcher._related == []


def test_per_search_scheduler_is_per_search():
    sch = PerSearchScheduler(max_t=3)

    class T:
        def __init__(self, key):
            self.config, self.trial_id = {"search": key}, key

    for k in ("a", "b"):
        sch.on_trial_add(None, T(k))
    assert set(sch.asha) == {"a", "b"}


def test_progress_lines_plain():
    buf = io.StringIO()
    p = Progress({"A/x": 2, "B/y": 2}, stream=buf)
    p.trial_done("A/x", "ok", 10.0)
    p.trial_done("B/y", "invalid", None)
    line = p.trial_done("A/x", "stopped", 12.0)
    assert "A/x: 2/2 trials" in line and "best 12 TFLOP/s" in line and "all 3/4" in line and "ETA" in line
    assert all(c == "\n" or 32 <= ord(c) < 127 for c in buf.getvalue())


def test_row_from_result_statuses():
    cfg = {"search": "CPU/x", "accel": "CPU", "problem": P1, "config": {"BLOCK_M": 16, "BLOCK_N": 16}}
    meta = {"sweep_id": "s", "sweep_name": "s", "searcher": "gp", "seed": 0}
    full = row_from_result("t", cfg, {"status": "ok", "rung": 2, "tflops": 5.0, "latency_ms": 1.0}, 2, {}, meta)
    assert full["status"] == "ok" and full["tflops"] == 5.0 and full["BLOCK_M"] == 16
    early = row_from_result("t", cfg, {"status": "ok", "rung": 1, "tflops": 5.0, "latency_ms": 1.0}, 2, {}, meta)
    assert early["status"] == "stopped" and "rung 1 of 2" in early["reason"]
    bad = row_from_result("t", cfg, {"status": "invalid", "reason": "wrong result", "tflops": 0.0}, 2, {}, meta)
    assert bad["status"] == "invalid" and bad["tflops"] is None and bad["reason"] == "wrong result"
    lost = row_from_result("t", cfg, None, 2, {}, meta, error="trial raised: boom")
    assert lost["status"] == "error" and "boom" in lost["reason"]


def test_flags():
    a = SweepConfig(budget=5, rungs_ms=parse_rungs("5,20"), searcher="random")
    assert a.rungs_ms == (5.0, 20.0) and a.rungs == "5,20" and a.budget == 5 and not a.no_baselines
    assert a.family_k == 2 and SweepConfig(family_k=0).family_k == 0
    for bad in ({"budget": 0}, {"resume": True}, {"family_k": -1}, {"searcher": "bayes"}, {"reduction_factor": 1.0},
                {"address": "auto", "num_cpus": 2}, {"no_mlflow": True, "tracking_uri": "sqlite:///x.db"},
                {"name": "a/b"}, {"address": "not an address"}, {"final_rep_ms": 0.0}, {"compile_timeout_x": -1.0}):
        with pytest.raises(SweepUsageError):
            SweepConfig(**bad)
    with pytest.raises(SweepUsageError, match="--rungs"):
        parse_rungs("x")
    for rungs in ("", "10,-5", "30,10", "10,10,60"):
        with pytest.raises(SweepUsageError, match="--rungs must (be positive|increase)"):
            SweepConfig(rungs_ms=parse_rungs(rungs))
    assert SweepConfig(rungs_ms=parse_rungs("5")).rungs_ms == (5.0,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.budget = 6


def test_resume_takes_every_saved_setting_but_where_it_runs_from_its_command_line(tmp_path, monkeypatch):
    from raytune_attn.tune.sweep.plan import make_plan
    from raytune_attn.tune.sweep.state import write_doc

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    store = f"sqlite:///{tmp_path / 't.db'}"
    # `rungs` as the flag's text without `rungs_ms` (an earlier writer), and a flag this version does not know.
    import socket

    cluster = socket.create_server(("127.0.0.1", 0))  # the saved --address answers, as the plan checks
    address = f"127.0.0.1:{cluster.getsockname()[1]}"
    saved = {"searcher": "random", "budget": 7, "rungs": "5,10", "seed": 3, "address": address, "tracking_uri": store,
             "unknown_flag_of_an_old_version": 1}
    write_doc(out / "sweep.json", {"name": "old", "args": saved})
    c = make_plan(SweepConfig(resume=True, out=str(out), budget=7, rungs_ms=(5.0, 10.0))).config  # the sweep's own
    assert (c.searcher, c.budget, c.rungs_ms, c.seed) == ("random", 7, (5.0, 10.0), 3)
    # Another value of a flag the sweep keeps would be lost, so the resume refuses it, naming each one.
    with pytest.raises(SweepUsageError, match=r"--budget 99 \(the sweep's: 7\), --rungs 10 \(the sweep's: 5,10\), "
                                              r"--no-priors \(the sweep ran without it\)"):
        make_plan(SweepConfig(resume=True, out=str(out), budget=99, rungs_ms=(10.0,), no_priors=True))
    assert c.address == address and c.tracking_uri == store and not c.no_mlflow and c.resume and c.name == "old"
    assert make_plan(SweepConfig(resume=True, out=str(out), address="local")).config.address == "local"
    assert make_plan(SweepConfig(resume=True, out=str(out), tracking_uri="sqlite:///t.db")).config.tracking_uri == store
    for other in ({"tracking_uri": "sqlite:///elsewhere.db"}, {"no_mlflow": True}):
        with pytest.raises(SweepUsageError, match=f"logs to {store}"):
            make_plan(SweepConfig(resume=True, out=str(out), **other))
    cluster.close()


def test_a_directory_holding_a_sweep_takes_only_its_resume(tmp_path, monkeypatch):
    """A new sweep on another sweep's --out (finished or interrupted) would replace its sweep.json and mix both in
    trials.parquet: refused, naming the sweep there; a resume must name that sweep, if it names one."""
    from raytune_attn.tune.sweep.plan import make_plan
    from raytune_attn.tune.sweep.state import write_doc

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    write_doc(out / "sweep.json", {"name": "first", "args": {"no_mlflow": True}})
    for name in (None, "second"):
        with pytest.raises(SweepUsageError, match=r"already holds sweep 'first': pass --resume to finish it"):
            make_plan(SweepConfig(out=str(out), name=name, no_mlflow=True))
    with pytest.raises(SweepUsageError, match=r"--resume --name second: .*sweep.json holds sweep 'first'"):
        make_plan(SweepConfig(resume=True, out=str(out), name="second"))
    assert make_plan(SweepConfig(resume=True, out=str(out), name="first")).name == "first"


def test_a_resume_may_name_the_sweeps_files_another_way(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sweep = SweepConfig(problems=str(tmp_path / "p.yaml"), budget=5)
    assert SweepConfig(resume=True, name="x", problems="p.yaml", address="auto").changed_on_resume(sweep) == []
    assert SweepConfig(resume=True, name="x", problems="q.yaml").changed_on_resume(sweep) == [
        f"--problems q.yaml (the sweep's: {tmp_path / 'p.yaml'})"]
    assert SweepConfig(resume=True, name="x", budget=40).changed_on_resume(SweepConfig()) == [
        "--budget 40 (the sweep's: its default)"]


def test_tracking_uri_form():
    from raytune_attn.tune.tracking_uri import check_tracking_uri

    for good in ("sqlite:///mlflow.db", "sqlite:////abs/m.db", "http://h:5000", "https://h", "databricks",
                 "postgresql+psycopg2://u@h/db", "./mlruns", "file:///tmp/x"):
        assert check_tracking_uri(good) == good
    for bad, why in (("sqlite:/x.db", "sqlite:///"), ("http://", "host"), ("foo://x", "unknown scheme")):
        with pytest.raises(ValueError, match=why):
            check_tracking_uri(bad)


@pytest.mark.parametrize("flag,content", [
    ("--space", "schema_version: 1\nvendor: nobody\narch: x\nparameters: {}\n"),
    ("--problems", "schema_version: 1\nproblems:\n  - {batch: 0}\n"),
    ("--problems", "not: [valid"),
])
def test_a_bad_input_file_fails_before_ray_and_leaves_nothing(flag, content, tmp_path, monkeypatch, capsys):
    import ray

    from raytune_attn.tune.cli import main

    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    out = tmp_path / "out"
    assert main(["tune", flag, str(bad), "--out", str(out), "--name", "n"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.yaml" in err and "Traceback" not in err
    assert not out.exists() and not (tmp_path / "raytune-results").exists() and not ray.is_initialized()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_an_output_directory_that_cannot_be_written_fails_before_ray(tmp_path, capsys):
    from raytune_attn.tune.cli import main

    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["tune", "--out", str(blocker), "--no-mlflow"]) == 2
    assert main(["tune", "--out", str(blocker / "sub"), "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert err.count("--out") == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_tune_help_lists_every_flag(capsys):
    from raytune_attn.tune.cli import main

    assert main(["tune", "--help"]) == 0
    out = capsys.readouterr().out
    names = [f.name for f in dataclasses.fields(SweepConfig) if f.name != "rungs_ms"] + ["rungs"]
    for name in names:
        assert "--" + name.replace("_", "-") in out, name


def test_family_siblings_are_the_same_kernel_nearest_length_first():
    from raytune_attn.tune.sweep.remeasure import nearest_siblings

    grid = {"hq": 16, "hkv": 16, "head_dim": 128, "causal": False, "dtype": "bfloat16", "varlen": False}
    mk = lambda key, accel="H200", **p: Search(key, accel, {**grid, **p}, None, budget=1, max_concurrent=1)  # noqa: E731
    s = mk("s2048", batch=8, seqlen_q=2048, seqlen_k=2048)
    others = [mk(f"s{n}", batch=16384 // n, seqlen_q=n, seqlen_k=n) for n in (512, 1024, 4096, 16384)]
    others += [mk("causal", batch=8, seqlen_q=2048, seqlen_k=2048, causal=True),  # another kernel
               mk("d64", batch=8, seqlen_q=2048, seqlen_k=2048, head_dim=64, hq=32, hkv=32),
               mk("other-gpu", "MI300X", batch=8, seqlen_q=2048, seqlen_k=2048)]  # another accelerator type
    got = [o.key for o in nearest_siblings(s, [s, *others])]
    assert got[:2] in (["s1024", "s4096"], ["s4096", "s1024"]) and got[2:] == ["s512", "s16384"]


def test_final_candidates_are_the_top_k_then_unmeasured_sibling_winners_and_none_without_a_remeasure():
    from raytune_attn.tune.sweep.remeasure import config_key, final_candidates

    grid = {"hq": 16, "hkv": 16, "head_dim": 128, "causal": False, "dtype": "bfloat16", "varlen": False}
    mk = lambda key, n: Search(key, "H200", {**grid, "batch": 8, "seqlen_q": n, "seqlen_k": n}, None,  # noqa: E731
                               budget=1, max_concurrent=1)
    s, sib = mk("s2048", 2048), mk("s4096", 4096)
    row = lambda tid, m, tf: {"trial_id": tid, "BLOCK_M": m, "tflops": tf}  # noqa: E731
    ranked = {"s2048": [row("a", 128, 9.0), row("b", 64, 8.0)], "s4096": [row("c", 32, 7.0)]}
    measured = {k: {config_key(r) for r in rows} for k, rows in ranked.items()}
    picks = final_candidates(s, [s, sib], ranked, measured, top_k=1, family_k=2)
    assert [(o and o.key, r["trial_id"]) for o, r in picks] == [(None, "a"), ("s4096", "c")]
    assert final_candidates(s, [s, sib], ranked, measured, top_k=0, family_k=2) == []


def test_rows_that_timed_nothing_are_never_final_candidates():
    """A trial cut off by an interrupt reads back from Parquet with NaN tflops and maybe no knobs: neither is a
    candidate for the final re-measure (re-measuring no knobs timed the defaults, which then won with config {})."""
    from raytune_attn.tune.sweep.remeasure import _ranked

    grid = {"hq": 16, "hkv": 16, "head_dim": 128, "causal": False, "dtype": "bfloat16", "varlen": False}
    s = Search("s", "H200", {**grid, "batch": 8, "seqlen_q": 2048, "seqlen_k": 2048}, None, budget=1,
               max_concurrent=1)
    key = Problem.from_dict(s.problem).key
    row = lambda tid, tf, status="ok", **knobs: {"trial_id": tid, "kind": "trial", "problem_key": key,  # noqa: E731
                                                 "accelerator_type": "H200", "status": status, "tflops": tf, **knobs}
    rows = [row("nan", float("nan"), "stopped", BLOCK_M=64), row("noknobs", 50.0, "stopped"),
            row("zero", 0.0, BLOCK_M=32), row("inf", float("inf"), BLOCK_M=16), row("good", 9.0, BLOCK_M=128),
            row("stopped", 8.0, "stopped", BLOCK_M=256), row("failed", 99.0, "invalid", BLOCK_M=128, BLOCK_N=16)]
    ranked, _ = _ranked([s], rows)
    assert [r["trial_id"] for r in ranked[s.key]] == ["good", "stopped"]


def test_cli_tune_bad_flag_exits_2(capsys):
    from raytune_attn.tune.cli import main

    assert main(["tune", "--rungs", "-1"]) == 2
    assert "--rungs" in capsys.readouterr().err


def test_fake_device_hook(monkeypatch):
    from raytune_attn.tune.sweep.bench_actor import fake_device

    monkeypatch.setenv("RAYTUNE_ATTN_FAKE_DEVICE", json.dumps({"MI300X": "amd:gfx942:AMD Instinct MI300X"}))
    assert fake_device("MI300X")["vendor"] == "amd" and fake_device("MI300X")["arch"] == "gfx942"
    assert fake_device("H100") is None


def test_format_summary_says_not_representative():
    s = {"name": "n", "trials": 1, "wall": "0:00:01", "tune_wall_s": 1.0, "benchmark_actors": 1,
         "gpu_busy_fraction": 0.5, "overhead_per_trial_s": 0.1, "early_stop": True, "timings_representative": False,
         "configs_per_s": 1.0, "idle_compile_bound_s": 0.0,
         "searches": [{"search": "CPU/x", "trials": 1, "ok": 1, "stopped": 0, "invalid": 0, "error": 0,
                       "best_tflops": 1.0, "best_latency_ms": 2.0, "best_config": {"BLOCK_M": 16}, "baselines": {}}]}
    assert "not representative" in format_summary(s)


def test_cancelled_suggestion_is_free_again():
    space = load_space("cpu/interpreter")
    inner = make_searcher("random", space, seed=0)
    cfg = inner.suggest("ask-1")
    inner.cancel("ask-1")
    key = space.key(cfg)
    assert not inner._taken[inner._index[key]] and inner.get_state()["live"] == {}


class _RecordingCompiler:
    """Stands in for a CompileActor handle: records what `.compile.remote(problem, config, speculative)` was asked."""

    def __init__(self):
        self.calls = []
        self.compile = self

    def remote(self, problem, config, speculative=False):
        self.calls.append((problem, config, speculative))


def test_prefetch_queues_each_design_then_its_neighbours_once_per_binary_and_node():
    from raytune_attn.problem import Problem
    from raytune_attn.tune.measure.compile_pool import specialization
    from raytune_attn.tune.sweep import prefetch

    space = load_space("nvidia/sm90_study")
    big = {**P1, "head_dim": 128, "dtype": "bfloat16"}
    # Two problems that share binaries (sizes differ), one that does not (causal differs), each its own seed.
    probs = [big, {**big, "batch": 4, "seqlen_q": 256, "seqlen_k": 256}, {**big, "causal": False}]
    # The GP told the head dim only: its design is then the same for every problem of that head dim.
    searches = [Search(f"H100/{i}", "H100", p, make_searcher("gp", space, seed=i, problem={"head_dim": 128}),
                       budget=30, max_concurrent=2) for i, p in enumerate(probs)]
    designs = [s.searcher.design_configs() for s in searches]
    assert len(designs[0]) >= 6 and sorted(map(str, designs[0])) == sorted(map(str, designs[1]))
    nodes = {"n1": _RecordingCompiler(), "n2": _RecordingCompiler()}
    groups = {"H100": [{"node_id": "n1", "gpus": 1}, {"node_id": "n2", "gpus": 1}]}
    n_design, n_spec = prefetch.submit(searches, nodes, groups)
    assert n_design == len(designs[0]) + len(designs[2])  # problems 0 and 1 share their binaries
    idx = {p.name: p.values for p in space.params}
    for c in nodes.values():
        keys = [specialization(Problem.from_dict(p), cfg) for p, cfg, _ in c.calls]
        assert len(keys) == len(set(keys)) == n_design + n_spec > n_design  # every binary once on each node
        flags = [sp for _, _, sp in c.calls]
        assert flags == [False] * n_design + [True] * n_spec  # the designs first, at normal priority
        assert c.calls[0][1] == designs[0][0]  # position-major: every search's first config comes first
        want = {specialization(Problem.from_dict(s.problem), cfg)
                for s, d in zip(searches, designs, strict=True) for cfg in d}
        assert set(keys[:n_design]) == want
        for p, cfg, _ in c.calls[n_design:]:  # each speculative config is one step from a design config
            d = designs[2] if not p["causal"] else designs[0]
            steps = [{k: idx[k].index(cfg[k]) - idx[k].index(x[k]) for k in cfg} for x in d]
            assert space.contains(cfg) and any(
                sum(abs(v) for v in st.values()) == 1 or (sum(v != 0 for v in st.values()) == 2 and all(
                    abs(v) <= 1 for v in st.values()) and {k for k, v in st.items() if v} in (
                    {"BLOCK_M", "num_warps"}, {"BLOCK_N", "num_stages"})) for st in steps)


def test_limit_for_is_a_multiple_of_the_median_cold_compile_between_the_floor_and_the_timeout():
    from raytune_attn.tune.measure.compile_pool import LIMIT_FLOOR_S, LIMIT_MIN_BUILDS, limit_for

    typical = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert len(typical) == LIMIT_MIN_BUILDS
    assert limit_for(typical[:-1], 120.0, 10.0) == 120.0  # too few seen
    assert limit_for(typical, 120.0, 10.0) == 45.0  # 10 x the median, 4.5 s
    assert limit_for(typical + [0.01] * 20, 120.0, 10.0) == 45.0  # cache loads are not compiles
    assert limit_for(typical, 30.0, 10.0) == 30.0  # never over --compile-timeout
    assert limit_for([0.5] * 8, 120.0, 10.0) == LIMIT_FLOOR_S  # never under the floor
    assert limit_for(typical, 120.0, 0.0) == 120.0  # switched off


def test_start_asks_every_search_its_first_suggestion_ahead():
    s = _sweep()
    s.start()
    firsts = {k: x.pending[1].value for k, x in s.searches.items()}
    got = [s.suggest(f"t{i}") for i in range(2)]
    assert {g["search"]: g["config"] for g in got} == firsts


@pytest.mark.slow
def test_pre_started_search_hosts_serve_the_searches_in_order():
    """Hosts started before their searchers exist (start_hosts) get them with `load`, which runs before the first
    suggestion: each search suggests, in order, what the same searcher suggests in this process, on those hosts."""
    import time

    import ray

    from raytune_attn.tune.sweep.searcher import start_hosts

    ray.init(num_cpus=2, include_dashboard=False)
    try:
        hosts = start_hosts(2)
        s = _sweep()
        s.remote, s.hosts = True, list(hosts)
        s.start()
        assert s.wait_ready(timeout_s=60) == 0 and all(x.pending[1].ready() for x in s.searches.values())
        got: dict[str, list] = {"CPU/0": [], "CPU/1": []}
        deadline = time.time() + 60
        while sum(map(len, got.values())) < 4 and time.time() < deadline:
            tid = f"t{sum(map(len, got.values()))}"
            g = s.suggest(tid)
            if g:  # handed out deferred when its config was still being made: the trial takes it from the actor
                cfg = g.get("config") or ray.get(ray.get_actor(g["deferred"]["host"]).take.remote(
                    g["deferred"]["inner"]))
                assert cfg == (g.get("config") or s.config_of(tid))
                got[g["search"]].append(cfg)
            else:
                time.sleep(0.05)
        local = _sweep()
        want = {k: [x.searcher.suggest(f"l{i}") for i in range(2)] for k, x in local.searches.items()}
        assert got == want
        assert [x.host.actor for x in s.searches.values()] == [a for a, _ in hosts]
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_shared_results_reach_the_other_search_actors():
    """--share-results with the searches in their actors (the driver's case): a finished trial's row reaches the
    other search's GP in its actor, and not its own."""
    import time

    import ray

    from raytune_attn.problem import Problem
    from raytune_attn.tune.sweep.searcher import search_key

    space = load_space("cpu/interpreter")
    searches = [Search(search_key("CPU", Problem(**p).key), "CPU", p, make_searcher("gp", space, seed=i, priors=False),
                       budget=4, max_concurrent=2) for i, p in enumerate((P1, P2))]  # fmt: skip
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        s = SweepSearcher(searches, {"namespace": "ns"}, remote=True, share_results=True)
        s.start()
        assert s.wait_ready(timeout_s=60) == 0
        g, deadline = None, time.time() + 60
        while not (g and g.get("config")) and time.time() < deadline:
            g = s.suggest("t0")
            time.sleep(0.05)
        s.on_trial_complete("t0", {"status": "ok", "tflops": 3.0, "config": g})
        g2, deadline = None, time.time() + 60
        while not (g2 and g2.get("config")) and time.time() < deadline:
            g2 = s.suggest("t1")  # the other search's: handed out, its next asked, with the row given first
            time.sleep(0.05)
        assert g2["search"] != g["search"]
        related = {k: ray.get(x.host.actor.get_state.remote())["related"] for k, x in s.searches.items()}
        problem_key = g["search"].split("/", 1)[1]
        assert related == {k: [] if k == g["search"] else [{"problem_key": problem_key, **g["config"], "status": "ok",
                                                            "tflops": 3.0}] for k in s.searches}  # fmt: skip
    finally:
        ray.shutdown()


def test_simulated_gpu_spends_two_runs_on_a_capped_rung():
    from raytune_attn.tune.sweep.simulate import SimulatedGPU

    land = Path(__file__).parent / "data" / "landscape_h100_d128_causal_s4096.parquet"
    sim = SimulatedGPU(str(land), check_ms=0.0)
    cfg = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2, "PRE_LOAD_V": False}
    flops = 1e9  # a microsecond-scale kernel: its full rung is the rung's budget
    full = sim.run(flops, cfg, 1, 5.0, False)
    capped = sim.run(flops, cfg, 1, 5.0, False, cap_ms=full["latency_ms"] / 2)
    assert not full["capped"] and capped["capped"] and capped["latency_ms"] == full["latency_ms"]
    assert capped["bench_s"] == pytest.approx(2 * full["latency_ms"] / 1e3)
    assert full["bench_s"] > 5.0 / 1e3


def test_simulated_gpu_spends_one_run_on_a_rung_over_the_cap_by_more_than_a_stall(monkeypatch):
    from raytune_attn.tune.measure import timing
    from raytune_attn.tune.sweep.simulate import SimulatedGPU

    monkeypatch.setattr(timing, "STALL_MAX_MS", 5.0)  # the simulation sleeps what it models: keep it short
    land = Path(__file__).parent / "data" / "landscape_h100_d128_causal_s4096.parquet"
    sim = SimulatedGPU(str(land), check_ms=0.0)
    cfg = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2, "PRE_LOAD_V": False}
    ms = sim.run(1e9, cfg, 1, 5.0, False)["latency_ms"]
    flops = 1e9 * 15.0 / ms  # a 15 ms kernel
    over = sim.run(flops, cfg, 1, 5.0, False, cap_ms=2.5)  # over by 12.5 ms: no stall explains it, one run
    near = sim.run(flops, cfg, 1, 5.0, False, cap_ms=12.5)  # over by 2.5 ms: a second run confirms
    assert over["capped"] and over["bench_s"] == pytest.approx(15.0 / 1e3)
    assert near["capped"] and near["bench_s"] == pytest.approx(30.0 / 1e3)
    # Rung 1 checks the output first, which is the kernel's first run: far over the cap, that run is all it costs
    # (BenchActor.run stops there); a check near the cap is followed by the two runs of a capped rung.
    first = sim.run(flops, cfg, 1, 5.0, True, cap_ms=2.5)
    near_first = sim.run(flops, cfg, 1, 5.0, True, cap_ms=12.5)
    assert first["capped"] and first["bench_s"] == pytest.approx(15.0 / 1e3)
    assert near_first["capped"] and near_first["bench_s"] == pytest.approx(45.0 / 1e3)


@pytest.mark.slow
def test_speculator_queues_the_suggestion_then_at_most_cap_likely_configs_once_each():
    import ray

    from raytune_attn.tune.sweep.prefetch import Speculator

    @ray.remote
    def build(seconds):
        import time

        time.sleep(seconds)

    class Compiler(_RecordingCompiler):  # each build takes 1.5 s
        def remote(self, problem, config, speculative=False):
            super().remote(problem, config, speculative)
            return build.remote(1.5)

    ray.init(num_cpus=2, include_dashboard=False)
    try:
        rec = Compiler()
        problem = {**P1, "head_dim": 128, "dtype": "bfloat16"}
        cfgs = [{"BLOCK_M": m, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2, "PRE_LOAD_V": False}
                for m in (32, 64, 128, 256, 16)]
        sp = Speculator(problem, [rec], cap=2)
        assert sp.submit(cfgs[0], cfgs[1:4]) == 3
        assert [(c["BLOCK_M"], spec) for _, c, spec in rec.calls] == [(32, False), (64, True), (128, True)]
        assert sp.submit(cfgs[0], [cfgs[1], cfgs[3]]) == 0  # queued once each; two speculative builds in flight
        ray.get(build.remote(0.0))
        import time

        time.sleep(2.0)  # both speculative builds done: room again
        assert sp.submit(cfgs[4], [cfgs[3]]) == 2
        assert [(c["BLOCK_M"], spec) for _, c, spec in rec.calls[3:]] == [(16, False), (256, True)]
        assert Speculator(problem, [], cap=2).submit(cfgs[0], cfgs) == 0  # no compile actor (no GPU node)
    finally:
        ray.shutdown()


def test_scheduler_lets_tune_keep_a_finished_trial_process_for_each_trial_in_flight(caplog):
    """On the installed Ray: Tune's own cache (as TuneController builds it) keeps one spare process with no trial
    staged; reached through the wrapper Tune hands schedulers, widened on the first trial, it keeps every finished
    trial's process for the next, and Ray's "restricted" warning is not triggered."""
    from types import SimpleNamespace

    from ray.tune.execution.placement_groups import PlacementGroupFactory
    from ray.tune.execution.tune_controller import TuneController
    from ray.tune.utils.object_cache import _ObjectCache

    from raytune_attn.tune.sweep import process_cache

    assert process_cache.supported(), "a Ray outside process_cache.SUPPORTED: read its TuneController again"
    pgf = PlacementGroupFactory([{"CPU": 0.01}])
    stock = _ObjectCache(may_keep_one=True)
    assert [stock.cache_object(pgf, f"p{i}") for i in range(3)] == [True, False, False]

    controller = TuneController.__new__(TuneController)  # what _wrapped() reads, no experiment
    controller._actor_cache, controller._search_alg, controller._resource_updater = stock.__class__(True), None, None
    handed = controller._wrapped()  # what Tune passes to a scheduler's on_trial_add
    sch = PerSearchScheduler(max_t=3, keep_processes=4)
    trial = SimpleNamespace(config={"search": "CPU/a"}, placement_group_factory=pgf, trial_id="t0")
    with caplog.at_level("WARNING"):
        sch.on_trial_add(handed, trial)
        sch.on_trial_add(handed, SimpleNamespace(**{**trial.__dict__, "trial_id": "t1"}))  # widened once only
    assert "restricted" not in caplog.text
    cache = controller._actor_cache
    assert [cache.cache_object(pgf, f"p{i}") for i in range(6)] == [True] * 4 + [False] * 2  # one per trial in flight
    assert cache.pop_cached_object(pgf) == "p0"  # the next trial takes a kept process: no new one boots
    # Where the internals are not there (another Ray, or no controller), nothing happens and nothing breaks.
    assert not process_cache.widen(SimpleNamespace(), pgf, 4) and not process_cache.widen(None, pgf, 4)


def test_no_priors_and_warm_start_reach_the_searchers(tmp_path, monkeypatch):
    """--warm-start's table is read and checked by the plan (its path kept absolute for a resume elsewhere); the GP
    takes it into its model, with the space file's priors off under --no-priors; another searcher starts from its
    best configs."""
    from raytune_attn.tune.sweep.plan import make_plan
    from raytune_attn.tune.sweep.run import searcher_options

    monkeypatch.chdir(tmp_path)
    land = Path(__file__).parent / "data" / "landscape_h100_d64_full_s1024.parquet"
    (tmp_path / "w.parquet").write_bytes(land.read_bytes())
    space = load_space("nvidia/sm90_study")
    plan = make_plan(SweepConfig(out=str(tmp_path / "o"), warm_start="w.parquet", no_priors=True))
    assert plan.config.warm_start == str(tmp_path / "w.parquet") and len(plan.warm) == 450
    opts = searcher_options(plan, space)
    assert opts["priors"] is False and len(opts["warm_start"]) == 450
    gp = make_searcher("gp", space, seed=0, **opts)
    assert len(gp._warm) == 450 and not gp._design
    plan = make_plan(SweepConfig(out=str(tmp_path / "o"), warm_start="w.parquet", searcher="random"))
    first = searcher_options(plan, space)["initial"]
    assert len(first) == 6 and first[0] == {k: v for k, v in opts["warm_start"][0][0].items()}
    assert make_searcher("random", space, seed=0, initial=first).suggest("t")["BLOCK_M"] == first[0]["BLOCK_M"]
    assert searcher_options(make_plan(SweepConfig(out=str(tmp_path / "o"))), space) == {"priors": True}
    assert not (tmp_path / "o").exists()  # planning writes nothing


def test_a_sweeps_own_export_is_a_warm_start(tmp_path):
    """`tune --warm-start` on another sweep's trials.parquet: its rows leave the knobs their space did not vary
    empty, and the plan takes it (it refused every such table before: no row recorded all of the knobs)."""
    from raytune_attn.problem import Problem
    from raytune_attn.tune import results
    from raytune_attn.tune.sweep.plan import make_plan
    from raytune_attn.tune.sweep.run import searcher_options

    p = Problem(batch=1, hq=2, hkv=2, seqlen_q=64, seqlen_k=64, head_dim=32, causal=True, dtype="float32")
    rows = [results.trial_row(p.to_dict(), {"BLOCK_M": m, "BLOCK_N": 16}, {"status": "ok", "tflops": float(m),
                                                                          "latency_ms": 1.0, "rung": 1},
                              {"vendor": "cpu", "arch": "interpreter", "accelerator_type": "CPU"},
                              trial_id=f"t{m}", sweep_id="s") for m in (16, 32)]
    path = results.write_file(rows, tmp_path / "trials.parquet")
    plan = make_plan(SweepConfig(out=str(tmp_path / "o"), warm_start=str(path)))
    opts = searcher_options(plan, load_space("cpu/interpreter"))
    assert [(c["BLOCK_M"], c["BLOCK_N"], score) for c, score in opts["warm_start"]] == [(32, 16, 1.0), (16, 16, 0.5)]


def test_an_address_where_no_cluster_answers_is_refused_before_anything_is_written(tmp_path):
    """ray.init waits minutes on a closed port: the plan probes the address first (a TCP connect, 5 s at most)."""
    import socket

    from raytune_attn.tune.sweep.plan import make_plan

    with socket.socket() as s:  # a port nothing listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SweepUsageError, match=f"--address 127.0.0.1:{port}: not running .*unreachable"):
        make_plan(SweepConfig(out=str(tmp_path / "o"), address=f"127.0.0.1:{port}"))
    assert not (tmp_path / "o").exists()


def test_default_budget_is_larger_without_priors_and_an_explicit_one_stands(tmp_path):
    """--no-priors without --budget gives each search 75 trials on a GPU, where the priors' default is 40; a given
    --budget is kept either way, and the interpreter's small default does not grow."""
    from raytune_attn.tune.sweep.plan import make_plan
    from raytune_attn.tune.sweep.run import budget

    def of(cpu_mode, **flags):
        return budget(make_plan(SweepConfig(out=str(tmp_path / "o"), **flags)), cpu_mode)

    assert (of(False), of(False, no_priors=True)) == (40, 75)
    assert (of(False, budget=30), of(False, budget=30, no_priors=True)) == (30, 30)
    assert (of(True), of(True, no_priors=True)) == (6, 6)


class _ScriptedActor:
    """A benchmark actor's handle whose `stats` call answers from a script: exceptions raised in order, then the
    counters (ray.get is patched to play it)."""

    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)
        self.stats = self

    def remote(self):
        return self


def test_actor_stats_waits_for_a_restarting_actor_and_survives_a_dead_one(monkeypatch):
    import ray

    from raytune_attn.tune.sweep import cluster

    def get(ref, timeout=None):
        out = ref.outcomes.pop(0)
        if isinstance(out, BaseException):
            raise out
        return out

    clock = [0.0]  # the waits advance a clock of their own: no real time passes

    def sleep(s):
        clock[0] += s

    monkeypatch.setattr(ray, "get", get)
    monkeypatch.setattr(cluster.time, "sleep", sleep)
    monkeypatch.setattr(cluster.time, "monotonic", lambda: clock[0])
    unavailable = ray.exceptions.ActorUnavailableError("the actor is restarting", None)
    counters = {"busy_s": 2.5, "baseline_s": 0.5, "compile_wait_s": 0.1, "calls": 7}
    restarting = _ScriptedActor(unavailable, unavailable, counters)
    dead = _ScriptedActor(ray.exceptions.ActorDiedError())
    never_back = _ScriptedActor(*[unavailable] * 100)
    got = cluster.actor_stats([restarting, dead, never_back], timeout_s=5.0)
    assert got[0] == counters and restarting.outcomes == []  # asked again until it answered
    assert got[1]["unavailable"] == "ActorDiedError" and got[1]["busy_s"] == 0.0 and got[1]["calls"] == 0
    assert got[2]["unavailable"] == "still restarting" and got[2]["busy_s"] == 0.0
    assert 5.0 <= clock[0] < 5.5 and len(never_back.outcomes) > 50  # asked until the deadline, then given up


def test_a_failed_final_remeasure_is_said_and_the_rungs_stand(monkeypatch, caplog):
    import types

    import ray

    from raytune_attn.tune.sweep import remeasure as rm

    class _Act:  # one GPU's actor whose re-measures all fail, as on a worker out of memory
        class run:  # noqa: N801 - Ray's `actor.method.remote` shape
            @staticmethod
            def remote(problem, config, rung, rep_ms, check):
                return {"status": "error", "reason": f"CUDA out of memory ({config['BLOCK_M']})"}

    problem = {"batch": 1, "hq": 2, "hkv": 2, "seqlen_q": 64, "seqlen_k": 64, "head_dim": 16, "causal": False,
               "dtype": "float32", "varlen": False}
    s = Search("H100/p", "H100", problem, None, budget=2, max_concurrent=1)
    from raytune_attn.problem import Problem

    key = Problem.from_dict(problem).key
    rows = [{"kind": "trial", "problem_key": key, "accelerator_type": "H100", "status": "ok", "tflops": t,
             "trial_id": f"t{t}", "BLOCK_M": m, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
            for t, m in ((2.0, 16), (1.0, 32))]
    config = types.SimpleNamespace(rungs_ms=(1.0, 5.0), top_k=2, family_k=0, final_rep_ms=50.0)
    sweep = types.SimpleNamespace(plan=types.SimpleNamespace(config=config), searches=[s],
                                  cluster=types.SimpleNamespace(actors={"H100": [_Act()]}))
    monkeypatch.setattr(ray, "get", lambda f: f)
    with caplog.at_level("WARNING", logger="raytune_attn.tune.sweep.remeasure"):
        assert rm.remeasure(sweep, rows) == []
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and all("H100/p: the final re-measure of" in m and "CUDA out of memory" in m for m in said)
    assert '"BLOCK_M": 16' in said[0] and '"BLOCK_M": 32' in said[1]  # best first, each config named


def test_format_summary_names_a_winner_without_a_final_remeasure():
    s = {"name": "n", "trials": 2, "wall": "0:00:01", "tune_wall_s": 1.0, "benchmark_actors": 1,
         "gpu_busy_fraction": 0.5, "overhead_per_trial_s": 0.1, "early_stop": True, "timings_representative": True,
         "configs_per_s": 1.0, "idle_compile_bound_s": 0.0, "searches": []}
    search = {"trials": 1, "ok": 1, "stopped": 0, "invalid": 0, "error": 0, "best_tflops": 1.0,
              "best_latency_ms": 2.0, "best_config": {"BLOCK_M": 16}, "baselines": {}}
    s["searches"] = [{**search, "search": "H100/a", "remeasured": 0}, {**search, "search": "H100/b", "remeasured": 3}]
    lines = format_summary(s).splitlines()
    assert "no final re-measure" in lines[1] and "no final re-measure" not in lines[2]


def test_the_plan_names_a_searchers_missing_dependency_before_anything_starts(tmp_path, monkeypatch):
    """--searcher tpe without Optuna is refused by the plan with the extra to install, not by a search actor after
    Ray started; with Optuna the plan passes."""
    from raytune_attn.tune.sweep.plan import make_plan

    pytest.importorskip("optuna")
    assert make_plan(SweepConfig(out=str(tmp_path / "o"), searcher="tpe")).config.searcher == "tpe"
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(SweepUsageError, match=r"--searcher tpe: .*pip install 'raytune-attn\[tpe\]'"):
        make_plan(SweepConfig(out=str(tmp_path / "o"), searcher="tpe"))
    assert not (tmp_path / "o").exists()


def test_the_plan_refuses_to_log_to_mlflow_where_it_is_not_installed(tmp_path, monkeypatch):
    """Without MLflow a sweep that would log is refused before Ray starts, naming --no-mlflow; with it, it plans."""
    from raytune_attn.tune.sweep.plan import make_plan

    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(SweepUsageError, match=r"MLflow is not installed: .*or pass --no-mlflow"):
        make_plan(SweepConfig(out=str(tmp_path / "o"), tracking_uri=f"sqlite:///{tmp_path / 'm.db'}"))
    assert make_plan(SweepConfig(out=str(tmp_path / "o"), no_mlflow=True)).tracking_uri is None
    assert not (tmp_path / "o").exists()
