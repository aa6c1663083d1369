"""Resume safety: the state a sweep writes is checksummed JSON that a resume refuses when damaged, foreign or
writable by others, and a resume after kill -9 of a real sweep driver counts each trial once (sweep/state.py,
trust.py, resume.py)."""

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import interpreter_only

from raytune_attn.tune import results
from raytune_attn.tune.search import load_space, make_searcher
from raytune_attn.tune.sweep import resume
from raytune_attn.tune.sweep.state import Ledger, ResumeStateError, read_doc, write_doc

P1 = {"batch": 1, "hq": 2, "hkv": 2, "seqlen_q": 64, "seqlen_k": 64, "head_dim": 32, "causal": True,
      "dtype": "float32", "varlen": False}
KEY1 = "dense-b1-hq2-hkv2-sq64-sk64-d32-causal-float32"


def _tune(*args):
    from raytune_attn.tune.cli import main

    return main(["tune", *args])


def test_a_state_document_reads_back_and_any_change_is_refused_naming_the_file(tmp_path):
    path = write_doc(tmp_path / "sweep.json", {"name": "s", "args": {"budget": 3}})
    assert read_doc(path) == {"name": "s", "args": {"budget": 3}}
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    doc = json.loads(path.read_text())
    doc["payload"]["args"]["budget"] = 4  # tampered
    path.write_text(json.dumps(doc))
    with pytest.raises(ResumeStateError, match=f"{path}: checksum mismatch"):
        read_doc(path)
    for bad, why in ((b'{"format": "raytune-attn.sweep", "vers', "not JSON"),  # truncated
                     (pickle.dumps({"name": "s"}), "not JSON"),  # a pickle where JSON belongs
                     (b'{"name": "s", "args": {}}', "not a raytune-attn.sweep file"),  # unsealed
                     (json.dumps({**doc, "version": 99}).encode(), "version 99")):
        path.write_bytes(bad)
        with pytest.raises(ResumeStateError, match=why) as e:
            read_doc(path)
        assert str(path) in str(e.value)


def test_a_ledger_reads_back_and_a_cut_or_changed_line_is_refused_naming_it(tmp_path):
    led = Ledger(tmp_path / "ledger.jsonl")
    assert led.records() == []
    recs = [{"kind": "attempt", "attempt": 1}, {"kind": "trial", "trial_id": "a", "config": {"BLOCK_M": 16}}]
    for r in recs:
        led.append(r)
    assert led.records() == recs
    lines = led.path.read_bytes().splitlines(keepends=True)
    led.path.write_bytes(lines[0] + lines[1][:-9])  # a write cut short
    with pytest.raises(ResumeStateError, match="cut short"):
        led.records()
    led.path.write_bytes(lines[0] + lines[1].replace(b'"a"', b'"b"'))
    with pytest.raises(ResumeStateError, match=f"{led.path} line 2: checksum mismatch"):
        led.records()


def test_a_resume_refuses_damaged_or_foreign_state_within_seconds_before_ray(tmp_path, capsys):
    import ray

    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    saved = write_doc(out / "sweep.json", {"name": "s", "args": {"searcher": "random", "no_mlflow": True}})
    good = saved.read_bytes()
    cases = [(lambda: saved.write_bytes(good[:40]), "not JSON"),
             (lambda: saved.write_bytes(good.replace(b'"random"', b'"grid"')), "checksum mismatch"),
             (lambda: (saved.write_bytes(good), saved.chmod(0o666)), "writable by group or others"),
             (lambda: (saved.chmod(0o644), out.chmod(0o775)), "writable by group or others")]
    for damage, why in cases:
        damage()
        t0 = time.monotonic()
        assert _tune("--resume", "--out", str(out)) == 2
        err = capsys.readouterr().err
        assert why in err and (str(saved) in err or str(out) in err) and time.monotonic() - t0 < 10
    out.chmod(0o755)
    (out / "ledger.jsonl").write_text("not a ledger\n")
    assert _tune("--resume", "--out", str(out)) == 2
    assert f"{out / 'ledger.jsonl'} line 1: not JSON" in capsys.readouterr().err
    assert not ray.is_initialized()


def _row(tid, status, knobs, ts):
    return results.trial_row(P1, knobs, {"status": status, "tflops": 1.0 + ts, "rung": 1, "timestamp": ts},
                             {"accelerator_type": "CPU"}, trial_id=tid, sweep_id="s", sweep_name="s")


