"""`raytune-attn report`: what a sweep found, as terminal tables and PNG plots.

Built on `raytune_attn.tune.results` (the one reader of the results, `best_so_far`) and
`raytune_attn.tune.winners` (the one winner and trial count): no second reader, no second pick.

- `summarize(df)`: one row per (accelerator type, problem): best config, tuned TFLOP/s, each baseline's TFLOP/s,
  the best baseline, the speed-up over it, trial counts by status, search time, searchers.
- `render_text(df)`: a block per problem (tuned per searcher against every baseline) and an overall table.
- `plot_vs_baselines(df, path)`: tuned against baselines per problem (grouped bars, speed-up annotated).
- `plot_convergence_by_searcher(df, path)`: best TFLOP/s so far against trials, one panel per problem,
  one line per searcher.
- `report(path, ...)`: all of the above; PNGs are written beside the results (`<stem>_vs_baselines.png`,
  `<stem>_convergence.png`) unless another folder is given.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytune_attn.artifact import tflops_text
from raytune_attn.config import KNOBS
from raytune_attn.tune import results, winners

# Knob names shortened for the tables and plot labels (and `space compile`'s table): one for every knob of KNOBS.
KNOB_LABELS = {"BLOCK_M": "M", "BLOCK_N": "N", "num_warps": "w", "num_stages": "s", "PRE_LOAD_V": "preV",
               "SPLIT_MASK": "split", "USE_TMA": "tma", "waves_per_eu": "wpe", "matrix_instr_nonkdim": "mfma",
               "kpack": "kpack", "WARP_SPECIALIZE": "ws", "PERSISTENT": "pers", "REVERSE_M": "rev", "maxnreg": "nreg",
               "ONE_Q_BUFFER": "1q", "NUM_SEGMENTS": "seg", "LPT_GROUP": "lpt", "BAND_LAUNCH": "band"}


def _f(v: Any) -> float:
    return float("nan") if winners.isnull(v) else float(v)


def config_str(cfg: dict[str, Any], short: bool = False) -> str:
    """`BLOCK_M=128 BLOCK_N=64 ...`, or the short `M128 N64 w8 s3 preV` form, which leaves out booleans that are off
    and knobs at 0 (no register cap, no LPT grouping, the compiler's default): what a config sets, not what it
    leaves."""
    parts = []
    for k in KNOBS:
        if k not in cfg:
            continue
        v = cfg[k]
        if short:
            label = KNOB_LABELS.get(k, k)
            parts.append(label if v is True else None if v is False or v == 0 else f"{label}{v}")
        else:
            parts.append(f"{k}={v}")
    return " ".join(p for p in parts if p) or "-"


def _problem_label(key: str) -> str:
    """A shorter label for plots: drops the `dense-` prefix and the dtype."""
    parts = key.split("-")
    if parts and parts[0] == "dense":
        parts = parts[1:]
    if parts and parts[-1] in ("float16", "bfloat16", "float32"):
        parts = parts[:-1]
    return "-".join(parts)


def _groups(df):
    """(accelerator_type, problem_key) groups in a stable order."""
    d = df.assign(accelerator_type=df["accelerator_type"].fillna("?"))
    return d.groupby(["accelerator_type", "problem_key"], sort=True, dropna=False)


def _search_time(trials) -> float:
    """Seconds from the sweep's start to the search's last trial (its `wall_time_s`: the searches of a sweep run side
    by side, so this is when the search was done, not its own length), else the span of its timestamps."""
    wt = trials["wall_time_s"].astype("float64")
    if len(wt) and wt.notna().any():
        return float(wt.max())
    ts = trials["timestamp"].dropna()
    if len(ts) > 1:
        return float((ts.max() - ts.min()).total_seconds())
    return float("nan")


@dataclass
class ProblemSummary:
    accelerator_type: str
    problem_key: str
    best_tflops: float
    best_latency_ms: float
    best_config: dict[str, Any]
    best_searcher: str
    baselines: dict[str, float]  # impl -> TFLOP/s (NaN when it failed)
    best_baseline_impl: str
    best_baseline_tflops: float
    speedup: float
    n_trials: int
    status_counts: dict[str, int]
    search_s: float
    searchers: dict[str, dict[str, Any]] = field(default_factory=dict)  # searcher -> best/n/time

    def to_dict(self) -> dict[str, Any]:
        def clean(v):
            if isinstance(v, float) and math.isnan(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            return v

        return {k: clean(v) for k, v in self.__dict__.items()}


def _real(trials):
    """Trial rows that are trials of the search (final re-measures left out)."""
    return trials[~trials["trial_id"].map(winners.is_final).astype(bool)]


def _best(rows) -> tuple[float, float, dict[str, Any], str]:
    """(TFLOP/s, latency, config, searcher) of the winner of `rows` as `winners.pick` names it; NaNs when none."""
    best = winners.pick(rows.to_dict("records"))
    if best is None:
        return float("nan"), float("nan"), {}, ""
    return _f(best["tflops"]), _f(best["latency_ms"]), results.row_config(best), str(best["searcher"] or "")


def summarize(df) -> list[ProblemSummary]:
    """One `ProblemSummary` per (accelerator type, problem) in `df` (a `results.read_trials` frame): the winner and
    trial count of `raytune_attn.tune.winners`, as in the sweep's summary.json and best_configs.json."""
    out = []
    for (accel, key), g in _groups(df):
        all_trials = g[g["kind"] == "trial"]
        trials = _real(all_trials)
        base = g[g["kind"] == "baseline"]
        best_tf, best_lat, best_cfg, best_searcher = _best(all_trials)
        baselines: dict[str, float] = {}
        for impl, b in base.groupby("impl", sort=True):
            tf = b[b["status"] == "ok"]["tflops"].astype("float64")
            baselines[str(impl)] = float(tf.max()) if tf.notna().any() else float("nan")
        valid = {k: v for k, v in baselines.items() if not math.isnan(v)}
        bb_impl = max(valid, key=valid.get) if valid else ""
        bb = valid.get(bb_impl, float("nan"))
        speedup = best_tf / bb if bb and not math.isnan(bb) and not math.isnan(best_tf) else float("nan")
        counts = {s: int((trials["status"] == s).sum()) for s in results.STATUSES if (trials["status"] == s).any()}
        per_searcher = {}
        for name, t in all_trials.groupby(all_trials["searcher"].fillna("?"), sort=True):
            per_searcher[str(name)] = {
                "best_tflops": _best(t)[0],
                "n_trials": winners.count(t.to_dict("records")),
                "search_s": _search_time(_real(t)),
            }
        out.append(ProblemSummary(
            accelerator_type=str(accel), problem_key=str(key), best_tflops=best_tf, best_latency_ms=best_lat,
            best_config=best_cfg, best_searcher=best_searcher, baselines=baselines, best_baseline_impl=bb_impl,
            best_baseline_tflops=bb, speedup=speedup, n_trials=winners.count(all_trials.to_dict("records")),
            status_counts=counts, search_s=_search_time(trials), searchers=per_searcher,
        ))
    return out


# ---------------------------------------------------------------------------------------------------- text


def _missing(v: Any) -> bool:
    """None or NaN (of any float type); a value that is no number at all is not missing."""
    try:
        return v is None or math.isnan(v)
    except TypeError:
        return False


def _num(v: float, fmt: str = "{:.1f}") -> str:
    return "-" if _missing(v) else fmt.format(v)


def _tflops(v: float) -> str:
    return "-" if _missing(v) else tflops_text(v)


def _speed(v: float) -> str:
    return _num(v, "{:.2f}x")


def _secs(v: float) -> str:
    if _missing(v):
        return "-"
    return f"{v:.0f} s" if v < 120 else f"{v / 60:.1f} min"


def _table(header: list[str], rows: list[list[str]], right: set[int] | None = None, indent: str = "") -> str:
    right = right or set()
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]

    def line(cells):
        return indent + "  ".join(
            (str(c).rjust(w) if i in right else str(c).ljust(w))
            for i, (c, w) in enumerate(zip(cells, widths, strict=False))
        ).rstrip()

    sep = indent + "  ".join("-" * w for w in widths)
    return "\n".join([line(header), sep, *[line(r) for r in rows]])


