"""Tables of measured configs (recorded landscapes, a sweep's trials export) read as one value per config.

A table has one column per parameter and an objective column (`tflops` by default; null/NaN = failed config).
Parameter columns are those named by `params`; else the kernel-knob columns (`config.KNOBS`) when the table has
any; else every column except the objective and the well-known non-parameter columns in NON_PARAM_COLUMNS
(provenance and bookkeeping of a sweep's export and of Ray Tune's result frames). A `config/` prefix (Ray Tune's
result frames) is stripped from column names.
Rows with a `status` column other than "ok" count as failed, except a trial stopped early (ASHA's "stopped"), whose
value is its last rung's, as its searcher was told it (results.told_status). Duplicate configs (repeated trials)
are aggregated by the median of their successful measurements; a config with no success is failed.
A `compile_s` column, when present, gives each config's compile seconds: the largest of its rows (a repeated
config's first trial built it cold, later ones loaded it from the cache), failed configs included (their compile
was spent too). `cold_compile=True` takes that largest over the whole table, ignoring `select`: the cold build when
the selected problem shares its binaries with the table's other problems (a sweep of several keys builds each
config once, for whichever key comes first, and records cache loads of a few ms for the others).
The problem fields the table records one value of (`head_dim`, `seqlen_q`, `causal`, ...) are the landscape's
`problem`, and when it records one `arch`, its space takes the priors (priors.py) of the shipped space file of that
arch (search_spaces/*/<arch>.yaml): a replay starts where a sweep on that GPU would. The arch is kept (`arch`): a
replay may screen the candidates as a sweep on that GPU does (replay.sweep_screen).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from raytune_attn.config import KNOBS
from raytune_attn.tune.results import told_status
from raytune_attn.tune.search.priors import PROBLEM_FIELDS
from raytune_attn.tune.search.space import SearchSpace, priors_for_arch

NON_PARAM_COLUMNS = frozenset(
    {
        # outcome and error of a trial
        "status", "error", "reason", "error_type", "error_message", "valid", "max_abs_err", "rel_err",
        # timings and other metrics
        "tflops", "ms", "time_ms", "latency_ms", "median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "gbps",
        "compile_s", "bench_s", "shared_bytes", "n_regs", "n_spills",
        # the problem's fields
        "batch", "hq", "hkv", "seqlen_q", "seqlen_k", "head_dim", "causal", "varlen",
        # provenance
        "gpu", "gpu_name", "device", "vendor", "arch", "driver", "triton", "torch", "git_sha", "hostname",
        "problem", "problem_key", "accelerator_type", "trial_id", "timestamp", "date", "run_id", "sweep_id",
        "experiment", "searcher",
        "seed", "kernel", "dtype",
        # Ray Tune's result frame bookkeeping
        "training_iteration", "time_this_iter_s", "time_total_s", "done", "pid", "node_ip", "time_since_restore",
        "iterations_since_restore", "checkpoint_dir_name", "logdir", "should_checkpoint",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Landscape:
    """One value per config (NaN = failed), over a space built from the table's distinct parameter values."""

    space: SearchSpace
    values: dict[tuple, float]  # space.key(config) -> objective (NaN for failed)
    objective: str
    head_dim: int | None = None  # the problem's head dim, when the table records one
    compile_s: dict[tuple, float] = field(default_factory=dict)  # space.key(config) -> compile seconds, if recorded
    problem: dict = field(default_factory=dict)  # the problem fields the table records one value of
    arch: str | None = None  # the GPU architecture the table records, when it records one

    @property
    def best(self) -> float:
        ok = [v for v in self.values.values() if np.isfinite(v)]
        if not ok:
            raise ValueError(f"landscape has no successful config (objective {self.objective!r})")
        return max(ok)

    def value(self, config: Mapping) -> float:
        return self.values[self.space.key(config)]

    def compile_seconds(self, config: Mapping) -> float:
        """The config's recorded compile seconds; 0.0 when the table has none for it."""
        return self.compile_s.get(self.space.key(config), 0.0)


def _native(v):
    """numpy scalars -> Python ints/bools/floats, so configs compare and serialize like YAML-loaded ones."""
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer, int)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return int(v) if float(v).is_integer() else float(v)
    return v


