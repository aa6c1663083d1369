"""Score sweeps' winners against exhaustive landscapes of the same GPU type: per problem key, the exhaustive
landscape's value of the config each sweep named (its final re-measure's best), over the landscape's best.

    python3 -m benchmarks.score_vs_exhaustive --landscape h200/run7/llama_exhaustive_x4_nosync.parquet \
        --landscape h200/run7/llama_exhaustive_b64_s16_spin.parquet \
        --sweep r9_1gpu=h200/run9/llama-1gpu_trials.parquet ... --out h200/run9/sweeps_vs_exhaustive.csv

A later --landscape replaces an earlier one's keys (a re-measure with better timing). Columns: run, problem_key,
sweep_best_tflops (the winner as the sweep measured it), winner_in_exhaustive (the winner's landscape value over the
landscape's best), best_measured_in_exhaustive (the best landscape value among every config the sweep tried: what a
perfect final re-measure would have named), trials_to_98 (the key's trials in the order they finished, the final
re-measure's left out, up to the first that tried a config within 2% of the landscape's best; empty when none did),
trials (the key's trials, the final re-measure's left out), exhaustive_best, exhaustive_configs. Prints keys within
2% per run, and per group of runs: a run named GROUP/NAME belongs to GROUP (`group_line`). `--ratio A:B` (repeatable)
prints group A's trials to 2% over group B's, with its 95% bootstrap interval over the sweeps (`ratio_line`).
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence

import pandas as pd

from benchmarks.bootstrap import figure, ratio_interval

KNOBS = ["BLOCK_M", "BLOCK_N", "PRE_LOAD_V", "num_warps", "num_stages"]


def _key(row) -> tuple:
    return tuple(int(row[k]) if k != "PRE_LOAD_V" else bool(row[k]) for k in KNOBS)


def load_landscapes(paths: list[str]) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    for path in paths:
        df = pd.read_parquet(path)
        for pk, g in df.groupby("problem_key"):
            ok = g[(g.status == "ok") & g.tflops.notna()]
            out[str(pk)] = {_key(r): float(r["tflops"]) for r in ok.to_dict("records")}
    return out


def trials_to(values: list[float], target: float) -> int | None:
    """1-based position of the first value >= target, None when there is none."""
    return next((i for i, v in enumerate(values, start=1) if v >= target), None)


def score(run: str, trials_path: str, lands: dict[str, dict[tuple, float]]) -> list[dict]:
    df = pd.read_parquet(trials_path)
    df = df[df.kind == "trial"].sort_values("timestamp", kind="stable")
    rows = []
    for pk, every in df.groupby("problem_key", sort=True):
        land = lands.get(str(pk))
        if not land:
            continue
        is_final = every.trial_id.astype(str).str.endswith("-final")
        g = every[every.tflops.notna()]
        final = g[is_final[g.index]]
        pick = final if len(final) else g
        winner = pick.loc[pick.tflops.idxmax()]
        best = max(land.values())
        tried = [land.get(_key(r), 0.0) for r in g.to_dict("records")]
        # Failed trials count as trials (a search spends them), with no configuration value.
        order = [land.get(_key(r), 0.0) if pd.notna(r["tflops"]) else 0.0
                 for r in every[~is_final].to_dict("records")]  # fmt: skip
        rows.append({"run": run, "problem_key": pk, "sweep_best_tflops": float(winner.tflops),
                     "winner_in_exhaustive": land.get(_key(winner), 0.0) / best,
                     "best_measured_in_exhaustive": max(tried) / best, "trials_to_98": trials_to(order, 0.98 * best),
                     "trials": len(order), "exhaustive_best": best, "exhaustive_configs": len(land)})
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--landscape", action="append", required=True)
    ap.add_argument("--sweep", action="append", required=True, help="RUN=trials.parquet")
    ap.add_argument("--out", required=True)
    ap.add_argument("--min-configs", type=int, default=250, help="skip keys whose landscape has fewer measured "
                    "configs (partial landscapes: their best may be missing)")
    ap.add_argument("--ratio", action="append", default=[], help="A:B, two groups of runs (GROUP/NAME): A's trials to "
                    "2%% over B's, with a bootstrap interval over their sweeps (repeatable)")
    args = ap.parse_args(argv)
    sweeps = [spec.partition("=") for spec in args.sweep]
    for spec, (_, _, path) in zip(args.sweep, sweeps, strict=True):
        if not path:
            ap.error(f"--sweep takes RUN=trials.parquet, got {spec!r}")
    groups = Counter(run.partition("/")[0] for run, _, _ in sweeps if "/" in run)
    for spec in args.ratio:
        pair = spec.split(":")
        if len(pair) != 2 or not set(pair) <= set(groups):
            ap.error(f"--ratio takes A:B, two groups of the --sweep runs ({', '.join(sorted(groups)) or 'none'}), "
                     f"got {spec!r}")
        if few := [g for g in pair if groups[g] < 2]:
            ap.error(f"--ratio {spec}: its interval draws each group's sweeps again, which needs at least 2 a group; "
                     + ", ".join(f"{g} has {groups[g]}" for g in few))
    lands = {k: v for k, v in load_landscapes(args.landscape).items() if len(v) >= args.min_configs}
    rows = []
    for run, _, path in sweeps:
        rows += score(run, path, lands)
    out = pd.DataFrame(rows)
    out.to_csv(args.out, index=False)
    for run, g in out.groupby("run", sort=False):
        print(summary_line(run, g))
    if out.run.str.contains("/").any():
        by_group = {group: g for group, g in out.groupby(out.run.str.partition("/")[0], sort=False)}
        for group, g in by_group.items():
            print(group_line(group, g))
        for a, b in (spec.split(":") for spec in args.ratio):
            print(ratio_line(a, by_group[a], b, by_group[b]))


def _own_trials(g: pd.DataFrame) -> str:
    """How many searches got within 2% in their own trials, and the latest trial one of them did it at."""
    own = g.trials_to_98.dropna()
    return f"{len(own)}, the last at trial {own.max():.0f}" if len(own) else "0"


def summary_line(run: str, g: pd.DataFrame) -> str:
    """One sweep's scores in a line: winners within 2%, keys whose own trials got within 2% (and the trial the last
    of them did), keys with a measured config within 2% counting the final re-measure's, the lowest winner."""
    return (f"{run}: {int((g.winner_in_exhaustive >= 0.98).sum())} of {len(g)} keys' winners within 2%; own trials "
            f"within 2% on {_own_trials(g)}; with the final re-measure's "
            f"{int((g.best_measured_in_exhaustive >= 0.98).sum())}; min {g.winner_in_exhaustive.min():.2f}")


