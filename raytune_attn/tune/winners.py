"""The one place that picks each search's winning config and counts its trials, and builds the best-configs artifact.

A search is one (accelerator type, problem key). Its winner comes from the final re-measure rows (trial ids ending
in `FINAL_SUFFIX`: the top configs timed again with more repetitions on one GPU) where the search has any, else
from its trials; among those, the fastest row with status "ok" (ties: lower latency, then the smaller trial id,
so the choice is deterministic). Its trial count is its real trials, each trial id once, re-measures left out.

The sweep (summary.json, best_configs.json), `raytune-attn export` and `raytune-attn report` all ask here, so they
name the same winner and count the same trials for the same rows. Paged problems (`paged-...` keys) get entries
the same way; `raytune_attn.paged_runtime` looks them up by shape bucket.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from raytune_attn import artifact, validation
from raytune_attn.problem import Problem
from raytune_attn.tune.results import row_config

FINAL_SUFFIX = "-final"
SearchKey = tuple[str, str]  # (accelerator type, problem key)


def _str(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def isnull(v: Any) -> bool:
    """None, NaN or pandas.NA: a cell with no value."""
    try:
        return v is None or bool(v != v)
    except (TypeError, ValueError):  # pandas.NA
        return True


def is_final(trial_id: Any) -> bool:
    """Whether a trial id names a final re-measure row (not a trial of the search)."""
    return _str(trial_id).endswith(FINAL_SUFFIX)


def _need_columns(df) -> None:
    if "kind" not in df.columns:
        raise ValueError("trials table has no 'kind' column: not a raytune-attn results table")


def _search_rows(df) -> dict[SearchKey, list[dict]]:
    """Trial rows (finals included) grouped by search, in a stable order."""
    _need_columns(df)
    groups: dict[SearchKey, list[dict]] = {}
    for r in df[df["kind"] == "trial"].to_dict("records"):
        groups.setdefault((_str(r["accelerator_type"]), _str(r["problem_key"])), []).append(r)
    return dict(sorted(groups.items()))


def count(rows: list[dict]) -> int:
    """A search's trial count from its trial rows: distinct trial ids among rows that are not re-measures (rows
    without an id each count)."""
    real = [r for r in rows if not is_final(r.get("trial_id"))]
    ids = {_str(r.get("trial_id")) for r in real if not isnull(r.get("trial_id"))}
    return len(ids) + sum(1 for r in real if isnull(r.get("trial_id")))


def trial_counts(df) -> dict[SearchKey, int]:
    """Real trials per search (each trial id once, final re-measures left out): the count every report gives."""
    return {k: count(rows) for k, rows in _search_rows(df).items()}


def _speed(r: Mapping[str, Any]) -> float | None:
    return artifact.float_or_none(r.get("tflops"))


def pick(rows: list[dict]) -> dict | None:
    """One search's winning row, or None when no row is ok: among the final re-measures if any, else the trials."""
    # A row without knobs (a trial cut off before its config was recorded) names no config to ship, whatever it timed.
    ok = [r for r in rows if r.get("status") == "ok" and _speed(r) is not None and row_config(r)]
    finals = [r for r in ok if is_final(r.get("trial_id"))]
    pool = finals or ok
    if not pool:
        return None
    return min(pool, key=lambda r: (-_speed(r), artifact.float_or_none(r.get("latency_ms")) or math.inf,
                                    _str(r.get("trial_id"))))


def described(best: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A winning row as `{"config", "tflops", "latency_ms", "trial_id"}` (what MLflow's parent run and summary.json
    record), or None."""
    if best is None:
        return None
    return {"config": row_config(best), "tflops": _speed(best),
            "latency_ms": artifact.float_or_none(best.get("latency_ms")), "trial_id": _str(best.get("trial_id"))}


def winners(df) -> dict[SearchKey, dict]:
    """Each search's winning row (searches without an ok row left out)."""
    out = {}
    for k, rows in _search_rows(df).items():
        best = pick(rows)
        if best is not None:
            out[k] = best
    return out


def best_baselines(df) -> dict[SearchKey, tuple[float, str]]:
    """The fastest ok baseline of each search: (TFLOP/s, impl)."""
    _need_columns(df)
    out: dict[SearchKey, tuple[float, str]] = {}
    for r in df[(df["kind"] == "baseline") & (df["status"] == "ok")].to_dict("records"):
        t = _speed(r)
        k = (_str(r["accelerator_type"]), _str(r["problem_key"]))
        if t is not None and (k not in out or t > out[k][0]):
            out[k] = (t, _str(r.get("impl")))
    return out


def _entry(key: SearchKey, best: dict, n_trials: int, base: tuple[float, str] | None) -> dict[str, Any]:
    """A search's artifact entry; its config judged by the one validation for its problem (a paged problem's by
    the paged kernel's rules, its GQA group included), so an entry no runtime could use is never written."""
    accel, pkey = key
    problem = Problem.from_key(pkey)
    config = row_config(best)
    validation.check(config, head_dim=problem.head_dim, vendor=_str(best.get("vendor")) or None,
                     dtype=problem.dtype, group=problem.gqa_group)
    entry: dict[str, Any] = {"accelerator_type": accel}
    entry.update({p: _str(best.get(p)) for p in artifact.ENTRY_PROVENANCE})
    entry.update({
        "problem_key": pkey,
        "problem": problem.to_dict(),
        "config": config,
        "tflops": _speed(best),
        "latency_ms": artifact.float_or_none(best.get("latency_ms")),
        "baseline_tflops": base[0] if base else None,
        "baseline_impl": base[1] if base else None,
        "n_trials": n_trials,
        "trial_id": _str(best.get("trial_id")),
        "sweep_id": _str(best.get("sweep_id")),
    })
    return entry


def build_artifact(df, *, provenance: Mapping[str, Any] | None = None, created: str | None = None) -> dict[str, Any]:
    """The best-configs artifact (checksum included) of a results frame (`results.read_trials`): one entry per
    search that has an ok row, its winner's config and `n_trials` its real trials; baseline rows (kind "baseline",
    status "ok") of the same search give `baseline_tflops`. `provenance` overrides the top-level summary."""
    counts = trial_counts(df)
    bases = best_baselines(df)
    entries = [_entry(k, best, counts[k], bases.get(k)) for k, best in winners(df).items()]
    return artifact.assemble(entries, provenance=provenance, created=created)