def render_text(summaries: list[ProblemSummary]) -> str:
    """A block per problem (tuned per searcher against every baseline), then one table of all problems."""
    if not summaries:
        return "no trials or baselines in these results"
    blocks = []
    for s in summaries:
        counts = ", ".join(f"{n} {k}" for k, n in s.status_counts.items()) or "none"
        title = f"{s.problem_key}  [{s.accelerator_type}]"
        lines = [title, "=" * len(title),
                 f"best config  {config_str(s.best_config)}" + (f"  ({s.best_searcher})" if s.best_searcher else ""),
                 f"trials      {s.n_trials} ({counts}) in {_secs(s.search_s)}", ""]
        rows = []
        for name, st in s.searchers.items():
            rows.append([f"tuned ({name})", _tflops(st["best_tflops"]),
                         _speed(st["best_tflops"] / s.best_baseline_tflops if s.best_baseline_tflops else math.nan),
                         str(st["n_trials"]), _secs(st["search_s"])])
        for impl, tf in s.baselines.items():
            rows.append([impl, _tflops(tf) if not math.isnan(tf) else "failed",
                         _speed(tf / s.best_baseline_tflops if s.best_baseline_tflops else math.nan), "", ""])
        vs = f"vs {s.best_baseline_impl}" if s.best_baseline_impl else "vs baseline"
        lines.append(_table(["impl", "TFLOP/s", vs, "trials", "time"], rows, right={1, 2, 3, 4}, indent="  "))
        blocks.append("\n".join(lines))
    rows = [[s.accelerator_type, s.problem_key, _tflops(s.best_tflops), s.best_baseline_impl or "-",
             _tflops(s.best_baseline_tflops), _speed(s.speedup), str(s.n_trials), _secs(s.search_s),
             config_str(s.best_config, short=True)] for s in summaries]
    overall = _table(["accel", "problem", "tuned TFLOP/s", "best baseline", "TFLOP/s", "speed-up", "trials", "time",
                      "best config"], rows, right={2, 4, 5, 6, 7})
    return "\n\n".join(blocks + ["Summary", overall])


