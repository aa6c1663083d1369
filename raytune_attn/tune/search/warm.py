"""Earlier results as a prior for a new search: any results table (a sweep's trials.parquet or directory, an
exhaustive landscape) of other shapes, another GPU or another Triton.

Speeds of different problems and GPUs are not comparable, but their order is: each group of the table (one problem
on one GPU: `problem_key` and `gpu` where the table has them) is scaled by its own best, so a config's relative
speed is 1 where it won its group. A config's prior score is the geometric mean of its relative speeds over the
groups that measured it, each weighted by its problem's likeness to the search's (`group_weight`: the search's own
shape, where the table has it, all but decides); a config that failed in every group that measured it has no score
(None). A trial ASHA stopped counts with its last rung's value, as its searcher was told it. A kernel knob the table
does not record ran at its default (the kernel fills a config's missing knobs from `config.default_config`), so a
config comes with that value; other knobs the table lacks stay open (`in_space`).

Two ways a searcher uses them (`raytune-attn replay --warm-start`, `raytune-attn tune --warm-start`): the GP takes
every scored config as an observation of its model (gp.py: shifted to this search's scale once a config is
measured both here and there), and any searcher can start from the best few (`initial`, base.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from raytune_attn.config import KNOBS, default_config
from raytune_attn.tune.results import told_status
from raytune_attn.tune.search.landscape import read_table

GROUP_COLUMNS = ("problem_key", "gpu")  # what tells one group of comparable speeds from another
WARM_AS = ("model", "design")  # how searchers use earlier results: see `warm_options`
WARM_DESIGN = 6  # configs of earlier results a searcher starts from (the GP's own design is 6 with priors)
SIMILARITY = 0.25  # distance between two problems (group_weight) at which a group's weight is exp(-1/2)


class WarmStartError(ValueError):
    """A warm-start table that cannot serve: unreadable, no knob or objective column, no successful row."""


def read_results(source: str | Path | pd.DataFrame) -> pd.DataFrame:
    """A results table: a Parquet file, a sweep's directory (raytune_attn.tune.results' one reader) or a frame, its
    rows numbered 0 .. n-1 (a table concatenated from several runs' frames repeats their row labels)."""
    if isinstance(source, pd.DataFrame):
        return source.reset_index(drop=True)
    p = Path(source)
    if not p.exists():
        raise WarmStartError(f"--warm-start {p}: no such file or directory")
    try:
        from raytune_attn.tune import results

        df = results.read_trials(p) if p.is_dir() else results.read_frame(p)
    except Exception as e:  # noqa: BLE001 - whatever the reader raises, the user needs the file named
        raise WarmStartError(f"--warm-start {p}: not a readable results table ({type(e).__name__}: {e})") from None
    if df.empty:
        what = "holds no results (no trials.parquet, no trials/ partitions)" if p.is_dir() else "has no rows"
        raise WarmStartError(f"--warm-start {p}: {what}")
    return df.reset_index(drop=True)


def prior_scores(source: str | Path | pd.DataFrame, knobs: Sequence[str], *, objective: str = "tflops",
                 mode: str = "max", problem: Any = None) -> list[tuple[dict[str, Any], float | None]]:
    """(config over the `knobs` the table has, relative score in (0, 1] or None) per distinct config, best
    first. `mode` "min": the objective is a time (lower is better) and the relative score is best / value.
    `problem` (a Problem or a mapping of some of its fields): the search's problem; each group's weight in the
    geometric mean falls with its problem's distance from it (`group_weight`). None: every group alike."""
    df = read_table(read_results(source))  # Ray Tune's `config/` column prefixes stripped, as for a landscape
    table = "the warm-start table" if isinstance(source, pd.DataFrame) else f"--warm-start {source}:"
    if "kind" in df.columns:  # a sweep's table: its trials and final re-measures, not the SDPA baselines
        df = df[df["kind"].astype(str) != "baseline"]
    if not any(k in df.columns and df[k].notna().any() for k in knobs):
        raise WarmStartError(f"{table} has none of the knob columns {sorted(knobs)}")
    df = ran_with(df, knobs)
    # A column no row records (a sweep's schema holds every knob; an NVIDIA sweep leaves the AMD ones empty) says
    # nothing about its knob: left open, as a column the table lacks.
    have = [k for k in knobs if k in df.columns and df[k].notna().any()]
    if objective not in df.columns:
        raise WarmStartError(f"{table} has no {objective!r} column")
    y = pd.to_numeric(df[objective], errors="coerce").astype(float)
    ok = np.isfinite(y) & (y > 0)
    if "status" in df.columns:  # a trial ASHA stopped scores its last rung's value, as its searcher was told it
        ok &= df["status"].map(told_status) == "ok"
    if not ok.any():
        raise WarmStartError(f"{table} has no successful row")
    frame = df[have].copy()
    frame = frame[frame.notna().all(axis=1)]
    if frame.empty:  # every row leaves some knob without a default empty (an AMD compiler option, say)
        raise WarmStartError(f"{table} has no row that records all of {have}")
    groups = [c for c in GROUP_COLUMNS if c in df.columns]
    # An empty cell (a row without its GPU's id) joins as "", not as a missing value the join cannot take.
    keys = (df.loc[frame.index, groups].astype(object).fillna("").astype(str).agg("|".join, axis=1) if groups
            else pd.Series("", frame.index))
    val = y.where(ok).loc[frame.index]
    best = val.groupby(keys).transform("max" if mode == "max" else "min")
    frame["__rel"] = (val / best) if mode == "max" else (best / val)
    frame["__key"] = keys
    log_weight = _group_log_weights(df.loc[frame.index], keys, problem)
    out = []
    for cfg, g in frame.groupby(have, sort=True, dropna=False):
        cfg = cfg if isinstance(cfg, tuple) else (cfg,)
        # One value per group (the median of its rows), then the weighted geometric mean over the groups that
        # measured it. The weights relative to this config's nearest group: the weights of groups far from the
        # search (16 against 4096 tokens) underflow to 0 when taken alone.
        per_group = g.groupby("__key")["__rel"].median().dropna()
        lw = per_group.index.map(log_weight).to_numpy(dtype=float)
        w = np.exp(lw - lw.max()) if len(lw) else lw
        score = float(np.exp(np.average(np.log(per_group), weights=w))) if len(per_group) else None
        out.append(({k: _native(v) for k, v in zip(have, cfg, strict=True)}, score))
    out.sort(key=lambda kv: -1.0 if kv[1] is None else kv[1], reverse=True)
    return out


def group_weight(group: Mapping[str, Any], problem: Mapping[str, Any]) -> float:
    """exp(-d^2 / (2 SIMILARITY^2)) for the distance d between a group's problem and the search's: a unit for a
    head dim, a mask or a dtype that differs, and one per factor of 2 between sequence lengths (log2). Fields
    unknown on either side add nothing. Kernel speeds are shaped by these (tile fit, the diagonal's share, the
    key loop's length); the GPU is not a term: a table of another GPU is what a warm start is for."""
    return math.exp(group_log_weight(group, problem))


def group_log_weight(group: Mapping[str, Any], problem: Mapping[str, Any]) -> float:
    """log of `group_weight`, finite where the weight itself underflows to 0."""
    d2 = 0.0
    for name in ("head_dim", "causal", "dtype"):
        if group.get(name) is not None and problem.get(name) is not None and group[name] != problem[name]:
            d2 += 1.0
    for name in ("seqlen_q", "seqlen_k"):
        if group.get(name) and problem.get(name):
            d2 += math.log2(group[name] / problem[name]) ** 2
    return -d2 / (2 * SIMILARITY**2)


def _group_log_weights(df: pd.DataFrame, keys: pd.Series, problem: Any) -> dict[str, float]:
    """Each group's log weight (`group_log_weight`) from its problem key; 0 for every group without a problem or a
    key."""
    if problem is None or "problem_key" not in df.columns:
        return dict.fromkeys(keys.unique(), 0.0)
    from raytune_attn.problem import Problem
    from raytune_attn.tune.search.priors import problem_fields

    target = problem_fields(problem)
    out = {}
    for key, pk in zip(keys, df["problem_key"].astype(str), strict=True):
        if key not in out:
            try:
                out[key] = group_log_weight(dataclasses.asdict(Problem.from_key(pk)), target)
            except ValueError:  # not a problem key this version reads: a group like any other
                out[key] = 0.0
    return out


def ran_with(df: pd.DataFrame, knobs: Sequence[str]) -> pd.DataFrame:
    """`df` with the value each row ran with for every kernel knob of `knobs` it does not record (no column, or an
    empty cell: a sweep's rows hold only their space's knobs): the kernel's default for the row's head dim (128
    where the table has none). A table that never varied a knob (an older space, a smaller one) measured its
    default, not every value this space lists. Knobs without a default in `default_config` (the AMD compiler's
    options, left to the compiler) are not filled."""
    missing = [k for k in knobs if k in KNOBS and k in default_config()
               and (k not in df.columns or df[k].isna().any())]
    if not missing:
        return df
    dims = pd.to_numeric(df["head_dim"], errors="coerce") if "head_dim" in df.columns else pd.Series(128, df.index)
    dims = dims.fillna(128).astype(int)
    defaults = {int(d): default_config(int(d)) for d in dims.unique()}
    ran = {k: pd.Series([defaults[d][k] for d in dims], index=df.index) for k in missing}
    return df.assign(**{k: ran[k] if k not in df.columns else df[k].where(df[k].notna(), ran[k]) for k in missing})


def in_space(scores: Sequence[tuple[Mapping[str, Any], float | None]],
             candidates: Sequence[Mapping[str, Any]]) -> list[tuple[int, float | None]]:
    """(candidate index, score) for every candidate whose knobs match a scored config on the knobs it records: a
    knob the table does not record (and `ran_with` could not fill: not a kernel knob) can take any value here, and
    each value carries the config's score."""
    if not scores or not candidates:
        return []
    have = list(scores[0][0])
    cand = pd.DataFrame([{k: c[k] for k in have} for c in candidates])
    cand["__i"] = np.arange(len(candidates))
    prior = pd.DataFrame([{**c, "__s": s} for c, s in scores])
    try:
        merged = cand.merge(prior, on=have, how="inner")
    except (ValueError, TypeError):  # a knob whose values have another type there (e.g. ints as strings)
        return []
    return [(int(i), None if pd.isna(s) else float(s)) for i, s in zip(merged["__i"], merged["__s"], strict=True)]


def best_configs(scores: Sequence[tuple[Mapping[str, Any], float | None]], n: int) -> list[dict[str, Any]]:
    """The `n` configs of `prior_scores` with the highest scores (failed ones never)."""
    return [dict(c) for c, s in scores if s is not None][:n]


def check_warm_as(warm_as: str) -> None:
    """ValueError naming the flag for a `warm_as` that is not one of WARM_AS."""
    if warm_as not in WARM_AS:
        raise ValueError(f"--warm-as takes {' or '.join(WARM_AS)}, got {warm_as!r}")


def warm_options(name: str, scores: Sequence[tuple[Mapping[str, Any], float | None]], warm_as: str = "model") -> dict:
    """Searcher `name`'s constructor options for earlier results (`prior_scores`): with `warm_as` "model" the GP's
    model prior, else (and for every other searcher) the WARM_DESIGN best configs first."""
    if name == "gp" and warm_as == "model":
        return {"warm_start": list(scores)}
    return {"initial": best_configs(scores, WARM_DESIGN)}


def _native(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v
