"""Trial results as Parquet: one row per trial (and per measured baseline) per sweep, in a versioned schema.

The schema is documented in docs/results-schema.md; `SCHEMA` below is its source of truth. A sweep builds rows on
the driver with `trial_row(...)` / `baseline_row(...)` and writes them with `write_trials(rows, out_dir)`, which
adds one file per sweep and accelerator type under a hive-partitioned dataset directory::

    out_dir/accelerator_type=H100/<sweep_id>-<uid>.parquet

so sweeps append without rewriting earlier files, and the directory reads back with `read_trials(out_dir)`,
`pandas.read_parquet(out_dir)`, `pyarrow.dataset.dataset(out_dir, partitioning="hive")` or duckdb's
`read_parquet('out_dir/**/*.parquet', hive_partitioning=true)`. Inside a partition the files carry no
`accelerator_type` column (the directory name holds it, as hive readers expect); a single-file export
(`write_file` / `append_trials("x.parquet", rows)`) keeps every column in the file.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from raytune_attn.config import KNOBS
from raytune_attn.problem import Problem

SCHEMA_VERSION = 1
SCHEMA_METADATA_KEY = b"raytune_attn.schema_version"
PARTITION_COLUMN = "accelerator_type"

STATUSES = ("ok", "invalid", "error", "stopped")  # trials; baselines use "ok" or "error"
# A trial in flight when its sweep's driver died; a resume ran its config again under another trial id. Readers
# leave these rows out unless asked (`read_table(..., interrupted=True)`).
INTERRUPTED = "interrupted"
KINDS = ("trial", "baseline")

PROBLEM_COLUMNS = ("batch", "hq", "hkv", "seqlen_q", "seqlen_k", "head_dim", "causal", "dtype", "varlen")
KNOB_COLUMNS = tuple(KNOBS)
METRIC_COLUMNS = ("latency_ms", "tflops", "compile_s", "bench_s", "wall_time_s")
PROVENANCE_COLUMNS = (
    "gpu", "vendor", "arch", "accelerator_type", "driver", "cuda_version", "rocm_version", "triton_version",
    "torch_version", "raytune_attn_version", "kernel_source_hash", "python_version", "hostname",
)


def _field(name: str, typ: pa.DataType, doc: str) -> pa.Field:
    return pa.field(name, typ, nullable=True, metadata={b"doc": doc.encode()})


def _knob_type(t: type) -> pa.DataType:
    return pa.bool_() if t is bool else pa.int32()


SCHEMA = pa.schema(
    [
        _field("schema_version", pa.int32(), "version of this schema (see docs/results-schema.md)"),
        _field("sweep_id", pa.string(), "unique id of the sweep run that produced the row"),
        _field("sweep_name", pa.string(), "sweep name (the MLflow experiment name)"),
        _field("trial_id", pa.string(), "Ray Tune trial id (baselines: baseline-<impl>)"),
        _field("kind", pa.string(), "trial | baseline"),
        _field("impl", pa.string(), "triton for trials; the SDPA backend for baselines (sdpa_flash, ...)"),
        _field("problem_key", pa.string(), "Problem.key, e.g. dense-b4-hq16-hkv16-sq4096-sk4096-d128-causal-bfloat16"),
        *[_field(c, pa.int32(), f"problem {c}") for c in PROBLEM_COLUMNS[:6]],
        _field("causal", pa.bool_(), "problem causal mask"),
        _field("dtype", pa.string(), "problem dtype: float16 | bfloat16 | float32"),
        _field("varlen", pa.bool_(), "packed variable-length problem"),
        *[_field(k, _knob_type(t), f"config knob {k} (null: not set / baseline)") for k, t in KNOBS.items()],
        _field("status", pa.string(), "ok | invalid | error | stopped (early, by ASHA: its last rung's metrics) | "
                                      "interrupted (in flight when a driver died: marked by a resume)"),
        _field("reason", pa.string(), "why a trial is invalid, errored or was stopped"),
        _field("rung", pa.int32(), "last rung (benchmark budget level) the trial reached; null if none"),
        _field("latency_ms", pa.float64(), "median kernel latency at the last rung reached (ms)"),
        _field("tflops", pa.float64(), "throughput at the last rung reached (TFLOP/s)"),
        _field("compile_s", pa.float64(), "Triton compile time (s)"),
        _field("bench_s", pa.float64(), "benchmarking time (s)"),
        _field("wall_time_s", pa.float64(), "seconds from the sweep's start to the trial's end"),
        _field("timestamp", pa.timestamp("us", tz="UTC"), "when the trial ended (UTC)"),
        _field("searcher", pa.string(), "search algorithm name"),
        _field("seed", pa.int64(), "searcher seed"),
        *[_field(c, pa.string(), f"provenance: {c}") for c in PROVENANCE_COLUMNS],
        _field("extra", pa.string(), "JSON object of any other fields the producer passed"),
    ],
    metadata={SCHEMA_METADATA_KEY: str(SCHEMA_VERSION).encode()},
)
COLUMNS = tuple(SCHEMA.names)
_META_FIELDS = ("sweep_id", "sweep_name", "trial_id", "searcher", "seed")


class ResultsError(ValueError):
    """A results file that cannot be read: wrong schema, newer version, not Parquet."""


# ---------------------------------------------------------------------------------------------------- rows


def _problem(problem: Problem | str | Mapping[str, Any]) -> Problem:
    if isinstance(problem, Problem):
        return problem
    if isinstance(problem, str):
        return Problem.from_key(problem)
    return Problem.from_dict(dict(problem))


def _clean_float(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) else f


def _base_row(problem, provenance: Mapping[str, Any] | None, meta: Mapping[str, Any]) -> tuple[dict, dict]:
    p = _problem(problem)
    row: dict[str, Any] = {c: None for c in COLUMNS}
    row["schema_version"] = SCHEMA_VERSION
    row["problem_key"] = p.key
    row.update(p.to_dict())
    prov = dict(provenance or {})
    for c in PROVENANCE_COLUMNS:
        row[c] = str(prov[c]) if prov.get(c) is not None else None
    extra = {}
    for k, v in meta.items():
        if k in _META_FIELDS:
            row[k] = v
        else:
            extra[k] = v
    return row, extra


def _apply_metrics(row: dict, extra: dict, metrics: Mapping[str, Any]) -> None:
    for k, v in metrics.items():
        if k in METRIC_COLUMNS:
            row[k] = _clean_float(v)
        elif k in ("status", "reason"):
            row[k] = None if v is None else str(v)
        elif k == "rung":
            row[k] = None if v is None else int(v)
        elif k == "timestamp":
            row[k] = _timestamp(v)
        elif k in _META_FIELDS:
            row[k] = v
        else:
            extra[k] = v


def _timestamp(v: Any) -> _dt.datetime | None:
    if v is None:
        return None
    if isinstance(v, _dt.datetime):
        return v if v.tzinfo else v.replace(tzinfo=_dt.timezone.utc)
    if isinstance(v, (int, float)):
        return _dt.datetime.fromtimestamp(float(v), tz=_dt.timezone.utc)
    return _timestamp(_dt.datetime.fromisoformat(str(v)))


def _finish(row: dict, extra: dict) -> dict:
    if row["status"] is None:
        row["status"] = "ok" if row["tflops"] is not None else "error"
    if row["timestamp"] is None:
        row["timestamp"] = _dt.datetime.now(_dt.timezone.utc)
    row["extra"] = json.dumps(extra, sort_keys=True, default=str) if extra else None
    return row


def trial_row(
    problem: Problem | str | Mapping[str, Any],
    config: Mapping[str, Any],
    metrics: Mapping[str, Any],
    provenance: Mapping[str, Any] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    """One Parquet row for one trial.

    - `config`: the knob values the trial ran (unknown keys go to `extra`);
    - `metrics`: status, reason, rung, latency_ms, tflops, compile_s, bench_s, wall_time_s, timestamp (epoch
      seconds, datetime or ISO string); other keys go to `extra`;
    - `provenance`: `provenance.collect()` of the worker that measured it;
    - `meta`: sweep_id, sweep_name, trial_id, searcher, seed (other keys go to `extra`).
    """
    row, extra = _base_row(problem, provenance, meta)
    row["kind"] = "trial"
    row["impl"] = "triton"
    for k, v in config.items():
        if k in KNOBS:
            row[k] = None if v is None else (bool(v) if KNOBS[k] is bool else int(v))
        else:
            extra[f"config.{k}"] = v
    _apply_metrics(row, extra, metrics)
    if row["status"] is not None and row["status"] not in (*STATUSES, INTERRUPTED):
        raise ValueError(f"trial status {row['status']!r} must be one of {(*STATUSES, INTERRUPTED)}")
    return _finish(row, extra)


def baseline_row(
    problem: Problem | str | Mapping[str, Any],
    impl: str,
    metrics: Mapping[str, Any],
    provenance: Mapping[str, Any] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    """One Parquet row for a baseline measured in the same sweep (`impl` e.g. "sdpa_flash", "sdpa_efficient")."""
    row, extra = _base_row(problem, provenance, meta)
    row["kind"] = "baseline"
    row["impl"] = impl
    row["trial_id"] = row["trial_id"] or f"baseline-{impl}"
    _apply_metrics(row, extra, metrics)
    return _finish(row, extra)


# ---------------------------------------------------------------------------------------------------- tables


def to_table(rows: Iterable[Mapping[str, Any]] | Any) -> pa.Table:
    """Rows (dicts from `trial_row`/`baseline_row`) or a DataFrame from `read_trials` as a table in `SCHEMA`."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
        df = rows
        missing = [c for c in COLUMNS if c not in df.columns]
        rows = df.astype(object).where(df.notna(), None).to_dict("records")
        for r in rows:
            for c in missing:
                r[c] = None
    rows = list(rows)
    unknown = sorted({k for r in rows for k in r} - set(COLUMNS))
    if unknown:
        raise ValueError(f"row field(s) {unknown} are not in results schema v{SCHEMA_VERSION}; use `extra`")
    cols = {}
    for f in SCHEMA:
        vals = [r.get(f.name) for r in rows]
        if f.type == pa.timestamp("us", tz="UTC"):
            vals = [_timestamp(v) if not _isnull(v) else None for v in vals]
        else:
            vals = [None if _isnull(v) else v for v in vals]
        cols[f.name] = pa.array(vals, type=f.type)
    return pa.table(cols, schema=SCHEMA)