def render_markdown(summaries: list[ProblemSummary]) -> str:
    """The overall table as GitHub markdown (for READMEs and PR descriptions)."""
    head = ["accelerator", "problem", "tuned TFLOP/s", "best baseline", "baseline TFLOP/s", "speed-up", "trials",
            "time", "best config"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summaries:
        base = f"{s.best_baseline_impl}" if s.best_baseline_impl else "-"
        lines.append("| " + " | ".join([
            s.accelerator_type, f"`{s.problem_key}`", _tflops(s.best_tflops), base, _tflops(s.best_baseline_tflops),
            _speed(s.speedup), str(s.n_trials), _secs(s.search_s), f"`{config_str(s.best_config)}`",
        ]) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------- plots


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_vs_baselines(summaries: list[ProblemSummary], path: str | os.PathLike, title: str = "") -> Path:
    """Grouped horizontal bars per problem: tuned (best over searchers) and each baseline, speed-up annotated."""
    import numpy as np

    plt = _plt()
    impls = sorted({i for s in summaries for i in s.baselines})
    series = ["tuned"] + impls
    n = max(len(summaries), 1)
    fig, ax = plt.subplots(figsize=(10, 1.0 + n * (0.35 + 0.22 * len(series))), constrained_layout=True)
    height = 0.8 / len(series)
    palette = ["tab:blue", "tab:green", "tab:purple", "tab:orange", "tab:gray", "tab:brown", "tab:olive"]
    ys = np.arange(len(summaries))[::-1]
    for j, name in enumerate(series):
        vals = [s.best_tflops if name == "tuned" else s.baselines.get(name, np.nan) for s in summaries]
        offs = ys + 0.4 - height * (j + 0.5)
        color = "tab:red" if name == "tuned" else palette[(j - 1) % len(palette)]
        ax.barh(offs, np.nan_to_num(vals, nan=0.0), height=height * 0.9, label=name, color=color,
                alpha=1.0 if name == "tuned" else 0.75)
        for y, v in zip(offs, vals, strict=False):
            if v != v:  # failed or not measured for this problem
                ax.text(0, y, " failed / n/a", va="center", fontsize=7, color=color)
    xmax = max([v for s in summaries for v in [s.best_tflops, *s.baselines.values()] if not math.isnan(v)] or [1.0])
    for y, s in zip(ys, summaries, strict=False):
        if not math.isnan(s.speedup):
            ax.text(s.best_tflops + xmax * 0.01, y + 0.4 - height * 0.5, f"{s.speedup:.2f}x vs {s.best_baseline_impl}",
                    va="center", fontsize=8, fontweight="bold")
    ax.set_yticks(ys, [f"{_problem_label(s.problem_key)}\n[{s.accelerator_type}]" for s in summaries], fontsize=8)
    ax.set_xlim(0, xmax * 1.25)
    ax.set_xlabel("TFLOP/s (higher is better)")
    ax.set_title(title or "tuned kernel against baselines, per problem")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_convergence_by_searcher(df, path: str | os.PathLike, title: str = "") -> Path:
    """Best TFLOP/s so far against trials: a panel per (accelerator, problem), a line per searcher; the best
    baseline as a dashed line."""
    plt = _plt()
    df = df[(df["kind"] != "trial") | ~df["trial_id"].map(winners.is_final).astype(bool)]  # trials, not re-measures
    trials = df[df["kind"] == "trial"]
    keys = [k for k, g in _groups(df) if (g["kind"] == "trial").any()]
    n = max(len(keys), 1)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.4 * rows), squeeze=False, constrained_layout=True)
    searchers = sorted(trials["searcher"].fillna("?").unique())
    colors = {s: plt.get_cmap("tab10")(i) for i, s in enumerate(searchers)}
    acc = df["accelerator_type"].fillna("?")
    for ax, (accel, key) in zip(axes.flat, keys, strict=False):
        g = df[(acc == accel) & (df["problem_key"] == key)]
        t = g[g["kind"] == "trial"]
        for name in searchers:
            ts = t[t["searcher"].fillna("?") == name]
            if not len(ts):
                continue
            b = results.best_so_far(ts)
            ax.step(b["trial_index"], b["best_tflops"], where="post", label=name, color=colors[name])
            ax.scatter(b["trial_index"], b["tflops"], s=8, alpha=0.35, color=colors[name])
        base = g[(g["kind"] == "baseline") & (g["status"] == "ok")]["tflops"].astype("float64")
        if base.notna().any():
            bi = g.loc[base.idxmax(), "impl"]
            ax.axhline(float(base.max()), ls="--", color="grey", lw=1, label=f"{bi}")
        ax.set_title(f"{_problem_label(key)} [{accel}]", fontsize=9)
        ax.set_xlabel("trial")
        ax.set_ylabel("best TFLOP/s so far")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    if not keys:
        axes.flat[0].text(0.5, 0.5, "no trials", ha="center", va="center")
    fig.suptitle(title or "convergence per searcher")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------------- report


