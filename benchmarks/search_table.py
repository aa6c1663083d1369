"""The searchers compared by replay on the recorded landscapes: one table, printed and written into docs/search.md.

For each landscape (a recorded table and one problem key of it) and each searcher (the GP with the space file's
priors, the GP without them, Optuna's TPE, random search), with and without run-to-run noise: the median and the
worst evaluations to reach 98% of the true best over the seeds (budget + 1 = not reached), and how many seeds got
within 2% by the budget. The last rows: the geometric mean of the medians over the landscapes, and the GP without
priors over TPE. Then warm starts across GPUs (WARM_PAIRS): an H100 landscape started from the H200's recorded
results of the same shape among others, and the reverse, cold and warm, GP and TPE. Deterministic for given options
(every searcher is seeded, and so is the noise), also with `--jobs N` (N landscapes measured at once).

    python -m benchmarks.search_table --seeds 10 --write docs/search.md

`--write` replaces the text between the markers BEGIN and END in that file (appends them when absent); with
`--section NAME` the markers name the section, so one file holds several tables (the held-out landscapes of
tests/data/heldout/ in docs/benchmarks/search/heldout.md, kept apart from the ones the searchers were developed on).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from benchmarks.landscape_spec import split_spec
from benchmarks.replay_table import geomean, runs_cell, summary_cell
from raytune_attn.tune.search.landscape import load_landscape
from raytune_attn.tune.search.replay import replay

DATA = Path(__file__).parents[1] / "tests" / "data"
# The landscapes the searchers were developed on: the first problem key of each (--keys-per-file 1).
DEVELOPED_ON = sorted(DATA.glob("landscape_h100_*.parquet")) + sorted((DATA / "h200").glob("*.parquet"))
BEGIN, END = "<!-- search_table: begin -->", "<!-- search_table: end -->"
# (column, searcher, options): the GP's `priors` option is what `replay --no-priors` switches off.
VARIANTS = (("gp", "gp", {}), ("gp no priors", "gp", {"priors": False}), ("tpe", "tpe", {}),
            ("random", "random", {}))  # fmt: skip


def landscapes(paths: Sequence[Path | str], keys_per_file: int) -> list[tuple[Path, str | None]]:
    """(file, problem key) pairs: the first `keys_per_file` keys of each file in sorted order (0 = all); a path
    written FILE::KEY gives that key of the file alone."""
    out = []
    for spec in paths:
        p, key = split_spec(spec)
        if key:
            out.append((p, key))
            continue
        has_keys = "problem_key" in pq.read_schema(p).names  # the one column read: tables hold thousands of rows
        keys = sorted(pd.read_parquet(p, columns=["problem_key"]).problem_key.unique()) if has_keys else [None]
        out += [(p, k) for k in (keys[:keys_per_file] if keys_per_file else keys)]
    return out


def load_cell(path: Path, key: str | None):
    """The landscape of one (file, problem key) pair of `landscapes`: the whole file when `key` is None."""
    return load_landscape(path, select={"problem_key": key} if key else {})


def remeasure_clash(files: Sequence[Path]) -> str | None:
    """What makes `files` unusable together as --remeasured, or None: a missing or unreadable file, or two files
    re-measuring the same problem of the same table (each run has its own clock and scale; their rounds mixed would
    give medians of neither)."""
    seen: dict[tuple[str, str], Path] = {}
    for f in files:
        if not f.is_file():
            return f"--remeasured {f}: no such file"
        try:
            pairs = pd.read_parquet(f, columns=["landscape", "problem_key"]).drop_duplicates()
        except Exception as e:  # pyarrow raises several types for a file that is not a re-measure
            return f"--remeasured {f}: not a re-measure table with landscape and problem_key columns ({e})"
        for pair in pairs.itertuples(index=False, name=None):
            if pair in seen:
                return f"--remeasured {seen[pair]} and {f} both re-measure {pair[0]} {pair[1]}: give one of them"
            seen[pair] = f
    return None


def measure(path: Path, key: str | None, *, seeds: int, budget: int, noise: float, seed_start: int = 0,
            remeasured: Sequence[Path] = (), screen: bool = False) -> dict[str, list]:  # fmt: skip
    """Column -> [median, worst, seeds within 2% by the budget] of evaluations to 98%, over seeds `seed_start` ..
    `seed_start + seeds - 1`. `remeasured`: re-measures of tables' best configs (benchmarks.landscape_remeasure)
    whose medians replace their recorded values where one of them has this landscape; `screen`: the candidates a
    sweep would screen (replay.sweep_screen)."""
    land = load_cell(path, key)
    if remeasured and key:
        from benchmarks.landscape_remeasure import refined

        land = refined(land, pd.concat([pd.read_parquet(f) for f in remeasured]), path=path, key=key)
    out = {}
    for col, name, opts in VARIANTS:
        s = replay(land, [name], budget=budget, seeds=seeds, seed_start=seed_start, noise=noise,
                   options={name: opts}, screen=screen)[name]  # fmt: skip
        e = s["evals_to_98"]
        out[col] = [e["median"], e["max"], s["reached_98"]]
    return out


# Warm starts across GPUs: (target table, its problem key or None, the earlier results it starts from).
WARM_PAIRS = (("landscape_h100_d128_causal_s4096.parquet", None, "h200/w16_landscape.parquet"),
              ("landscape_h100_d64_full_s1024.parquet", None, "h200/short_full_landscape.parquet"),
              ("h200/w16_landscape.parquet", "dense-b4-hq16-hkv16-sq4096-sk4096-d128-causal-bfloat16",
               "landscape_h100_d128_causal_s4096.parquet"),
              ("h200/short_full_landscape.parquet", "dense-b16-hq32-hkv32-sq1024-sk1024-d64-full-bfloat16",
               "landscape_h100_d64_full_s1024.parquet"),
              # The H200's and the H100's tables of the same four shapes and space (the H100's recorded later).
              ("h200/short_full_landscape.parquet", "dense-b16-hq32-hkv32-sq1024-sk1024-d64-full-bfloat16",
               "heldout/h100_short_full.parquet"),
              ("heldout/h100_short_full.parquet", "dense-b16-hq32-hkv32-sq1024-sk1024-d64-full-bfloat16",
               "h200/short_full_landscape.parquet"),
              ("h200/short_full_landscape.parquet", "dense-b16-hq16-hkv16-sq1024-sk1024-d128-full-bfloat16",
               "heldout/h100_short_full.parquet"),
              ("heldout/h100_short_full.parquet", "dense-b16-hq16-hkv16-sq1024-sk1024-d128-full-bfloat16",
               "h200/short_full_landscape.parquet"))  # fmt: skip
# (column, searcher, options, warm as): every GP here runs without the space files' priors.
WARM_VARIANTS = (("gp cold", "gp", {"priors": False}, None), ("gp warm (model)", "gp", {"priors": False}, "model"),
                 ("gp warm (design)", "gp", {"priors": False}, "design"), ("tpe cold", "tpe", {}, None),
                 ("tpe warm (design)", "tpe", {}, "design"))  # fmt: skip


def measure_warm(target: Path, key: str | None, source: Path, *, seeds: int, budget: int, seed_start: int = 0,
                 noise: float = 0.0) -> dict[str, list]:  # fmt: skip
    """Column -> [median, worst, seeds within 2% by the budget] of evaluations to 98%, warm-started or cold."""
    from raytune_attn.tune.search.warm import prior_scores

    land = load_cell(target, key)
    warm = prior_scores(source, land.space.names, problem=land.problem or None)
    out = {}
    for col, name, opts, warm_as in WARM_VARIANTS:
        s = replay(land, [name], budget=budget, seeds=seeds, seed_start=seed_start, options={name: opts},
                   noise=noise, warm=warm if warm_as else None, warm_as=warm_as or "model")[name]
        out[col] = [s["evals_to_98"]["median"], s["evals_to_98"]["max"], s["reached_98"]]
    return out


def warm_table(rows: list[tuple[str, str, dict]], seeds: int) -> str:
    cols = [c for c, *_ in WARM_VARIANTS]
    lines = ["| target | earlier results | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for target, source, res in rows:
        lines.append(f"| {target} | {source} | " + " | ".join(runs_cell(res[c], seeds) for c in cols) + " |")
    if rows:
        lines.append(f"| geometric mean, every seed within 2% on (of {len(rows)}) | | "
                     + " | ".join(summary_cell([r[c] for _, _, r in rows], seeds) for c in cols) + " |")  # fmt: skip
    return "\n".join(lines)


def table(rows: list[tuple[str, float, dict]], seeds: int) -> str:
    cols = [c for c, _, _ in VARIANTS]
    lines = ["| landscape | noise | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for name, noise, res in rows:
        lines.append(f"| {name} | {noise:.0%} | " + " | ".join(runs_cell(res[c], seeds) for c in cols) + " |")
    for noise in sorted({n for _, n, _ in rows}):
        sel = [r for _, n, r in rows if n == noise]
        lines.append(f"| geometric mean, every seed within 2% on (of {len(sel)}) | {noise:.0%} | "
                     + " | ".join(summary_cell([r[c] for r in sel], seeds) for c in cols) + " |")  # fmt: skip
        ratio = geomean([r["gp no priors"][0] for r in sel]) / geomean([r["tpe"][0] for r in sel])
        lines.append(f"| gp no priors / tpe | {noise:.0%} | | {ratio:.2f}x | | |")
    return "\n".join(lines)


def write(doc: Path, text: str, section: str | None = None) -> None:
    begin, end = (BEGIN, END) if section is None else (m.replace(":", f" {section}:") for m in (BEGIN, END))
    old = doc.read_text()
    block = f"{begin}\n{text}\n{end}"
    if begin in old and end in old:
        new = old[: old.index(begin)] + block + old[old.index(end) + len(end) :]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    doc.write_text(new)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--landscape", action="append", type=Path,
                    help="Recorded tables, FILE or FILE::PROBLEM_KEY (default: tests/data/landscape_h100_*.parquet "
                    "and tests/data/h200/*).")
    ap.add_argument("--keys-per-file", type=int, default=1, help="Problem keys per file (sorted; 0 = all).")
    ap.add_argument("--seeds", type=int, default=10, help="Seeds per landscape and searcher (a count).")
    ap.add_argument("--seed-start", type=int, default=0,
                    help="The first seed (a held-out check: --seed-start 5 --seeds 5 runs seeds 5-9).")  # fmt: skip
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--noise", type=float, action="append", help="Noise levels (default 0 and 0.02).")
    ap.add_argument("--write", type=Path, help="Put the table into this Markdown file between the markers.")
    ap.add_argument("--section", help="With --write: the markers of this named section instead of the default ones.")
    ap.add_argument("--jobs", type=int, default=1, help="Landscapes measured in parallel processes.")
    ap.add_argument("--screen", action="store_true", help="The main table on the candidates a sweep on each table's "
                    "GPU would try (replay.sweep_screen).")
    ap.add_argument("--no-warm", dest="warm", action="store_false", help="Leave out the warm-start table.")
    ap.add_argument("--warm-from", type=Path, help="Only a warm-start table: each landscape started from this "
                    "results table (instead of the main table and WARM_PAIRS), at one --noise level (default 0).")
    ap.add_argument("--remeasured", type=Path, action="append", default=[], help="A re-measure of tables' best "
                    "configs (benchmarks.landscape_remeasure --out): its medians replace their recorded values where "
                    "it has them (repeatable; no two files may re-measure the same problem of the same table).")
    a = ap.parse_args(argv)
    paths = a.landscape or DEVELOPED_ON
    if a.seeds < 1 or a.budget < 1:
        ap.error("--seeds and --budget must be at least 1")
    if a.jobs < 1:
        ap.error("--jobs must be at least 1")
    if a.seed_start < 0:
        ap.error("--seed-start must be at least 0")
    if a.section and not a.write:
        ap.error("--section names where --write puts the table: give --write FILE with it")
    if problem := remeasure_clash(a.remeasured):
        ap.error(problem)
    if a.warm_from and not a.warm_from.is_file():
        ap.error(f"--warm-from {a.warm_from}: no such file")
    if a.warm_from and (len(a.noise or []) > 1 or not a.warm):
        ap.error("--warm-from measures one warm table: at most one --noise, and not with --no-warm")
    t0 = time.time()
    cells = [(path, key, noise) for path, key in landscapes(paths, a.keys_per_file) for noise in a.noise or [0.0, 0.02]]
    warm_noise = a.noise[0] if a.warm_from and a.noise else 0.0
    warm_pairs = [(DATA / t, k, DATA / s) for t, k, s in WARM_PAIRS] if a.warm else []
    if a.warm_from:  # one warm row per landscape, at one noise level: no main table
        warm_pairs, cells = [(path, key, a.warm_from) for path, key in landscapes(paths, a.keys_per_file)], []
    with ProcessPoolExecutor(a.jobs) as ex:  # every cell is seeded: the same table for any --jobs
        futures = [ex.submit(measure, path, key, seeds=a.seeds, budget=a.budget, noise=noise, seed_start=a.seed_start,
                             remeasured=a.remeasured, screen=a.screen) for path, key, noise in cells]  # fmt: skip
        warm_futures = [ex.submit(measure_warm, target, key, source, seeds=a.seeds, budget=a.budget, noise=warm_noise,
                                  seed_start=a.seed_start) for target, key, source in warm_pairs]  # fmt: skip
        rows = []
        for (path, key, noise), f in zip(cells, futures, strict=True):
            name = path.stem + (f" {key}" if key else "")
            rows.append((name, noise, f.result()))
            print(f"{name} noise {noise:.0%}: {rows[-1][2]} ({time.time() - t0:.0f} s)", flush=True)
        warm_rows = []
        for (target, key, source), f in zip(warm_pairs, warm_futures, strict=True):
            warm_rows.append((Path(target).stem + (f" {key}" if key else ""), Path(source).stem, f.result()))
            print(f"warm {warm_rows[-1][0]} <- {source}: {warm_rows[-1][2]} ({time.time() - t0:.0f} s)", flush=True)
    cmd = ("python -m benchmarks.search_table" + "".join(f" --landscape {p}" for p in a.landscape or [])
           + f" --keys-per-file {a.keys_per_file} --seeds {a.seeds}"
           + (f" --seed-start {a.seed_start}" if a.seed_start else "") + f" --budget {a.budget}"
           + "".join(f" --noise {n}" for n in a.noise or []) + ("" if a.warm else " --no-warm")
           + "".join(f" --remeasured {f}" for f in a.remeasured) + (" --screen" if a.screen else "")
           + (f" --warm-from {a.warm_from}" if a.warm_from else "")
           + (f" --section {a.section}" if a.section else ""))  # fmt: skip
    last = a.seed_start + a.seeds - 1
    text = (f"Median / worst evaluations to 98% of the true best over seeds {a.seed_start}-{last} (budget {a.budget}; "
            f"{a.budget + 1} = not reached), in brackets the seeds within 2% by the budget. Measured by:\n\n"
            f"    {cmd}\n\n")  # fmt: skip
    if rows:
        text += table(rows, a.seeds)
    if rows and warm_rows:
        text += ("\n\nWarm starts across GPUs (every GP without the space files' priors; TPE warm: started from the "
                 "earlier results' 6 best configs), the same figures:\n\n" + warm_table(warm_rows, a.seeds))
    elif warm_rows:
        spread = f" with a {warm_noise:.0%} run-to-run spread" if warm_noise else ""
        text += (f"Warm starts{spread} (every GP without the space files' priors; TPE warm: started from the earlier "
                 "results' 6 best configs):\n\n" + warm_table(warm_rows, a.seeds))
    print(text)
    if a.write:
        write(a.write, text, a.section)
        print(f"wrote {a.write}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