def _isnull(v: Any) -> bool:
    if v is None:
        return True
    try:
        return bool(v != v)  # NaN, pandas NA raises in bool() -> handled below
    except TypeError:
        return True


def write_file(rows: Iterable[Mapping[str, Any]] | Any, path: str | os.PathLike) -> Path:
    """Write rows (or a DataFrame) to one self-contained Parquet file (all columns), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    pq.write_table(to_table(rows), tmp)
    os.replace(tmp, path)
    return path


def _partition_value(v: Any) -> str:
    s = str(v) if v not in (None, "") else "unknown"
    return re.sub(r"[^A-Za-z0-9._+-]", "_", s)


def write_trials(rows: Iterable[Mapping[str, Any]], out_dir: str | os.PathLike) -> list[Path]:
    """Append rows to the hive-partitioned dataset `out_dir` (one new file per accelerator type); returns them."""
    rows = list(rows)
    if not rows:
        return []
    out_dir = Path(out_dir)
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(_partition_value(r.get(PARTITION_COLUMN)), []).append(r)
    written = []
    for accel, group in sorted(groups.items()):
        table = to_table(group).drop_columns([PARTITION_COLUMN])
        sweep = _partition_value(group[0].get("sweep_id") or "trials")
        part = out_dir / f"{PARTITION_COLUMN}={accel}"
        part.mkdir(parents=True, exist_ok=True)
        dest = part / f"{sweep}-{uuid.uuid4().hex[:12]}.parquet"
        tmp = part / f".{dest.name}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, dest)
        written.append(dest)
    return written


def append_trials(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]]) -> list[Path]:
    """Append rows: to a single `*.parquet` file (read, concatenate, rewrite atomically) or to a dataset dir."""
    path = Path(path)
    rows = list(rows)
    if path.suffix == ".parquet" and not path.is_dir():
        if path.exists():
            old = to_table(read_trials(path))
            table = pa.concat_tables([old, to_table(rows)])
        else:
            table = to_table(rows)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        return [path]
    return write_trials(rows, path)


# Columns added to schema v1 after its first files were written (nullable, so no version bump; the doc lists them):
# a v1 file from before lacks them and reads them as null. Every other column is required of a v1 file: a knob
# column missing from a file would read as "not set" and export the runtime's default as if it had been measured.
# A version bump adds its own entry here, from the columns as that version first wrote them.
LATER_IN_V1 = ("WARP_SPECIALIZE", "PERSISTENT", "REVERSE_M", "maxnreg", "ONE_Q_BUFFER", "NUM_SEGMENTS", "LPT_GROUP",
               "BAND_LAUNCH")
# accelerator_type is not required either: a partition's file holds it in its directory's name, and a file copied
# out of one (or rewritten by pandas from it) reads with it null, as before this check.
REQUIRED_COLUMNS = {1: tuple(c for c in COLUMNS if c not in LATER_IN_V1 and c != PARTITION_COLUMN)}
MEASURED_STATUSES = ("ok", "stopped")  # rows whose tflops/latency_ms were measured (stopped: at its last rung)


def _version_of(raw: Any, source: Path) -> int:
    """A schema version as written (metadata bytes, a column's int, float or string); ResultsError unless it is a
    whole number of a version this reader knows of or could be told to upgrade for."""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    try:
        f = float(text)
    except ValueError:
        f = math.nan
    if not (math.isfinite(f) and f.is_integer() and f >= 1):
        raise ResultsError(f"{source}: schema_version {text!r} is not a schema version number (1, 2, ...)")
    return int(f)


def _file_version(table: pa.Table, source: Path) -> int | None:
    """The file's schema version: its Parquet metadata's, else the newest in its schema_version column; None for a
    file without rows or metadata (a pandas rewrite of an empty frame), which has nothing to misread."""
    raw = (table.schema.metadata or {}).get(SCHEMA_METADATA_KEY)
    if raw is None and "schema_version" not in table.column_names:
        raise ResultsError(f"{source}: not a raytune-attn results file (no schema_version)")
    if raw is not None:
        return _version_of(raw, source)
    values = [v for v in table.column("schema_version").unique().to_pylist() if not _isnull(v)]
    if not values:
        if table.num_rows:
            raise ResultsError(f"{source}: schema_version is null in every row and absent from the file's metadata")
        return None
    return max(_version_of(v, source) for v in values)


def _check_columns(table: pa.Table, source: Path, version: int) -> None:
    """ResultsError naming the columns the file's schema version requires and the file lacks."""
    missing = [c for c in REQUIRED_COLUMNS[version] if c not in table.column_names]
    if missing:
        raise ResultsError(f"{source}: column(s) {', '.join(missing)} missing, required by results schema v{version}")


def _conform(table: pa.Table, source: Path, partition_value: str | None) -> pa.Table:
    version = _file_version(table, source)
    if version is not None and version > SCHEMA_VERSION:
        raise ResultsError(
            f"{source}: results schema v{version} is newer than this raytune-attn reads (v{SCHEMA_VERSION}); upgrade"
        )
    if version is not None:
        _check_columns(table, source, version)
    n = table.num_rows
    cols = []
    for f in SCHEMA:
        if f.name in table.column_names:
            col = table.column(f.name)
            if col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise ResultsError(f"{source}: column {f.name} has type {col.type}, expected {f.type}") from e
        elif f.name == PARTITION_COLUMN and partition_value is not None:
            col = pa.array([partition_value] * n, type=f.type)
        else:
            col = pa.nulls(n, type=f.type)
        cols.append(col)
    out = pa.Table.from_arrays(cols, schema=SCHEMA)
    _check_problem_keys(out, source)
    _check_measures(out, source)
    return out


def _rows_named(table: pa.Table, mask, limit: int = 3) -> str:
    """The first rows where `mask` holds, as "row 3 (trial 4911de31)", for an error message."""
    import pyarrow.compute as pc

    idx = pc.indices_nonzero(pc.fill_null(mask, False)).to_pylist()
    ids = table.column("trial_id").take(pa.array(idx[:limit], type=pa.int64())).to_pylist()
    named = [f"row {i} (trial {t})" for i, t in zip(idx, ids, strict=False)]
    return ", ".join(named) + (f" and {len(idx) - limit} more" if len(idx) > limit else "")


def _check_problem_keys(table: pa.Table, source: Path) -> None:
    """ResultsError naming the file and rows of a missing or unparsable problem_key: the artifact's problem and
    the config's validation come from the key."""
    import pyarrow.compute as pc

    keys = table.column("problem_key")
    if keys.null_count:
        raise ResultsError(f"{source}: problem_key is null in {_rows_named(table, pc.is_null(keys))}")
    for key in keys.unique().to_pylist():
        try:
            Problem.from_key(key)
        except (ValueError, TypeError, KeyError) as e:
            raise ResultsError(f"{source}: bad problem_key {key!r} in {_rows_named(table, pc.equal(keys, key))}: {e}") \
                from None


def _check_measures(table: pa.Table, source: Path) -> None:
    """ResultsError naming the file, column and rows where a measured row (status ok or stopped) holds a tflops or
    latency_ms that is not finite and positive: it would be exported or searched on as if measured. Null or NaN is
    no measurement (the winner picker passes over it); a failed trial's values are not read, so not checked."""
    import pyarrow.compute as pc

    measured = pc.is_in(table.column("status"), value_set=pa.array(MEASURED_STATUSES))
    for c in ("tflops", "latency_ms"):
        v = table.column(c)
        bad = pc.and_(measured, pc.or_(pc.is_inf(v), pc.less_equal(v, 0)))
        if pc.any(pc.fill_null(bad, False)).as_py():
            values = sorted({x for x in v.filter(pc.fill_null(bad, False)).to_pylist()})[:3]
            raise ResultsError(f"{source}: column {c} must be finite and positive where status is ok or stopped; "
                               f"it is {', '.join(map(repr, values))} in {_rows_named(table, bad)}")


def _files(path: Path) -> list[Path]:
    """The Parquet files to read: the file itself, or every visible file under the directory."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*.parquet")
                      if not any(x.startswith(".") for x in p.relative_to(path).parts))
    if not path.exists():
        raise FileNotFoundError(f"no results at {path}")
    return [path]


def _partition_of(f: Path) -> str | None:
    for part in f.parts[::-1]:
        if part.startswith(f"{PARTITION_COLUMN}="):
            return part.split("=", 1)[1]
    return None


# What makes two rows the same row: a sweep writes each finished trial into its partitions (trials/) as it ends,
# then every row (with re-measures and baselines) into its trials.parquet and removes trials/; a directory holds both
# where a driver stopped between the two, or where partitions of other sweeps were copied beside a file.
_ROW_KEY = ("sweep_id", "kind", "impl", "problem_key", PARTITION_COLUMN, "trial_id")


def _dedupe(tables: list[pa.Table], tiers: list[int]) -> pa.Table:
    """Each row once: rows with the same `_ROW_KEY` are one row, the one from the lowest tier (a whole-sweep file
    before its partitions), then the latest timestamp; rows without a trial id are all kept. Order: first seen."""
    table = pa.concat_tables(tables)
    tier = [t for t, tab in zip(tiers, tables, strict=True) for _ in range(tab.num_rows)]
    keys = zip(*(table.column(c).to_pylist() for c in _ROW_KEY), strict=True)
    stamps = [ts.timestamp() if ts is not None else -math.inf for ts in table.column("timestamp").to_pylist()]
    best: dict[tuple, int] = {}
    first: dict[tuple, int] = {}
    keep = []
    for i, key in enumerate(keys):
        if key[-1] is None:
            keep.append(i)
            continue
        key = (*key[:4], _partition_value(key[4]), key[5])  # the partition directory's spelling of the type
        first.setdefault(key, i)
        j = best.get(key)
        if j is None or (tier[i], -stamps[i]) < (tier[j], -stamps[j]):
            best[key] = i
    order = sorted(keep + list(first.values()))
    pick = {first[k]: i for k, i in best.items()}
    return table.take(pa.array([pick.get(i, i) for i in order], type=pa.int64()))


def read_table(path: str | os.PathLike, *, interrupted: bool = False) -> pa.Table:
    """Every row under `path` once, conformed to the current `SCHEMA`. `path` is a results file, a partitioned
    dataset directory, or a sweep's directory (its trials.parquet and the trials/ partitions written as trials
    ended): a row found in several files is read from a file outside the partitions if there is one. Trials marked
    `INTERRUPTED` are left out unless `interrupted`."""
    path = Path(path)
    tables, tiers = [], []
    for f in _files(path):
        try:
            t = pq.read_table(f, partitioning=None)
        except (pa.ArrowInvalid, OSError) as e:
            raise ResultsError(f"{f}: not a readable Parquet file ({e}){_json_hint(f)}") from e
        part = _partition_of(f)
        tables.append(_conform(t, f, part))
        tiers.append(0 if part is None else 1)
    if not tables:
        return SCHEMA.empty_table()
    table = _dedupe(tables, tiers)
    if interrupted:
        return table
    import pyarrow.compute as pc

    return table.filter(pc.fill_null(pc.not_equal(table.column("status"), INTERRUPTED), True))


def read_frame(path: str | os.PathLike):
    """A Parquet file as a pandas DataFrame, as written (not conformed to SCHEMA): a recorded landscape, another
    tool's table. FileNotFoundError or ResultsError naming the file where it is missing or not readable Parquet
    (whether the reader's own message names it depends on the pandas version)."""
    import pandas as pd

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file: {p}")
    if p.is_dir():
        raise IsADirectoryError(f"{p} is a directory, not a Parquet file")
    try:
        return pd.read_parquet(p)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise ResultsError(f"{p}: not a readable Parquet file ({type(e).__name__}: {e}){_json_hint(p)}") from e


def _json_hint(path: Path) -> str:
    """What to give instead when `path` is JSON: a best-configs artifact holds the winners only."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64).lstrip()
    except OSError:
        return ""
    if not head.startswith(b"{"):
        return ""
    return ("; this is a JSON file (a best-configs artifact holds only the winners): give the sweep's "
            "trials.parquet or its output directory")


_PANDAS_TYPES = None


def read_trials(path: str | os.PathLike, *, interrupted: bool = False):
    """Every row under `path` once (see `read_table`; interrupted trials only if `interrupted`) as a pandas DataFrame
    (nullable Int32/boolean dtypes for knobs and problem fields)."""
    import pandas as pd

    global _PANDAS_TYPES
    if _PANDAS_TYPES is None:
        _PANDAS_TYPES = {pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
    return read_table(path, interrupted=interrupted).to_pandas(types_mapper=_PANDAS_TYPES.get)


# ---------------------------------------------------------------------------------------------------- views


def of_type(df, accelerator_type: str, source: str | os.PathLike):
    """The rows of `df` (read from `source`) of one accelerator type; ValueError naming the types it has when it
    has none of that one (`--accelerator-type` of export and report)."""
    types = sorted(df["accelerator_type"].dropna().astype(str).unique()) if "accelerator_type" in df.columns else []
    if accelerator_type not in types:
        raise ValueError(f"--accelerator-type {accelerator_type}: {source} has no rows of it "
                         f"(its types: {', '.join(types) or 'none'})")
    return df[df["accelerator_type"] == accelerator_type]


def told_status(status: Any) -> str:
    """The status a searcher was told for a row of `status`: a trial stopped early (ASHA) reported "ok" at its last
    rung, and its searcher took that rung's value."""
    status = str(status)
    return "ok" if status == "stopped" else status


def row_config(row: Mapping[str, Any]) -> dict[str, Any]:
    """The knob values of a row (nulls left out), as plain Python ints and bools."""
    out = {}
    for k, t in KNOBS.items():
        v = row.get(k)
        if not _isnull(v):
            out[k] = bool(v) if t is bool else int(v)
    return out


def landscape(df, problem_key: str | None = None) -> list[dict[str, Any]]:
    """Trials as `{"problem_key", "config", "tflops", "status", "rung"}` dicts (tflops None unless status ok), in
    trial order: the landscape a search replay reads. `problem_key` selects one problem."""
    t = df[df["kind"] == "trial"]
    if problem_key is not None:
        t = t[t["problem_key"] == problem_key]
    out = []
    for r in t.to_dict("records"):
        ok = r["status"] == "ok" and not _isnull(r["tflops"])
        out.append({
            "problem_key": r["problem_key"],
            "config": row_config(r),
            "tflops": float(r["tflops"]) if ok else None,
            "status": r["status"],
            "rung": None if _isnull(r["rung"]) else int(r["rung"]),
        })
    return out


def best_so_far(df):
    """Trials of one search in end order with columns trial_index (1-based), wall_time_s, tflops, best_tflops."""
    import numpy as np

    t = df[df["kind"] == "trial"].copy()
    order = [c for c in ("timestamp", "wall_time_s") if c in t.columns]
    if order:
        t = t.sort_values(order, kind="stable", na_position="last")
    tf = np.where(t["status"].to_numpy() == "ok", t["tflops"].astype("float64").to_numpy(), np.nan)
    best = np.fmax.accumulate(np.nan_to_num(tf, nan=-np.inf)) if len(tf) else tf
    best = np.where(np.isneginf(best), np.nan, best)
    return t.assign(
        trial_index=np.arange(1, len(t) + 1), tflops=tf, best_tflops=best
    )[["trial_index", "trial_id", "wall_time_s", "tflops", "best_tflops"]].reset_index(drop=True)


def plot_convergence(df, path: str | os.PathLike, title: str = "") -> Path:
    """PNG of best-so-far TFLOP/s against trials and against wall time, one line per problem key."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    trials = df[df["kind"] == "trial"]
    for key in sorted(trials["problem_key"].dropna().unique()):
        b = best_so_far(trials[trials["problem_key"] == key])
        ax1.step(b["trial_index"], b["best_tflops"], where="post", label=key)
        ax1.scatter(b["trial_index"], b["tflops"], s=8, alpha=0.4)
        ax2.step(b["wall_time_s"].astype("float64"), b["best_tflops"], where="post", label=key)
    ax1.set(xlabel="trial", ylabel="best TFLOP/s so far", title="against trials")
    ax2.set(xlabel="wall time (s)", ylabel="best TFLOP/s so far", title="against wall time")
    if len(trials):
        ax1.legend(fontsize=7, loc="lower right")
    if title:
        fig.suptitle(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