def test_load_counts_finished_trials_once_and_marks_those_left_in_flight(tmp_path):
    space = load_space("cpu/interpreter")
    cfgs = space.configs()[:4]
    led = Ledger(tmp_path / resume.LEDGER_NAME)
    led.append({"kind": "attempt", "attempt": 1})
    led.append({"kind": "parents", "attempt": 1, "runs": {"CPU/" + KEY1: "run-1"}})
    for i, c in enumerate(cfgs):
        led.append({"kind": "trial", "attempt": 1, "trial_id": f"t{i}", "search": "CPU/" + KEY1, "accel": "CPU",
                    "problem": P1, "inner": f"i{i}", "config": c if i != 3 else None})  # t3 handed out deferred
    # t0 and t1 finished; t2 and t3 were in flight when the driver died. A final re-measure is not a trial.
    results.write_trials([_row("t0", "ok", cfgs[0], 1), _row("t1", "stopped", cfgs[1], 2),
                          _row("t0-final", "ok", cfgs[0], 3)], tmp_path / "trials")
    prior = resume.load(tmp_path)
    assert prior.attempt == 2 and prior.parents == ("run-1",)
    assert [r["trial_id"] for r in prior.done["CPU/" + KEY1]] == ["t0", "t1"]
    assert [r["trial_id"] for r in prior.interrupted] == ["t2", "t3"]
    marks = resume.interrupted_rows(prior, {"sweep_id": "s", "sweep_name": "s"})
    assert [(m["trial_id"], m["status"]) for m in marks] == [("t2", "interrupted"), ("t3", "interrupted")]
    assert results.row_config(marks[0]) == cfgs[2] and results.row_config(marks[1]) == {}
    results.write_trials(marks, tmp_path / "trials")
    # Readers leave the marked trials out unless asked; the next resume finds none left to mark.
    assert sorted(results.read_trials(tmp_path / "trials")["trial_id"]) == ["t0", "t0-final", "t1"]
    assert len(results.read_trials(tmp_path / "trials", interrupted=True)) == 5
    again = resume.load(tmp_path)
    assert again.interrupted == () and again.done_count("CPU/" + KEY1) == 2


def test_an_emptied_ledger_beside_trial_rows_is_refused_naming_it(tmp_path):
    """The ledger's attempt lines say which trials were in flight when a driver ended: with trial rows and none of
    them, a resume could not mark those trials (they would be lost), so it is refused."""
    cfg = load_space("cpu/interpreter").configs()[0]
    results.write_trials([_row("t0", "ok", cfg, 1)], tmp_path / "trials")
    (tmp_path / resume.LEDGER_NAME).write_text("")
    with pytest.raises(ResumeStateError, match=r"ledger\.jsonl: no driver's attempt recorded, yet the sweep holds 1 "
                                               r"trial row"):
        resume.load(tmp_path)


def test_a_resume_cuts_a_ledger_line_a_write_left_short_and_keeps_every_row(tmp_path, caplog):
    """A full disk or power loss can leave the ledger's last line short; the resume cuts it back to the last whole
    line (saying so), reads the rest, and appends after it. What was measured is in the rows, all kept."""
    space = load_space("cpu/interpreter")
    cfgs = space.configs()[:2]
    led = Ledger(tmp_path / resume.LEDGER_NAME)
    led.append({"kind": "attempt", "attempt": 1})
    led.append({"kind": "trial", "attempt": 1, "trial_id": "t0", "search": "CPU/" + KEY1, "accel": "CPU",
                "problem": P1, "inner": "i0", "config": cfgs[0]})
    whole = led.path.read_bytes()
    led.append({"kind": "trial", "attempt": 1, "trial_id": "t1", "search": "CPU/" + KEY1, "accel": "CPU",
                "problem": P1, "inner": "i1", "config": cfgs[1]})
    led.path.write_bytes(led.path.read_bytes()[:-20])  # t1's line cut short
    results.write_trials([_row("t0", "ok", cfgs[0], 1), _row("t1", "ok", cfgs[1], 2)], tmp_path / "trials")
    with caplog.at_level("WARNING", logger=resume.__name__):
        prior = resume.load(tmp_path)
    assert "its last line was cut short" in caplog.text and str(led.path) in caplog.text
    assert led.path.read_bytes() == whole
    assert prior.attempt == 2 and [r["trial_id"] for r in prior.done["CPU/" + KEY1]] == ["t0", "t1"]
    assert prior.interrupted == ()
    led.append({"kind": "attempt", "attempt": 2})
    assert [r["kind"] for r in led.records()] == ["attempt", "trial", "attempt"]