@dataclass
class Report:
    summaries: list[ProblemSummary]
    text: str
    plots: list[Path]


def plot_paths(results_path: str | os.PathLike, plots_dir: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """Where the PNGs go: beside the results file (or dataset folder), named after it."""
    p = Path(results_path).resolve()  # "." names its folder, not "" (which made "_vs_baselines.png" one level up)
    stem = p.stem if p.is_file() or p.suffix == ".parquet" else p.name
    d = Path(plots_dir) if plots_dir is not None else p.parent
    return d / f"{stem}_vs_baselines.png", d / f"{stem}_convergence.png"


def _check_plots_dir(d: Path, given: bool) -> None:
    """ValueError unless the PNGs can go in folder `d`: said before any result is read, not by the first PNG. A
    `--plots-dir` (`given`) is made if missing; the results' own folder is not (a missing one is the results'
    error)."""
    what = "--plots-dir" if given else "the plots (beside the results)"
    if given:
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"{what}: cannot make {d} ({e.strerror or e}); --no-plots prints the tables "
                             "only") from None
    if d.is_dir() and not os.access(d, os.W_OK):
        raise ValueError(f"{what}: {d} is not writable; pass --plots-dir, or --no-plots for the tables only")


def report(
    results_path: str | os.PathLike,
    *,
    plots: bool = True,
    plots_dir: str | os.PathLike | None = None,
    accelerator_type: str | None = None,
    problem: str | None = None,
    fmt: str = "table",
) -> Report:
    """Read the results, summarize them and write the plots. `fmt`: table, markdown or json."""
    if fmt not in ("table", "markdown", "json"):
        raise ValueError(f"--format must be table, markdown or json, got {fmt!r}")
    if plots:
        _check_plots_dir(plot_paths(results_path, plots_dir)[0].parent, given=plots_dir is not None)
        if importlib.util.find_spec("matplotlib") is None:  # the plots extra: not part of the tune extra
            raise ValueError("the plots need matplotlib: pip install 'raytune-attn[plots]', or pass --no-plots for "
                             "the tables only")
    df = results.read_trials(results_path)
    if not len(df):
        raise ValueError(f"{results_path}: no result rows")
    if accelerator_type:
        df = results.of_type(df, accelerator_type, results_path)
    if problem:
        keys = df["problem_key"].fillna("")
        matches = keys.str.contains(problem, regex=False)
        if not matches.any():
            raise ValueError(f"--problem {problem}: in none of the {keys.nunique()} problem keys of {results_path}"
                             + (f" of type {accelerator_type}" if accelerator_type else ""))
        df = df[matches]
    summaries = summarize(df)
    if fmt == "json":
        text = json.dumps([s.to_dict() for s in summaries], indent=2, sort_keys=True)
    elif fmt == "markdown":
        text = render_markdown(summaries)
    else:
        text = render_text(summaries)
    written: list[Path] = []
    if plots:
        vs_path, conv_path = plot_paths(results_path, plots_dir)
        name = Path(results_path).resolve().name
        written.append(plot_vs_baselines(summaries, vs_path, title=f"{name}: tuned against baselines"))
        written.append(plot_convergence_by_searcher(df, conv_path, title=f"{name}: convergence per searcher"))
    return Report(summaries, text, written)
