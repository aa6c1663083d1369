"""What a resumed sweep takes from the runs of its driver before it: read from data only, never from Ray's pickles.

A resume is a new Tune experiment (`tune_name`: `<name>-attempt<k>`), not `Tuner.restore` of the old one, whose
state Ray pickles. What it needs is in the output directory as data (state.py, the trial rows):

- the trials that finished: their rows under `trials/` (written as each trial ended). They count toward each
  search's budget once, and each search's searcher is rebuilt from them (`replay`);
- the trials that were in flight when the driver died: handed out (a `trial` record in the ledger) with no row.
  Each gets a row with status `interrupted` (`interrupted_rows`; readers skip those) and its config is free again,
  so it runs again under a new trial id if the search still wants it;
- the MLflow parent runs of the earlier drivers (`parents` records): ended as KILLED if still running.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from raytune_attn.tune.sweep.state import Ledger, ResumeStateError

log = logging.getLogger(__name__)
LEDGER_NAME = "ledger.jsonl"


@dataclass(frozen=True)
class Resume:
    """The earlier runs of a sweep's driver, as this one starts (`attempt` 1 and nothing else: a new sweep)."""

    attempt: int = 1
    done: dict = field(default_factory=dict)  # search key -> finished trial rows (records), oldest first
    interrupted: tuple = ()  # ledger `trial` records with no row: in flight when their driver died
    parents: tuple = ()  # MLflow parent run ids of the earlier drivers

    def done_count(self, key: str) -> int:
        return len(self.done.get(key, ()))


def tune_name(name: str, attempt: int) -> str:
    """The Tune experiment (under `<out>/ray/`) of the `attempt`-th run of sweep `name`."""
    return name if attempt <= 1 else f"{name}-attempt{attempt}"


def logged_trials(out: Path) -> list[dict]:
    """Every trial row the sweep in `out` holds, each once, interrupted marks included, in timestamp order: this
    driver's written as trials ended (trials/) and finalized attempts' (trials.parquet); not the final re-measures
    or the baselines. ResultsError for an unreadable file."""
    from raytune_attn.tune import results, winners

    if not (out / "trials").exists() and not (out / "trials.parquet").exists():
        return []
    df = results.read_trials(out, interrupted=True)
    df = df[df["kind"] == "trial"].sort_values("timestamp", kind="stable")
    return [r for r in df.to_dict("records") if not winners.is_final(r["trial_id"])]


def load(out: Path) -> Resume:
    """The earlier runs of the sweep in `out`; ResumeStateError naming a ledger that is corrupt or foreign."""
    from raytune_attn.tune import results
    from raytune_attn.tune.sweep.searcher import search_key

    ledger = Ledger(out / LEDGER_NAME)
    dropped = ledger.drop_torn_tail()
    if dropped:
        log.warning("%s: its last line was cut short (a write interrupted by a full disk or power loss); dropped %d "
                    "bytes, at most one event: a trial in flight then runs again if its search still wants it",
                    ledger.path, dropped)
    records = ledger.records()
    attempt = 1 + sum(r["kind"] == "attempt" for r in records)
    try:
        rows = logged_trials(out)
    except results.ResultsError as e:
        raise ResumeStateError(str(e)) from None
    if rows and attempt == 1:  # every driver records its attempt before Ray starts, so before any trial row
        raise ResumeStateError(f"{ledger.path}: no driver's attempt recorded, yet the sweep holds {len(rows)} trial "
                               "row(s): the ledger was emptied or replaced; the trials in flight when it ended cannot "
                               "be known")
    seen = {str(r["trial_id"]) for r in rows}
    done: dict[str, list] = {}
    for r in rows:
        if r["status"] != results.INTERRUPTED:
            done.setdefault(search_key(str(r["accelerator_type"]), str(r["problem_key"])), []).append(r)
    trials = [r for r in records if r["kind"] == "trial"]
    interrupted = tuple(r for r in trials if str(r.get("trial_id")) not in seen)
    parents = tuple(rid for r in records if r["kind"] == "parents" for rid in dict(r.get("runs") or {}).values())
    return Resume(attempt=attempt, done=done, interrupted=interrupted, parents=parents)


def interrupted_rows(prior: Resume, meta: dict) -> list[dict]:
    """A row with status `interrupted` for each trial in flight when an earlier driver died (readers skip them):
    the record says it ran, and that its config's result is the row of another trial id, if any."""
    from raytune_attn.tune import results

    rows = []
    for rec in prior.interrupted:
        metrics = {"status": results.INTERRUPTED, "rung": 0,
                   "reason": f"in flight when the sweep's driver ended (attempt {rec.get('attempt')}); its config "
                             f"was free again for attempt {prior.attempt}"}
        try:
            rows.append(results.trial_row(rec["problem"], dict(rec.get("config") or {}), metrics,
                                          {"accelerator_type": rec["accel"]}, trial_id=str(rec["trial_id"]),
                                          attempt=rec.get("attempt"), **meta))
        except (KeyError, TypeError, ValueError) as e:  # the mark is a record; the budgets come from the rows
            log.warning("trial %s was in flight when the driver ended; not marked (%s)", rec.get("trial_id"), e)
    return rows


def replay(searcher, rows: list[dict]) -> None:
    """Tell a new searcher what the finished `rows` measured, oldest first (the results a search's searcher was
    told as its trials ended): the rebuilt search never suggests those configs again and models their values."""
    from raytune_attn.tune import results

    for r in rows:
        result = {"config": results.row_config(r), "status": results.told_status(r["status"]),
                  "tflops": _float(r.get("tflops")), "compile_s": _float(r.get("compile_s"))}
        searcher.on_trial_complete(f"replayed-{r['trial_id']}", result, error=False)


def relate_done(searches: list, done: dict[str, list[dict]]) -> None:
    """Tell each search the finished rows of the other searches of its accelerator type (`done`: search key -> rows,
    Resume.done), as a sweep that shares results told them while they ran (searcher.related_row)."""
    from raytune_attn.tune import results
    from raytune_attn.tune.sweep.searcher import related_row, tell_related

    for s in searches:
        rows = [related_row(str(r["problem_key"]), results.row_config(r), {**r, "tflops": _float(r.get("tflops"))})
                for o in searches if o.accel == s.accel and o.key != s.key for r in done.get(o.key, [])]
        if rows:
            tell_related(s.searcher, rows)


def _float(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if v == v else None
