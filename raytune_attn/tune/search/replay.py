"""Replay: measure searchers on a recorded landscape, without a GPU.

Each searcher is driven through the same Ray Tune Searcher interface as a live sweep (`suggest`, then
`on_trial_complete` with the recorded value and compile seconds, or status "invalid" for a failed config), for the
problem the table records (landscape.py: its fields and, by its arch, the space file's priors),
`budget` evaluations per run, one run per seed (`seed_start` .. `seed_start + seeds - 1`). For each run we record
after how many evaluations the best value found first reaches 95% and 98% of the landscape's best (budget + 1 when
it never does within the budget), the best value found, and the cold compile seconds spent (the landscape's
`compile_s`, see landscape.py; 0 for a config without one) until reaching 98% and over the whole budget. Each
config's compile counts once, failed configs included. A run that never reaches 98% counts its whole budget's
compile seconds there, a lower bound like budget + 1 evaluations.
With `concurrency` > 1, the searcher is asked for that many configs before any of them is told (a batch of
parallel trials), as Ray Tune does with concurrent trials.
With `noise` > 0, each run measures every config once with run-to-run noise: its value times exp(noise * z), z a
standard normal drawn per config and run from the run's seed (the same noisy table for every searcher of a seed).
The searcher sees the noisy values; the trace, and so "reaches 98% of the best", uses the true values of the
configs measured so far: a sweep's final re-measure of its best configs picks the true best among them.
With `screen`, the searchers draw from the candidates a sweep on the table's GPU would: those that the one
validation accepts for the recorded arch, head dim and dtype (`sweep_screen`, what the sweep passes as `prefilter`).
A recorded table holds every config of its space, also those a sweep never tries because the screen knows they
cannot fit (shared memory); without `screen` they are candidates, and each one a searcher picks costs an evaluation.
The best is the table's best either way: a screen that rejected a config that ran would show as a miss.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from raytune_attn.tune.search import searcher_class
from raytune_attn.tune.search.base import DiscreteSearcher
from raytune_attn.tune.search.gp import GPSearcher
from raytune_attn.tune.search.landscape import Landscape, load_landscape
from raytune_attn.tune.search.warm import check_warm_as, prior_scores, warm_options
from raytune_attn.validation import Screen

THRESHOLDS = (0.95, 0.98)


@dataclass(frozen=True)
class Run:
    trace: list[float]  # best value found after each evaluation (NaN until the first success)
    configs: list[dict]
    compile_s: list[float] = field(default_factory=list)  # cold compile seconds spent by each evaluation

    def evals_to(self, target: float, budget: int) -> int:
        for k, v in enumerate(self.trace, start=1):
            if v >= target:
                return k
        return budget + 1

    def compile_to(self, target: float) -> float:
        """Compile seconds spent until the best value first reaches `target` (the whole run's when it never does)."""
        return float(sum(self.compile_s[: self.evals_to(target, len(self.trace))]))


def check_noise(noise: float) -> None:
    """ValueError naming the flag for a run-to-run spread outside [0, 0.5)."""
    if not 0 <= noise < 0.5:
        raise ValueError(f"--noise is a relative spread in [0, 0.5), got {noise}")


def noise_factors(landscape: Landscape, noise: float, seed: int) -> dict[tuple, float]:
    """Each config's multiplicative measurement noise in the run of `seed`: exp(noise * z), z standard normal."""
    check_noise(noise)
    z = np.random.default_rng([seed, 0x6E6F]).standard_normal(len(landscape.values))
    return dict(zip(landscape.values, np.exp(noise * z).tolist(), strict=True))


def tell(searcher: DiscreteSearcher, landscape: Landscape, tid: str, cfg: dict, built: set,
         noise: Mapping[tuple, float] | None = None) -> tuple[float, dict]:
    """Measure `cfg` on the landscape and tell the searcher, as a sweep's finished trial does: (its true value, NaN for
    a failed config; the result told). A config already in `built` (which gains it) compiles in 0 s, a cache load;
    `noise`: config key -> factor on the value told (noise_factors)."""
    v, key = landscape.value(cfg), landscape.space.key(cfg)
    secs = 0.0 if key in built else landscape.compile_seconds(cfg)
    built.add(key)
    if np.isfinite(v):
        result = {landscape.objective: v * noise[key] if noise else v, "status": "ok"}
    else:
        result = {"status": "invalid"}
    result |= {"compile_s": secs, "config": cfg}
    searcher.on_trial_complete(tid, result)
    return v, result


def run_searcher(searcher: DiscreteSearcher, landscape: Landscape, budget: int, *, concurrency: int = 1,
                 noise: Mapping[tuple, float] | None = None) -> Run:
    """Drive one searcher for `budget` evaluations on the landscape; return the best-so-far trace (true values).
    `noise`: config key -> factor on the value the searcher is told (noise_factors)."""
    best, trace, configs, compile_s, built = -math.inf, [], [], [], set()
    n = 0
    while n < budget:
        batch = []
        for _ in range(min(concurrency, budget - n)):
            tid = f"trial_{n + len(batch):05d}"
            cfg = searcher.suggest(tid)
            if cfg is None or cfg == searcher.FINISHED:
                break
            batch.append((tid, cfg))
        if not batch:
            break
        for tid, cfg in batch:
            v, result = tell(searcher, landscape, tid, cfg, built, noise)
            if np.isfinite(v):
                best = max(best, v)
            trace.append(best if best > -math.inf else float("nan"))
            configs.append(cfg)
            compile_s.append(result["compile_s"])
        n += len(batch)
    return Run(trace, configs, compile_s)


def sweep_screen(landscape: Landscape) -> Screen:
    """The pre-filter a sweep on the table's GPU screens its candidates with (sweep/run.py): the one validation for
    the recorded arch, head dim, dtype and GQA group. ValueError naming what the table does not record."""
    p = landscape.problem
    missing = ([] if landscape.arch else ["arch"]) + [f for f in ("head_dim", "dtype") if f not in p]
    if missing:
        raise ValueError(f"--screen screens the candidates as a sweep on the table's GPU would: the table records no "
                         f"single {' or '.join(missing)}")
    group = p["hq"] // p["hkv"] if p.get("hq") and p.get("hkv") else 1
    return Screen.for_problem(landscape.arch, p["head_dim"], p["dtype"], group)


def screen_line(landscape: Landscape, screen: Screen) -> str:
    """How many of the table's configs the screen keeps, and what it rejects: failed configs, and measured ones (a
    false reject, which would hide a config that ran)."""
    rejected = [c for c in landscape.space.configs() if not screen.accepts(c)]
    ran = sum(bool(np.isfinite(landscape.value(c))) for c in rejected)
    n = len(landscape.values)
    return (f"screen ({screen.arch}, head dim {screen.head_dim}, {screen.dtype}): {n - len(rejected)} of {n} configs "
            f"are candidates; it rejects {len(rejected) - ran} failed and {ran} measured configs")


def check_counts(budget: int, seeds: int, seed_start: int, concurrency: int) -> None:
    """ValueError naming the flag when a replay's budget, seeds, first seed or concurrency cannot be run."""
    if budget < 1 or seeds < 1:
        raise ValueError("--budget and --seeds must be at least 1")
    if seed_start < 0:
        raise ValueError("--seed-start must be at least 0")
    if concurrency < 1:
        raise ValueError(f"--concurrency must be at least 1, got {concurrency}")


def run_seeds(landscape: Landscape, name: str, *, budget: int = 40, seeds: int = 10, seed_start: int = 0,
              concurrency: int = 1, options: Mapping[str, Any] | None = None, noise: float = 0.0,
              warm: Sequence[tuple[dict, float | None]] | None = None, warm_as: str = "model",
              cls: type[DiscreteSearcher] | None = None, screen: bool = False) -> list[Run]:  # fmt: skip
    """One run of searcher `name` (with `options`) per seed, `seed_start` .. `seed_start + seeds - 1`; the other
    arguments as in `replay`. `cls`: a class to build instead of `name`'s (a variant of it, as the benchmarks
    compare; `name` still chooses the warm-start options). Bad counts, spread, warm mode or a table that cannot be
    screened are refused before any run."""
    check_counts(budget, seeds, seed_start, concurrency)
    check_noise(noise)
    check_warm_as(warm_as)
    make = cls or searcher_class(name)  # an unknown name is refused here, before any run
    prefilter = sweep_screen(landscape) if screen else None
    out = []
    for seed in range(seed_start, seed_start + seeds):
        opts = dict(options or {})
        opts.setdefault("problem", landscape.problem or None)  # the GP's priors read it, as in a sweep
        if prefilter is not None:
            opts.setdefault("prefilter", prefilter)
        if warm:
            opts.update(warm_options(name, warm, warm_as))
        s = make(landscape.space, metric=landscape.objective, seed=seed, **opts)
        factors = noise_factors(landscape, noise, seed) if noise else None
        out.append(run_searcher(s, landscape, budget, concurrency=concurrency, noise=factors))
    return out


def replay(
    landscape: Landscape,
    searchers: Sequence[str],
    *,
    budget: int = 40,
    seeds: int = 10,
    seed_start: int = 0,
    concurrency: int = 1,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    noise: float = 0.0,
    warm: Sequence[tuple[dict, float | None]] | None = None,
    warm_as: str = "model",
    screen: bool = False,
) -> dict[str, dict]:
    """`screen`: the candidates a sweep on the table's GPU would screen (module doc). `warm`: earlier results
    (warm.prior_scores of another table); with `warm_as` "model" the GP takes them all into its model and the other
    searchers start from their best configs, with "design" every searcher starts from those configs
    (warm.warm_options). Summary per searcher: {"evals_to_95": {"median", "max"}, "evals_to_98": {...},
    "reached_98" (seeds that reached 98% of the best within the budget), "best_at_budget": {"median"},
    "compile_s_to_98": {"median", "max"}, "compile_s_total": {"median", "max"}}."""
    best = landscape.best
    out = {}
    for name in searchers:
        runs = run_seeds(landscape, name, budget=budget, seeds=seeds, seed_start=seed_start, concurrency=concurrency,
                         options=(options or {}).get(name), noise=noise, warm=warm, warm_as=warm_as, screen=screen)
        summary: dict[str, Any] = {}
        for p in THRESHOLDS:
            evals = [r.evals_to(p * best, budget) for r in runs]
            summary[f"evals_to_{round(p * 100)}"] = {"median": float(np.median(evals)), "max": int(max(evals))}
        summary["reached_98"] = sum(r.evals_to(0.98 * best, budget) <= budget for r in runs)  # seeds, of `seeds`
        finals = [r.trace[-1] if r.trace else float("nan") for r in runs]
        summary["best_at_budget"] = {"median": float(np.nanmedian(finals)) if np.isfinite(finals).any() else None}
        for k, secs in (("compile_s_to_98", [r.compile_to(0.98 * best) for r in runs]),
                        ("compile_s_total", [sum(r.compile_s) for r in runs])):  # fmt: skip
            summary[k] = {"median": round(float(np.median(secs)), 1), "max": round(float(max(secs)), 1)}
        out[name] = summary
    return out


def format_table(summary: Mapping[str, Mapping], landscape: Landscape) -> str:
    best = landscape.best
    lines = [
        f"landscape: {landscape.space.source}  configs {len(landscape.values)}  best {best:.4g} {landscape.objective}",
        f"{'searcher':<10} {'to95 med':>8} {'to95 max':>8} {'to98 med':>8} {'to98 max':>8} {'best@budget med':>16}"
        f" {'compile s to98 med':>18} {'compile s total med':>19}",
    ]
    for name, s in summary.items():
        b = s["best_at_budget"]["median"]
        bb = f"{b:.4g} ({b / best:.1%})" if b is not None else "-"
        lines.append(
            f"{name:<10} {s['evals_to_95']['median']:>8g} {s['evals_to_95']['max']:>8d} "
            f"{s['evals_to_98']['median']:>8g} {s['evals_to_98']['max']:>8d} {bb:>16} "
            f"{s['compile_s_to_98']['median']:>18.1f} {s['compile_s_total']['median']:>19.1f}"
        )
    return "\n".join(lines)


def _parse_select(select: Sequence[str]) -> dict[str, str]:
    """`--select COLUMN=VALUE` items as a mapping."""
    sel = {}
    for item in select:
        col, sep, val = item.partition("=")
        if not sep or not col:
            raise ValueError(f"--select takes COLUMN=VALUE, got {item!r}")
        sel[col] = val
    return sel


def _parse_gp_options(gp_options: Sequence[str]) -> dict[str, Any]:
    """`--gp-option NAME=VALUE` items as GPSearcher keyword arguments, each name one of its parameters."""
    opts: dict[str, Any] = {}
    known = inspect.signature(GPSearcher).parameters
    for item in gp_options:
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--gp-option takes NAME=VALUE, got {item!r}")
        if key not in known or key in ("space", "kw", "problem"):
            raise ValueError(f"unknown GP option {key!r}")
        try:
            opts[key] = json.loads(val)  # numbers, true/false, lists; anything else is a string
        except json.JSONDecodeError:
            opts[key] = val
        # A switch given "yes" or 1 would be true to bool() whatever was meant (priors=no, cost_aware=0).
        if isinstance(known[key].default, bool) and not isinstance(opts[key], bool):
            raise ValueError(f"GP option {key} takes true or false, got {val!r}")
        default = known[key].default
        if type(default) is int and (isinstance(opts[key], bool) or not isinstance(opts[key], int) or opts[key] < 0):
            raise ValueError(f"GP option {key} takes a non-negative integer, got {val!r}")
    return opts


def _check_searchers(names: Sequence[str]) -> None:
    """An unknown searcher name is refused before any run, and so is tpe without Optuna."""
    for name in names:
        searcher_class(name)
        if name == "tpe" and importlib.util.find_spec("optuna") is None:
            raise ValueError("--searcher tpe needs Optuna: pip install 'raytune-attn[tpe]'")


def replay_command(
    landscape: str,
    searchers: Sequence[str],
    *,
    budget: int = 40,
    seeds: int = 10,
    seed_start: int = 0,
    objective: str = "tflops",
    params: Sequence[str] | None = None,
    select: Sequence[str] = (),
    concurrency: int = 1,
    json_out: str | None = None,
    gp_options: Sequence[str] = (),
    cold_compile: bool = False,
    no_priors: bool = False,
    noise: float = 0.0,
    warm_start: str | None = None,
    warm_as: str = "model",
    screen: bool = False,
) -> str:
    """What `raytune-attn replay` runs; returns the printed table. `no_priors`: the GP without the space's priors
    (start, moves, coupled pairs), as `--gp-option priors=false`; `noise`, `screen`: see the module docstring;
    `warm_start`: a results table used as the searchers' prior (`warm_as`, see `replay`)."""
    check_counts(budget, seeds, seed_start, concurrency)  # before the landscape is read
    check_warm_as(warm_as)
    sel = _parse_select(select)
    opts = _parse_gp_options(gp_options)
    twice = sorted({p for p in params or () if list(params).count(p) > 1})
    if twice:
        raise ValueError(f"--params names {', '.join(twice)} more than once")
    if no_priors:
        opts["priors"] = False
    land = load_landscape(landscape, objective=objective, params=list(params or ()) or None, select=sel,
                          cold_compile=cold_compile)  # fmt: skip
    screened = sweep_screen(land) if screen else None
    names = list(searchers) or ["gp", "random"]
    _check_searchers(names)
    warm = (prior_scores(warm_start, land.space.names, objective=objective, problem=land.problem or None)
            if warm_start else None)
    summary = replay(land, names, budget=budget, seeds=seeds, seed_start=seed_start, concurrency=concurrency,
                     options={"gp": opts}, noise=noise, warm=warm, warm_as=warm_as, screen=screen)  # fmt: skip
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(json.dumps(summary, indent=2) + "\n")
    table = format_table(summary, land)
    return table if screened is None else f"{screen_line(land, screened)}\n{table}"