def group_line(group: str, g: pd.DataFrame) -> str:
    """Several sweeps' scores in a line, counted as searches (a run's problem keys): winners within 2%, searches
    whose own trials got within 2% (and the latest trial one did), the trials to 2% as replay's bar (a) counts
    evaluations (`_trials_to_98`), the lowest winner and where it was."""
    low = g.loc[g.winner_in_exhaustive.idxmin()]
    n = g.run.nunique()
    return (f"{group} ({n} sweep{'s' if n > 1 else ''}, {len(g)} searches): winners within 2% in "
            f"{int((g.winner_in_exhaustive >= 0.98).sum())}; own trials within 2% in {_own_trials(g)}; "
            f"{_trials_to_98(g)}; lowest winner {low.winner_in_exhaustive:.3f} ({low.run}, {low.problem_key})")


def _trials_to_98(g: pd.DataFrame) -> str:
    """Per key the median over the runs of the trials to 2% (a search not there counted its trials + 1), geometric
    mean over the keys."""
    return f"trials to 2%, geometric mean over keys of the median: {_figure(g):.1f}"


def _figure(g: pd.DataFrame) -> float:
    return figure(_counted(g), problem=["problem_key"], value="trials_to")


def _counted(g: pd.DataFrame) -> pd.DataFrame:
    """The searches with `trials_to`: their trials to 2%, or their trials + 1 when they never got there."""
    return g.assign(trials_to=g.trials_to_98.fillna(g.trials + 1))


def ratio_line(a: str, ga: pd.DataFrame, b: str, gb: pd.DataFrame) -> str:
    """Group a's trials to 2% (`_trials_to_98`) over group b's, with the 95% interval of that ratio when each
    group's sweeps are drawn again with replacement (benchmarks.bootstrap; each sweep must score the same keys)."""
    lo, hi = ratio_interval(_counted(ga), _counted(gb), problem=["problem_key"], unit="run", value="trials_to")
    return (f"{a} / {b}, trials to 2%: {_figure(ga) / _figure(gb):.2f}x (95% interval over the sweeps "
            f"{lo:.2f}-{hi:.2f}x, {ga.run.nunique()} and {gb.run.nunique()} sweeps)")


if __name__ == "__main__":
    main()