def read_table(source: str | Path | pd.DataFrame, *, select: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Read a Parquet file or a sweep's directory (or take a frame), strip `config/` prefixes, keep rows matching
    `select` (col=value)."""
    if isinstance(source, pd.DataFrame):
        df = source.copy()
    else:
        p = Path(source)
        if not p.exists():
            raise FileNotFoundError(f"no such landscape file: {p}")
        from raytune_attn.tune.results import read_frame, read_trials

        df = read_trials(p) if p.is_dir() else read_frame(p)
    df.columns = [c[len("config/") :] if isinstance(c, str) and c.startswith("config/") else c for c in df.columns]
    for col, want in (select or {}).items():
        if col not in df.columns:
            raise ValueError(
                f"--select column {col!r} is not in the table (columns: {', '.join(map(str, df.columns))})"
            )
        df = df[df[col].astype(str) == str(want)]
    if df.empty:
        raise ValueError("the table has no rows" + (f" matching {dict(select)}" if select else ""))
    return df


def parameter_columns(df: pd.DataFrame, objective: str, params: Sequence[str] | None = None) -> list[str]:
    if objective not in df.columns:
        raise ValueError(f"objective column {objective!r} is not in the table (columns: {', '.join(df.columns)})")
    if params:
        missing = [p for p in params if p not in df.columns]
        if missing:
            raise ValueError(f"parameter column(s) {missing} not in the table (columns: {', '.join(df.columns)})")
        return list(params)
    # A sweep's table: the kernel's knobs are the parameters, whatever else it records. Its schema has a column for
    # every knob of every space; one empty in every row was not a knob of this search's space (it ran at its default).
    knobs = [c for c in df.columns if c in KNOBS and df[c].notna().any()]
    if knobs:
        return knobs
    cols = [c for c in df.columns if c != objective and c not in NON_PARAM_COLUMNS]
    if not cols:
        raise ValueError("the table has no parameter columns besides the objective and bookkeeping columns")
    return cols


def table_values(df: pd.DataFrame, params: Sequence[str], objective: str) -> dict[tuple, float]:
    """Median objective per distinct config (NaN when no row succeeded)."""
    y = pd.to_numeric(df[objective], errors="coerce").astype(float)
    if "status" in df.columns:
        y = y.where(df["status"].map(told_status) == "ok")
    y = y.where(np.isfinite(y) & (y > 0))
    frame = df[list(params)].copy()
    frame["__y"] = y.to_numpy()
    out = {}
    for key, group in frame.groupby(list(params), sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        out[tuple(_native(k) for k in key)] = float(group["__y"].median()) if group["__y"].notna().any() else np.nan
    return out


def _some(column: pd.Series, shown: int = 3) -> str:
    """A few of a column's distinct values, for an error that asks the user to pick one."""
    values = sorted(str(v) for v in column.dropna().unique())
    more = f", ... {len(values) - shown} more" if len(values) > shown else ""
    return ", ".join(values[:shown]) + more


def load_landscape(
    source: str | Path | pd.DataFrame,
    *,
    objective: str = "tflops",
    params: Sequence[str] | None = None,
    select: Mapping[str, str] | None = None,
    cold_compile: bool = False,
) -> Landscape:
    df = read_table(source, select=select)
    cols = parameter_columns(df, objective, params)
    for col in ("problem_key", "gpu"):
        if col in df.columns and col not in cols and df[col].nunique() > 1:
            raise ValueError(f"the table mixes {df[col].nunique()} values of {col!r} ({_some(df[col])}); pick one "
                             f"with --select {col}=VALUE")
    if df[cols].isna().any().any():
        bad = [c for c in cols if df[c].isna().any()]
        raise ValueError(f"parameter column(s) {bad} have missing values; name the parameters with --params")
    values = table_values(df, cols, objective)
    distinct = {c: sorted({k[i] for k in values}) for i, c in enumerate(cols)}
    name = str(source) if not isinstance(source, pd.DataFrame) else "<frame>"
    space = SearchSpace.from_values(distinct, allowed=values.keys(), source=name)
    arch = _single(df, "arch")
    priors = priors_for_arch(str(arch)) if arch is not None else None
    if priors is not None:
        space = space.with_priors(priors)
    problem = {f: _native(v) for f in PROBLEM_FIELDS if (v := _single(df, f)) is not None}
    head_dim = problem.get("head_dim")
    compile_s = {}
    if "compile_s" in df.columns:
        src = read_table(source) if cold_compile else df
        if all(c in src.columns for c in cols):
            secs = pd.to_numeric(src["compile_s"], errors="coerce").groupby([src[c] for c in cols]).max()
            for key, v in secs.items():
                key = tuple(_native(k) for k in (key if isinstance(key, tuple) else (key,)))
                if key in values and np.isfinite(v):
                    compile_s[key] = float(v)
    return Landscape(space, values, objective, head_dim, compile_s, problem, None if arch is None else str(arch))


def _single(df: pd.DataFrame, col: str):
    """The column's value when the table has exactly one, else None."""
    if col not in df.columns or df[col].nunique(dropna=False) != 1:
        return None
    v = df[col].iloc[0]
    return None if pd.isna(v) else v