def test_replay_rebuilds_a_search_that_never_suggests_a_measured_config_again():
    space = load_space("cpu/interpreter")
    first = make_searcher("random", space, seed=5)
    done = [first.suggest(f"t{i}") for i in range(3)]
    rows = [_row(f"t{i}", st, c, i) for i, (c, st) in enumerate(zip(done, ("ok", "stopped", "invalid"), strict=True))]
    rebuilt = make_searcher("random", space, seed=5)
    resume.replay(rebuilt, rows)
    assert [v for _, v in rebuilt.observations] == [1.0, 2.0, None]  # stopped early: its rung's value; invalid: none
    nxt = [rebuilt.suggest(f"n{i}") for i in range(len(rebuilt.candidates) - 3)]
    assert not any(c in nxt for c in done) and len({space.key(c) for c in nxt}) == len(nxt)


_EVIL = "raytune-attn-pwned"


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {_EVIL}",))


def _wait_for_trials_in_flight(proc, out: Path, timeout_s: float = 400) -> tuple[int, int]:
    """Until a trial has finished (its row written) while another is handed out without one; (rows, handed out)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the sweep ended before it could be killed mid-sweep"
        rows = len(list((out / "trials").rglob("*.parquet"))) if (out / "trials").exists() else 0
        led = out / resume.LEDGER_NAME
        handed = sum(r["kind"] == "trial" for r in Ledger(led).records()) if led.exists() else 0
        if rows >= 1 and handed > rows:
            return rows, handed
        time.sleep(0.2)
    raise AssertionError("no trial finished in time")


@pytest.mark.xdist_group("ray")
@interpreter_only  # cpu_smoke's float32 problems: on a GPU they take milliseconds and the sweep ends before the kill
def test_kill_9_of_the_driver_then_resume_counts_each_trial_once(tmp_path, monkeypatch):
    import mlflow

    out, store = tmp_path / "out", f"sqlite:///{tmp_path / 'mlflow.db'}"
    budget = 2
    flags = ["--problems", "cpu_smoke", "--space", "cpu/interpreter", "--searcher", "random", "--budget", str(budget),
             "--trials-per-gpu", "2", "--rungs", "5", "--top-k", "0", "--family-k", "0", "--no-baselines",
             "--tracking-uri", store, "--out", str(out), "--name", "k9"]
    cmd = [sys.executable, "-m", "raytune_attn.tune.sweep"]
    log = open(tmp_path / "first.log", "w")
    proc = subprocess.Popen([*cmd, *flags], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        _wait_for_trials_in_flight(proc, out)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever of its Ray cluster did not end with it
        except ProcessLookupError:
            pass
    prior = resume.load(out)
    assert prior.attempt == 2 and prior.interrupted
    # Ray's pickled experiment state is not read by a resume: a planted one runs nothing.
    (out / "ray" / "k9" / "searcher-state-x.pkl").write_bytes(pickle.dumps(_Evil()))
    # From another directory, with none of the flags: the sweep's own are reused, its tracking store included.
    monkeypatch.chdir(out)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert _tune("--resume", "--out", str(out)) == 0
    assert not (out / _EVIL).exists() and not (tmp_path / _EVIL).exists()

    df = results.read_trials(out)
    trials = df[(df["kind"] == "trial")]
    assert trials["trial_id"].is_unique
    assert trials.groupby("problem_key").size().to_dict() == {k: budget for k in trials["problem_key"].unique()}
    assert trials["problem_key"].nunique() == 2
    assert not (out / "trials").exists()  # every row once, in trials.parquet (the marks too)
    marked = results.read_trials(out, interrupted=True)
    marked = set(marked.loc[marked["status"] == "interrupted", "trial_id"])
    assert marked == {r["trial_id"] for r in prior.interrupted} and not marked & set(trials["trial_id"])
    handed = [r for r in Ledger(out / resume.LEDGER_NAME).records() if r["kind"] == "trial"]
    assert {r["trial_id"] for r in handed} == set(trials["trial_id"]) | marked
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["trials"], summary["attempt"], summary["trials_interrupted"]) == (2 * budget, 2, len(marked))
    finished_before = sum(len(v) for v in prior.done.values())
    assert summary["trials_this_attempt"] == 2 * budget - finished_before  # what the rates of this attempt count

    client = mlflow.MlflowClient(store)
    parents = [r for r in Ledger(out / resume.LEDGER_NAME).records() if r["kind"] == "parents"]
    status = {p["attempt"]: {client.get_run(rid).info.status for rid in p["runs"].values()} for p in parents}
    assert status == {1: {"KILLED"}, 2: {"FINISHED"}}
