"""Gaussian-process Bayesian optimization over a discrete space, as a Ray Tune Searcher.

What makes it work on kernel-config landscapes (few configs near the best, a long tail, failures):

* Inputs: the space's encoding (encoding.py): log2 for sizes, one-hot for categories, all in [0, 1].
* Objective scale: the GP models log(TFLOP/s) (or -log(latency) for mode="min"). Configs span 2 orders of
  magnitude; in log space a 10% gain is the same step at any level, so one stationary kernel fits better. Scores
  below a tenth of the best are clipped there: a 100x-slow config is no more informative than a 10x-slow one.
* Failures (errored, invalid, status != "ok", metric 0 or missing) are told to the GP as a score a bit below the
  worst success seen, not as 0 TFLOP/s, whose log is -inf. The failed config is never suggested again (base.py).
* The start (_design.py): the space's priors (priors.py: a start, moves and coupled knob pairs from its YAML file)
  give the initial design: the start for the problem, its one-knob and coupled neighbours and the moves, then a
  Latin hypercube up to `n_initial`. `priors=False` (no config from code or files): a maximin Latin hypercube,
  pair features of the ordered knobs as extra inputs, local steps of any two knobs from the best config of each
  of a few basins (measured local optima) ranked by an upper confidence bound, the basins taken in turn while the
  best does not improve, a global step every few evaluations without improvement, and failures left to a
  classifier (_feasible.py) instead of imputed into the GP.
* Local steps (a trust region): after the design, each pick is the unmeasured config with the highest posterior
  mean among the moves from one of the best measured configs: one knob to any value, or both knobs of a coupled
  pair one value each. Global expected improvement, evaluated exactly at every free candidate (the space is
  discrete and small), takes over once that neighbourhood is exhausted.
* Compile time as a cost (`cost_aware`, _cost.py): once enough cold compiles are known, the global steps rank by
  EI per predicted second (Snoek et al. 2012). The design and the local steps ignore the cost.
* Concurrency: configs in flight are added to the GP as "constant liar" observations (the mean of the observed
  scores), which collapses the posterior variance there, so parallel suggestions spread out.
* Bounded cost: hyperparameters are refitted on a schedule on at most 60 points (_model.py); each suggestion's
  seconds are recorded in `timings`.
* Warm start: results of an earlier sweep (another shape or GPU; warm.py scores them relative to each problem's
  best) enter as extra observations, shifted by the median difference to this sweep's measurements on the configs
  both measured (before any, by the difference of the bests); a config's own measurement replaces its warm value.
  With `n_initial` or more warm successes the initial design is skipped; until a config of this search succeeds,
  the picks are the earlier results' configs, best first (then the model's best guesses). The other problems'
  results of the same sweep (`add_related`, `tune --share-results`) join them the same way as they come.

docs/search.md has the measurements behind each choice.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from skopt.acquisition import gaussian_ei, gaussian_lcb
from threadpoolctl import ThreadpoolController

from raytune_attn.tune.search._cost import compile_cost
from raytune_attn.tune.search._design import Design, pair_step
from raytune_attn.tune.search._feasible import SKIP_P, fail_probability
from raytune_attn.tune.search._model import Model, Negated
from raytune_attn.tune.search.base import DiscreteSearcher
from raytune_attn.tune.search.encoding import Encoding
from raytune_attn.tune.search.landscape import Landscape
from raytune_attn.tune.search.warm import WarmStartError, in_space, prior_scores

_XI = 0.01  # EI's exploration margin, in units of the observed scores' standard deviation
_FAIL_MARGIN = 0.1  # a failure scores this fraction of the observed range below the worst success
_FLOOR_RATIO = 0.1  # scores below this fraction of the best are clipped to it
_BENCH_S = 0.2  # a trial's seconds besides its compile, for EI per second
_blas_limits = ThreadpoolController().limit  # created once: it looks up the loaded BLAS libraries
_Earlier = tuple[np.ndarray, tuple | None, float | None]  # an earlier result: (GP inputs, candidate key or None, score)
RUNNER_UPS = 3  # likely_next: configs after the pick a sweep compiles ahead (speculative builds cost only idle cores)


def _ordinal_value(p, value) -> float:
    return math.log2(value) if p.encoding == "log2" else float(p.values.index(value))


class GPSearcher(DiscreteSearcher):
    """`problem`: a raytune_attn.problem.Problem, a mapping of some of its fields, or None (the priors' conditions
    on unknown fields do not hold). `priors`: use the space's priors (start, moves, coupled pairs); False: none
    (the module docstring says what replaces them). `warm_start`: earlier results (see `add_warm_start`).
    `cost_aware`: global steps rank by EI per compile second."""

    name = "gp"
    _local_top = 3  # the local steps move from the best this many measured configs
    _design_min = 10  # without priors, the space-filling design grows to this many configs (one per 45 candidates)
    _stall = 3  # without priors, a global step every this many evaluations without improvement (0: never)
    _local_kappa = 1.0  # without priors, local steps rank by mean + kappa * sd (0: the mean alone)
    _free_top = 5  # without priors, the local steps move from this many measured configs (the best of each basin)
    _niche = 2  # without priors, each of those differs from every better measured config in at least this many knobs
    _model_class = Model  # the GP model: its kernel and when it refits

    def __init__(self, space, *, n_initial: int = 6, problem: Any = None, warm_start: Any = None,
                 priors: bool = True, cost_aware: bool = True, **kw):
        super().__init__(space, problem=problem, **kw)
        self.n_initial, self.priors, self.cost_aware = int(n_initial), bool(priors), bool(cost_aware)
        self.encoding = Encoding(self.space)
        self._X = self.encoding.transform(self.candidates)
        self._F = self._model_inputs(self.candidates)  # the GP's inputs: _X, plus pair features without priors
        # Each candidate as value indices, one column per knob: "differs in one knob" without encoding details.
        self._cat = np.array([[p.values.index(c[p.name]) for p in self.space.params] for c in self.candidates])
        names = list(self.space.names)
        if self.priors:
            self._pairs = [(names.index(a), names.index(b)) for a, b in (c.knobs for c in self.space.priors.coupled)
                           if a in names and b in names]  # fmt: skip
        else:  # no file says which knobs act together: the local steps try every pair
            multi = [k for k, p in enumerate(self.space.params) if len(p.values) > 1]
            self._pairs = [(a, b) for j, a in enumerate(multi) for b in multi[j + 1:]]
        self._warm: list[_Earlier] = []  # the warm start's observations
        self._related: list[dict] = []  # the sweep's other problems' results so far (add_related)
        self._related_warm: list[_Earlier] = []  # those results read as observations
        self._related_stale = False  # rows came since _related_warm was read
        self.timings: list[tuple[int, float]] = []  # (observations told, seconds) per model-based suggestion
        self._reset()
        if warm_start is not None:
            self.add_warm_start(warm_start)

    def _reset(self) -> None:
        self._scores: dict[int, float | None] = {}  # candidate index -> score (None = failed)
        self._model = self._model_class(self._F.shape[1], self.seed)
        design = Design(self.space, self.candidates, self._index, self._cat, self._X, self.encoding.transform)
        n_design = self.n_initial if self.priors else max(self.n_initial, min(self._design_min,
                                                                             len(self.candidates) // 45))
        self._design = design.build(self.space.priors if self.priors else None, self.problem, n_design,
                                    self.seed)  # fmt: skip
        self._compile: dict[int, float] = {}  # candidate index -> compile seconds its result reported (0 = shared)
        self._runner_ups: list[int] = []  # the last model-based pick's next best candidates (likely_next)

    # ---- objective scale ---------------------------------------------------------------------------------------
    def _score(self, value: float | None) -> float | None:
        if value is None:
            return None
        return math.log(value) if self.mode == "max" else -math.log(value)

    def _observe(self, i: int, value: float | None) -> None:
        self._scores[i] = self._score(value)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        told = len(self._obs)
        super().on_trial_complete(trial_id, result, error)
        if len(self._obs) > told and result:  # this trial was ours and new: keep the compile seconds it reports
            try:
                secs = float(result.get("compile_s"))
            except (TypeError, ValueError):
                return
            if math.isfinite(secs) and secs >= 0:
                self._compile[self._obs[-1][0]] = secs

    # ---- what comes next ----------------------------------------------------------------------------------------
    def design_configs(self) -> list[dict]:
        """The configs the initial design will still suggest, in order (a sweep compiles them ahead)."""
        return [dict(self.candidates[i]) for i in self._design if not self._taken[i]]

    def likely_next(self) -> list[dict]:
        """The configs this search will likely suggest next (a sweep compiles them ahead, speculatively): the rest
        of the design, else the runner-ups of the last model-based pick (the next best by the same criterion:
        while its result is out, the next pick is usually one of them)."""
        design = self.design_configs()
        if design:
            return design[:RUNNER_UPS]
        return [dict(self.candidates[i]) for i in self._runner_ups if not self._taken[i]]

    # ---- warm start ---------------------------------------------------------------------------------------------
    def add_warm_start(self, source: Any, *, objective: str | None = None, params: list[str] | None = None) -> int:
        """Add earlier results as observations; returns how many configs of this space they cover.

        `source`: a results table (a Parquet path or DataFrame, read as `tune --warm-start` reads it:
        warm.prior_scores, each problem and GPU scaled by its best, each group weighed by its problem's likeness to
        this search's `problem`), a Landscape (its values as they are), or an
        iterable of (config, value) pairs with value None for a failed config.
        """
        added = self._as_warm(self._warm_pairs(source, objective or self.metric, params))
        self._warm += added
        self._skip_design_if_known()
        return len(added)

    def add_related(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Results of the other problems of this sweep, as they come: rows as a results table holds them
        (`problem_key`, the knobs, the objective, `status`). The model takes them beside the warm start, read as
        a warm-start table is (each problem scaled by its best so far, weighted by its likeness to this search's
        problem), from the next model-based pick on (the table is read again then, not on every row)."""
        self._related.extend(dict(r) for r in rows)
        self._related_stale = True

    def _read_related(self) -> None:
        self._related_stale = False
        try:
            pairs = self._warm_pairs(pd.DataFrame(self._related), self.metric, None)
            self._related_warm = self._as_warm(pairs)
        except WarmStartError:  # no successful row yet
            self._related_warm = []
        self._skip_design_if_known()

    def _as_warm(self, pairs: Iterable[tuple[dict, float | None]]) -> list[_Earlier]:
        """(GP inputs, candidate key, score) of each (config, value) of this space."""
        out = []
        for cfg, value in pairs:
            try:
                x = self._model_inputs([cfg])[0]
            except (KeyError, ValueError):
                continue  # a knob value outside this space
            if self.space.contains(cfg):
                out.append((x, self._key_or_none(cfg), self._score(value)))
        return out

    def _earlier(self) -> list[_Earlier]:
        """The warm start's observations and the related problems'."""
        return self._warm + self._related_warm

    def _skip_design_if_known(self) -> None:
        """Earlier results (warm start and related problems) with `n_initial` or more successes replace the design."""
        if sum(s is not None for _, _, s in self._earlier()) >= self.n_initial:
            self._design = []

    def _warm_pairs(self, source: Any, objective: str, params) -> Iterable[tuple[dict, float | None]]:
        if isinstance(source, Landscape):
            for key, v in source.values.items():
                yield source.space.to_config(key), (None if not np.isfinite(v) else float(v))
            return
        if isinstance(source, (str, Path, pd.DataFrame)):
            # The table read as `tune --warm-start` reads it: each group scaled by its best (higher is better);
            # for a time objective the relative speed s becomes the relative time 1 / s, which _score negates.
            scores = prior_scores(source, list(params or self.space.names), objective=objective, mode=self.mode,
                                  problem=self.problem)
            pairs = [(c, s if s is None or self.mode == "max" else 1.0 / s) for c, s in scores]
        else:
            pairs = [(dict(cfg), v) for cfg, v in source]
        if any(set(cfg) != set(self.space.names) for cfg, _ in pairs):  # partial configs (warm.prior_scores)
            for i, v in in_space(pairs, self.candidates):
                yield dict(self.candidates[i]), v
            return
        yield from pairs

    # ---- the model ----------------------------------------------------------------------------------------------
    def _model_inputs(self, configs) -> np.ndarray:
        """The GP's inputs for `configs`: their encoding; without priors also, for every two ordered knobs, the
        difference and the sum of their encoded values before normalization (log2 for sizes), normalized over
        the space. Kernel knobs act in products and ratios (rows per warp, keys in flight per stage), which a
        stationary kernel on the knobs alone sees only as a diagonal ridge; no file names those pairs here."""
        X = self.encoding.transform(configs)
        ordinal = [p for p in self.encoding.params if p.encoding in ("log2", "index")]
        if self.priors or len(ordinal) < 2 or not len(configs):
            return X
        raw = np.array([[_ordinal_value(p, c[p.name]) for p in ordinal] for c in configs], dtype=float)
        lo = np.array([_ordinal_value(p, p.values[0]) for p in ordinal])
        hi = np.array([_ordinal_value(p, p.values[-1]) for p in ordinal])
        cols = [X]
        for a, b in itertools.combinations(range(len(ordinal)), 2):
            for v, low, high in ((raw[:, a] + raw[:, b], lo[a] + lo[b], hi[a] + hi[b]),
                                 (raw[:, a] - raw[:, b], lo[a] - hi[b], hi[a] - lo[b])):  # fmt: skip
                cols.append(((v - low) / max(high - low, 1e-9))[:, None])
        return np.hstack(cols)

    def _training_data(self, liars: Iterable[int]) -> tuple[np.ndarray, np.ndarray, int]:
        """Inputs and scores: measured configs, warm-start points and liars; failures imputed; + real count."""
        real = list(self._scores.items())
        if not self.priors:  # the best configs sit at the failed region's edge: see _feasible
            real = [(i, s) for i, s in real if s is not None]
        succ = np.array([s for _, s in real if s is not None])
        offset = 0.0
        earlier = self._earlier()
        overlap = [self._scores[self._index[k]] - s for _, k, s in earlier
                   if k in self._index and s is not None and self._scores.get(self._index[k]) is not None]  # fmt: skip
        warm_succ = [s for _, _, s in earlier if s is not None]
        if overlap:
            offset = float(np.median(overlap))
        elif warm_succ and succ.size:  # no config measured in both yet: their bests are taken to match
            offset = float(succ.max()) - max(warm_succ)
        warm = [(x, s + offset if s is not None else None) for x, k, s in earlier
                if k not in self._index or self._index[k] not in self._scores]  # fmt: skip
        all_succ = np.concatenate([succ, [s for _, s in warm if s is not None]])
        if all_succ.size:
            # Configs below _FLOOR_RATIO of the best are all just "bad": clipping them keeps a few 100x-slow
            # outliers from dominating the GP's variance and squashing the differences among good configs.
            floor = float(all_succ.max()) + math.log(_FLOOR_RATIO)
            lo, hi = max(float(all_succ.min()), floor), float(all_succ.max())
            fail = lo - _FAIL_MARGIN * max(hi - lo, 0.1)
        else:
            floor, fail = -math.inf, 0.0
        clip = lambda s: fail if s is None else max(s, floor)  # noqa: E731
        X = [self._F[i] for i, _ in real] + [x for x, _ in warm]
        y = [clip(s) for _, s in real] + [clip(s) for _, s in warm]
        n_fit = len(y)
        liars = list(liars)
        if liars:
            lie = float(np.mean(y)) if y else 0.0
            X += [self._F[i] for i in liars]
            y += [lie] * len(liars)
        return np.asarray(X, dtype=float).reshape(len(y), self._F.shape[1]), np.asarray(y, dtype=float), n_fit

    def _fit(self, X: np.ndarray, y: np.ndarray, n_fit: int):
        return self._model.fit(X, y, n_fit)

    def _compile_cost(self, idx: np.ndarray) -> np.ndarray | None:
        """Predicted cold compile seconds of the candidates `idx` (_cost.py); None before enough are known."""
        return compile_cost(self._X, self._compile, idx)

    # ---- choosing -----------------------------------------------------------------------------------------------
    def _pick(self, available: np.ndarray) -> int:
        # One BLAS thread: the GP's matrices are at most a few hundred rows, where threads only add their
        # synchronisation (measured: 4x the CPU seconds of a replay with OpenBLAS's default threads on 2 cores, and
        # far more wall time on a loaded machine, where the threads spin while waiting for a core).
        with _blas_limits(limits=1):
            return self._pick_one(available)

    def _pick_one(self, available: np.ndarray) -> int:
        if self._related_stale:
            self._read_related()
        while self._design and self._taken[self._design[0]]:
            self._design.pop(0)
        if self._design:
            return self._design.pop(0)
        if len(available) == 1 or self._X.shape[1] == 0:
            return int(available[0])
        t0 = time.perf_counter()
        X, y, n_fit = self._training_data(self._live.values())
        if n_fit == 0:
            return int(available[np.random.default_rng(self.seed + len(self._obs)).integers(len(available))])
        gp = self._fit(X, y, n_fit)
        available = self._likely_feasible(available)
        if self._earlier() and not any(v is not None for v in self._scores.values()):
            order = self._warm_order(gp, available)
            self._runner_ups = [int(available[k]) for k in order[1:1 + RUNNER_UPS]]
            self.timings.append((len(self._obs), time.perf_counter() - t0))
            return int(available[order[0]])
        since = 0 if self.priors else self._since()
        local = None if self._stalled(since) else self._neighbours(available, since)
        if local is not None and len(local):
            # Local step: the neighbour the model predicts best (exploitation; EI's exploration is the global
            # steps' job).
            order = np.argsort(-self._local_acquisition(gp, self._F[local]), kind="stable")
            self._runner_ups = [int(local[k]) for k in order[1:1 + RUNNER_UPS]]
            self.timings.append((len(self._obs), time.perf_counter() - t0))
            return int(local[order[0]])
        Xa = self._F[available]
        a = self._global_acquisition(gp, Xa, y[:n_fit], available)
        # Ties (e.g. never-seen categories) go to the earliest candidate: deterministic.
        order = np.argsort(-a, kind="stable")
        self._runner_ups = [int(available[k]) for k in order[1:1 + RUNNER_UPS]]
        self.timings.append((len(self._obs), time.perf_counter() - t0))
        return int(available[order[0]])

    def _warm_order(self, gp, available: np.ndarray) -> np.ndarray:
        """Positions in `available` in the order to try them while nothing of this search has succeeded yet: the
        configs earlier results scored, best first, then the rest by the model's mean. An earlier best is what was
        measured; the model's mean, fitted to hundreds of earlier points with a noise term, can peak beside it."""
        earlier = {self._index[k]: s for _, k, s in self._earlier() if k in self._index and s is not None}
        known = np.array([earlier.get(int(i), -math.inf) for i in available])
        return np.lexsort((-gp.predict(self._F[available]), -known))  # the last key sorts first

    def _global_acquisition(self, gp, Xa: np.ndarray, y: np.ndarray, available: np.ndarray) -> np.ndarray:
        """Expected improvement at every free candidate (per predicted second when cost-aware); the posterior
        standard deviation where nothing is expected to improve."""
        if not (np.isfinite(y).any() and y.std() > 0):
            return -gaussian_lcb(Xa, Negated(gp), kappa=1.0)  # all scores equal: the upper confidence bound
        # skopt's acquisitions minimize: give them the negated scores' model via y_opt = -best.
        a = gaussian_ei(Xa, Negated(gp), y_opt=-float(y.max()), xi=_XI * float(y.std()))
        if not np.any(a > 0):
            return gp.predict(Xa, return_std=True)[1]  # nothing expected to improve: explore the least known
        cost = self._compile_cost(available) if self.cost_aware else None
        if cost is not None:
            # Expected improvement per second (Snoek et al. 2012): a trial costs its compile, as the model
            # predicts it, plus the benchmark. A 100 s compile must promise ~100x the improvement of a 1 s one.
            a = a / (cost + _BENCH_S)
        return a

    def _local_acquisition(self, gp, Xl: np.ndarray) -> np.ndarray:
        """The local steps' ranking: the posterior mean with priors (their moves already point somewhere); without,
        an upper confidence bound, so a neighbour the model knows little of (a step of two knobs) is tried too."""
        if self.priors or not self._local_kappa:
            return gp.predict(Xl)
        mu, sd = gp.predict(Xl, return_std=True)
        return mu + self._local_kappa * sd

    def _since(self) -> int:
        """Evaluations since the best score last improved (0 right after an improvement)."""
        best, since = -math.inf, 0
        for _, v in self._obs:
            s = self._score(v)
            if s is not None and s > best:
                best, since = s, 0
            else:
                since += 1
        return since

    def _stalled(self, since: int) -> bool:
        """Without priors, every `_stall`-th evaluation since the best last improved (`since`, from `_since`) is a
        global step: the local steps climb from wherever the space-filling design landed, which is often a local
        optimum far from the best; a few global expected-improvement steps let the search jump to another basin
        (TuRBO's restarts)."""
        if self.priors or not self._stall:
            return False
        return since > 0 and since % self._stall == 0

    def _likely_feasible(self, available: np.ndarray) -> np.ndarray:
        """`available` less the candidates the failure classifier predicts to fail (without priors; all of them
        when it would skip every one)."""
        if self.priors:
            return available
        seen = np.array(list(self._scores), dtype=int)
        failed = np.array([s is None for s in self._scores.values()])
        p = fail_probability(self._X[seen], failed, self._X[available])
        if p is None or (p >= SKIP_P).all():
            return available
        return available[p < SKIP_P]

    def _neighbours(self, available: np.ndarray, since: int = 0) -> np.ndarray | None:
        """Unmeasured candidates one move away from one of the best measured configs (`_centres`).

        A move changes one knob (to any of its values), or steps each knob of a coupled pair one value up or down
        at once. Kernel landscapes are rugged globally but locally structured: the best configs sit next to other
        good ones. This neighbourhood is a trust region for a discrete space: it climbs to a local optimum in a few
        steps where global expected improvement keeps probing far, poorly modelled corners. The coupled steps
        connect optima that one-knob moves cannot (the same query rows per warp with twice the rows and warps).
        `since`: evaluations since the best last improved (0 with priors).
        """
        centres = self._step_centres(since)
        if not centres:
            return None
        rows = self._cat[available]
        near = np.zeros(len(available), dtype=bool)
        for i in centres:
            step = rows - self._cat[i]
            near |= (step != 0).sum(axis=1) <= 1
            for a, b in self._pairs:
                near |= pair_step(step, a, b)
        return available[near]

    def _step_centres(self, since: int) -> list[int]:
        """The centres this local step moves from (none before a success): all of `_centres`, or after `since`
        evaluations without improvement one basin's best in turn (TuRBO gives each trust region its steps)."""
        measured = sorted(((s, i) for i, s in self._scores.items() if s is not None), reverse=True)
        if not measured:
            return []
        centres = self._centres(measured)
        return [centres[(since - 1) % len(centres)]] if since else centres

    def _centres(self, measured: list[tuple[float, int]]) -> list[int]:
        """The configs the local steps move from, of the measured (score, index) pairs best first: the
        `_local_top` best with priors; without, the best of each basin: the best, then each next best that differs
        in at least `_niche` knobs from every better measured config (no better config is one knob away: a local
        optimum of what is measured), `_free_top` in all. The best few configs are usually one basin's neighbours
        of each other; a second basin's best gets its own local steps (a niche, as in TuRBO's several trust
        regions)."""
        if self.priors:
            return [i for _, i in measured[: self._local_top]]
        out: list[int] = []
        for k, (_, i) in enumerate(measured):
            if all((self._cat[i] != self._cat[j]).sum() >= self._niche for _, j in measured[:k]):
                out.append(i)
                if len(out) == self._free_top:
                    break
        return out

    # ---- state --------------------------------------------------------------------------------------------------
    def get_state(self) -> dict:
        state = super().get_state()
        m = self._model
        state.update(theta=None if m.theta is None else m.theta.tolist(), refit_at=m.refit_at, n_refits=m.n_refits,
                     design=list(self._design), warm=[(x.tolist(), k, s) for x, k, s in self._warm])  # fmt: skip
        state["compile"] = [(self.space.key(self.candidates[i]), s) for i, s in self._compile.items()]
        state["related"] = [dict(r) for r in self._related]
        return state

    def set_state(self, state: dict) -> None:
        super().set_state(state)  # replays the observations through _reset/_observe
        m = self._model
        m.theta = None if state["theta"] is None else np.asarray(state["theta"])
        m.refit_at, m.n_refits, self._design = state["refit_at"], state["n_refits"], list(state["design"])
        self._warm = [(np.asarray(x), None if k is None else tuple(k), s) for x, k, s in state["warm"]]
        self._compile = {self._index[tuple(k)]: s for k, s in state.get("compile", [])}
        self._related = [dict(r) for r in state.get("related", [])]
        self._related_warm, self._related_stale = [], bool(self._related)
