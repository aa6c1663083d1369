"""Gaussian-process Bayesian optimization over a discrete space, as a Ray Tune Searcher.

What makes it work on kernel-config landscapes (few configs near the best, a long tail, failures):

* Inputs: the space's encoding (encoding.py): log2 for sizes, one-hot for categories, all in [0, 1].
* Objective scale: the GP models log(TFLOP/s) (or -log(latency) for mode="min"). Configs span 2 orders of
  magnitude; in log space a 10% gain is the same step at any level, so one stationary kernel fits better.
* Scores below `floor_ratio` (10%) of the best are clipped to that floor: a 100x-slow config is not more
  informative than a 10x-slow one, and its huge log would dominate the GP's scale.
* Failures (errored, invalid, status != "ok", metric 0 or missing) are told to the GP as a score a bit below the
  worst success seen (worst - 10% of the observed range), not as 0 TFLOP/s, whose log is -inf and whose raw value
  would flatten every real difference. The GP thus learns that the region is bad; the failed config is never
  suggested again (base.py).
* Acquisition: the space is discrete and small (at most ~10^4 feasible configs), so the expected improvement is
  evaluated exactly at every unmeasured, not-in-flight candidate, instead of skopt's continuous optimizer whose
  optimum must be rounded back onto the grid (and may land on a measured or infeasible config).
* Initial design: the kernel's default config for the problem's head dim (and, given `seqlen_q`/`seqlen_k`, its
  sequence lengths: tiles no taller than the sequences, config.default_config; the nearest candidate when the
  space excludes that config) and its adjacent one-knob neighbours
  (each knob one value up or down; 8 or 9 configs in the study's space), a one-factor-at-a-time screening that
  measures every knob's effect where tuning starts; then (`screen_coupled`) the default's two-knob moves along
  each derived feature (64 rows with 4 warps from 128 with 8; 3-4 configs), which one-knob screening misses when
  both single moves are worse than the start; then its named multi-knob moves: (`screen_scale`) SCALE_UP, the
  tile twice as tall and wide with twice the warps, and (`screen_tma`) FEWER_WARPS_TMA, half the warps with TMA
  loads, each the move from a default to recorded bests that one-knob steps towards them missed; and for causal
  problems whose diagonal blocks waste an eighth of the work or more (`screen_short_causal`, given `causal` and
  `seqlen_q`), SHORT_CAUSAL_MOVE: half the rows, 16 rows a warp, one stage more; and (`screen_warp_specialized`)
  FlashAttention-3's warp-specialized layout in its forms for the head dim (`warp_specialized`; heavy-first for causal
  problems), where the space has them;
  and (`screen_more_warps`) MORE_WARPS_DEEPER, twice the warps and one stage more, where the start has more than 16
  query rows a warp.
  Latin-hypercube points in the encoded coordinates, each snapped to the nearest free candidate, make up
  `n_initial` configs when that is fewer (or when the space lacks the default). Seeded, so deterministic.
* Concurrency: configs in flight are added to the GP as "constant liar" observations (the mean of the observed
  scores), which collapses the posterior variance there, so parallel suggestions spread out.
* Bounded cost: the kernel hyperparameters (Matern 5/2 with one length scale per input, a constant and a white
  noise term; length scales >= 0.25, a quarter of a parameter's range) are optimized by maximum likelihood
  (L-BFGS, <= 60 iterations, a fixed small number of restarts) on at most `max_fit_points` observations (the best
  half and a random half of the rest), only on a schedule (every observation up to 20, every 3rd up to 60, every
  10th after) and at most `max_refits` times. In between,
  the GP is only re-conditioned on the new data with the last hyperparameters: one Cholesky of an n x n matrix,
  milliseconds at n = 200. Each suggestion's seconds are recorded in `timings` (see latency.py).
* Local steps (a trust region): after the design, each model-based pick takes the unmeasured config with the
  highest posterior mean among the moves from one of the three best measured configs. A move changes one knob,
  or steps both knobs of a coupled pair (BLOCK_M with num_warps, BLOCK_N with num_stages: the knobs of each
  derived feature in features.py) one value at once, which joins optima that one-knob moves cannot (64-row tiles
  with 4 warps and 128-row tiles with 8). Global EI over every candidate takes over once that neighbourhood is
  exhausted. On the recorded H100 landscapes, global EI alone kept probing poorly modelled corners and did no
  better than random search (docs/search.md).
* Derived inputs (opt-in, `features=("rows_per_warp", "kv_pipeline")`, see features.py): log2(BLOCK_M /
  num_warps) and log2(BLOCK_N * num_stages) as extra GP inputs. Off by default: with the screening design and
  the coupled moves, rows_per_warp changed nothing on the recorded landscapes and both together cost D=64 two
  evaluations (docs/search.md, "What was tried for issue 3").
* Compile time as a cost: each result's `compile_s` (seconds this trial spent compiling; 0 when another search
  of the sweep had built the binary) is kept per config. Once 5 cold compiles (>= CACHE_LOAD_S) are known, a ridge
  regression of log(compile seconds) on the GP inputs and their pairwise products predicts every candidate's
  compile time (`_compile_cost`), and the global EI steps rank by EI per second (Snoek et al. 2012): EI /
  (predicted compile + `bench_s`)^`cost_power`. On by default (`cost_aware`): on the recorded landscapes the
  evaluations to 98% are unchanged with budgets of 30-40 and of 100, bar one H200 landscape reached only by the
  global steps (50 evaluations instead of 48); the screening and the local steps find the best configs, and the
  global steps start only after ~50 evaluations on the H100 landscapes. Within 100 evaluations the global
  steps no longer compile the 31-107 s big-tile configs of the H100 landscapes: 23-56% fewer compile seconds
  there, 30% on the median H200 landscape (docs/search.md, "Compile time as a cost").
  The screening design and the local steps ignore the cost: penalizing slow-compiling neighbours saved little
  compile time and cost up to 13 evaluations on the H200 landscapes.
* Warm start: results of an earlier sweep (another shape or GPU) enter as extra observations. Their log scores
  are shifted by the median difference to this sweep's measurements on the configs both measured (0 before any
  overlap), and a config's own measurement replaces its warm value. With `n_initial` or more warm successes, the
  initial design (screening and Latin hypercube) is skipped.

The skopt pieces used: the Space/dimensions and their transform, skopt's GaussianProcessRegressor and its
Expected Improvement function (`skopt.acquisition.gaussian_ei`).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from skopt.acquisition import gaussian_ei, gaussian_lcb
from skopt.learning import GaussianProcessRegressor
from skopt.learning.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from raytune_attn.config import default_config
from raytune_attn.tune.search.base import DiscreteSearcher
from raytune_attn.tune.search.encoding import Encoding
from raytune_attn.tune.search.features import FEATURES, DerivedFeatures
from raytune_attn.tune.search.landscape import Landscape, read_table, table_values

CACHE_LOAD_S = 0.1  # compile seconds below this are a cache load or a shared build; every cold compile took > 0.3 s
MIN_COLD_COMPILES = 5  # cold compile times known before the compile-time model is used
COST_RIDGE = 0.3  # the compile-time model's ridge penalty (inputs in [0, 1])
# Moves of several knobs at once that the design screens from the start, because on recorded landscapes each
# one-knob step towards them measured worse than the start (docs/search.md). +1 / -1: the knob's next value up / down
# in the space's order; a value: set the knob to it.
# The scale-up move: the program's tile twice as tall and as wide, with twice the warps, so each warp keeps its
# query rows and does twice the K/V work per step. The default is sized to fit every GPU's shared memory; where a GPU
# has more, the better configs are often this one move up. From the D=256 default (64 x 32, 4 warps) it is the best
# config of every recorded D=256 landscape (128 x 64, 8 warps) ("The scale-up move").
SCALE_UP = {"BLOCK_M": 1, "BLOCK_N": 1, "num_warps": 1}
# Fewer warps with tensor-descriptor (TMA) loads: half the warps double each thread's rows of the accumulator, and
# TMA takes the K/V address arithmetic off the registers. At D=128 the default tile (128 x 64) with 4 warps spills
# 32 registers without TMA (0.74 of the best) and 14 with it, where it measured 1.5-5.5% faster than every winner of
# run 13's D=128 sweeps from S=4096 on ("Fewer warps with TMA").
FEWER_WARPS_TMA = {"num_warps": -1, "USE_TMA": True}
# The short causal move: half the query rows per tile, 16 rows a warp, one pipeline stage more. A causal tile's
# diagonal key blocks compute about BLOCK_M x BLOCK_M / 2 scores that the mask throws away, so the wasted work is
# BLOCK_M / Sq of the useful work (25% for 128-row tiles at 512 tokens); half as tall a tile wastes half as much, and
# its shorter key loops per program want the deeper pipeline. Screened for causal problems whose start wastes at least
# SHORT_CAUSAL_WASTE. On the H200's short causal landscapes (run 18) the best configs are 64-row tiles with 4 warps
# and 2-3 stages, 1.22-1.35x the 128-row start, which one-knob and coupled steps reached within 24 trials on one of
# four cells ("The short causal move"). Where the space has the heavy-first order (REVERSE_M), the move takes it: a
# short causal grid is a few waves of tiles whose work grows with their row, and launching the longest first leaves
# the short diagonal ones to fill the last wave. Measured in the same sweeps (runs 21-22, both grids), the move's
# configs ran 1.05-1.14x with it at D=64 and 1.02 at D=128 (S 512-1024); from S=4096 on it costs 1-13% (the move is
# screened only below, see SHORT_CAUSAL_WASTE).
SHORT_CAUSAL_MOVE = {"BLOCK_M": -1, "num_stages": 1}
# More warps, a deeper pipeline: twice the warps (half the query rows each) and one pipeline stage more. Where a key
# block is little math (D=64: a 64-wide dot a block), the tile waits on its K/V loads; twice the warps and one more
# stage keep more of them in flight. From the D=64 default (128 x 64, 4 warps, 2 stages) it is the best config of
# the H200's D=64 full S=4096 landscape (8 warps, 3 stages; run 13) and of the H100's D=64 full S=1024 one (8 warps,
# 4 stages: that space has no 3), and one stage further (8 warps, 4 stages) measured 1.11x the tuned winners of the
# D=64 causal S=4096 and 8192 cells of both grids (run 22), which no 24-trial search had tried: each one-knob step
# towards it measured 0.86-0.93 of the best. Screened only where the start has more than MORE_WARPS_MIN_ROWS query
# rows a warp (the D=64 start's 32): at 8 rows a warp (the D=256 start's 16 halved) a tile measured 0.32-0.39 of the
# best (config.py).
MORE_WARPS_DEEPER = {"num_warps": 1, "num_stages": 1}
MORE_WARPS_MIN_ROWS = 16
# The warp-specialized layout (FlashAttention-3's): 128-row tiles written for one warp group, which Triton's Hopper
# pass turns into a producer warp group issuing the TMA copies and two consumer groups of 64 rows; 2 stages. It shares
# no knob value with the starts, so neither one-knob nor coupled steps reach it: screened where the space has it
# (Hopper), in the form that measured best for the head dim. At D=256, 64-key blocks on the plain grid (128-key
# blocks, or the persistent grid's extra buffers, overflow shared memory): 1.06-1.21x the tuned winners of all eight
# D=256 cells of the H200's bf16 grid (run 20). Up to WIDE_KEYS_MAX_HEAD_DIM, 128-key blocks on the persistent grid:
# with whole key blocks unmasked, the winners of five of six full-mask D=128 cells of run 21's bf16 grid, 1.06-1.28x
# run 20's (across runs), and persistence is worth 1.1-1.4x up to S=2048 there ("The warp-specialized layout").
# Causal problems take the heavy-first order (REVERSE_M) where the space has it. With the persistent grid dealing the
# longest-first tiles in a snake, the D=128 form with it ran 1.00-1.02x the tuned winners at S 2048-8192 (that form
# without it, with V preload) and 1.04x at S=16384 (a split loop) (H200, bf16, same run; run 23); at S 512 and 1024 the
# tuned searches already ended on it (run 22). The D=256 form ran 1.007x with it at S 512-1024 (run 22). V loaded
# before the softmax (PRE_LOAD_V): of 86 pairs of warp-specialized configs that differ only in it, measured in the same
# sweeps (the H200's D=128 and D=256 cells of runs 22-24, both grids), it was faster in 72, geometric mean 1.022x
# (0.93-1.14); one search of run 24 screened the layout without it and ended there on 5 of the 6 causal D=256 cells,
# 0.96-0.99x run 23's searches, which had found it. At D=256 the persistent grid with one Q buffer (ONE_Q_BUFFER) is
# screened beside the plain grid: it fits in shared memory only so, and against run 24's tuned winners (H200, bf16,
# same run; run 25) it ran 1.03-1.10x on five of the twelve cells and 0.94-0.96x on five, so neither form is the start
# for every cell. The sweeps that screened both ended on the persistent form on 8-9 of the 12 cells.
WARP_SPECIALIZED = {"WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False, "num_warps": 4, "num_stages": 2,
                    "maxnreg": 0, "BLOCK_M": 128, "BLOCK_N": 64, "PRE_LOAD_V": True}
WIDE_KEYS_MAX_HEAD_DIM = 128
SHORT_CAUSAL_ROWS_PER_WARP = 16
SHORT_CAUSAL_WASTE = 1 / 8
RUNNER_UPS = 3  # likely_next: configs after the pick a sweep compiles ahead (speculative builds cost only idle cores)


def warp_specialized(head_dim: int) -> list[dict]:
    """The forms of WARP_SPECIALIZED screened for this head dim: the key block and grids that measured best."""
    if head_dim <= WIDE_KEYS_MAX_HEAD_DIM:
        return [{**WARP_SPECIALIZED, "BLOCK_N": 128, "PERSISTENT": True}]
    return [dict(WARP_SPECIALIZED), {**WARP_SPECIALIZED, "PERSISTENT": True, "ONE_Q_BUFFER": True}]


class GPSearcher(DiscreteSearcher):
    name = "gp"

    def __init__(
        self,
        space,
        *,
        n_initial: int = 6,
        acq: str = "EI",
        xi: float = 0.01,
        kappa: float = 1.0,
        fail_margin: float = 0.1,
        max_refits: int = 40,
        n_restarts: int = 1,
        min_length_scale: float = 0.25,
        max_fit_points: int = 60,
        floor_ratio: float = 0.1,
        local_every: int = 1,
        local_knobs: int = 1,
        seed_default: bool = True,
        screen_default: bool = True,
        screen_coupled: bool = True,
        screen_scale: bool = True,
        screen_tma: bool = True,
        screen_short_causal: bool = True,
        screen_warp_specialized: bool = True,
        screen_more_warps: bool = True,
        local_top: int = 3,
        coupled: Sequence[tuple[str, str]] | None = None,
        features: tuple[str, ...] | list[str] = (),
        head_dim: int = 128,
        seqlen_q: int | None = None,
        seqlen_k: int | None = None,
        causal: bool = False,
        warm_start: Any = None,
        cost_aware: bool = True,
        cost_power: float = 1.0,
        bench_s: float = 0.2,
        **kw,
    ):
        super().__init__(space, **kw)
        if acq not in ("EI", "LCB"):
            raise ValueError(f"acq must be 'EI' or 'LCB', got {acq!r}")
        self.n_initial, self.acq, self.xi, self.kappa = int(n_initial), acq, float(xi), float(kappa)
        self.fail_margin, self.max_refits, self.n_restarts = float(fail_margin), int(max_refits), int(n_restarts)
        self.min_length_scale, self.max_fit_points = float(min_length_scale), int(max_fit_points)
        self.floor_ratio = float(floor_ratio)
        self.encoding = Encoding(self.space)
        self.features = DerivedFeatures(self.space, self.candidates, tuple(features))
        self._X_design = self.encoding.transform(self.candidates)  # the initial design spreads over the knobs
        self._X = self._inputs(self.candidates)
        # Each candidate as value indices, one column per knob: "differs in one knob" without encoding details.
        self._cat = np.array([[p.values.index(c[p.name]) for p in self.space.params] for c in self.candidates])
        self.local_every, self.local_knobs = int(local_every), int(local_knobs)
        self.seed_default, self.screen_default, self.head_dim = bool(seed_default), bool(screen_default), int(head_dim)
        self.screen_coupled = bool(screen_coupled)
        self._screen_moves = [m for m, on in ((SCALE_UP, screen_scale), (FEWER_WARPS_TMA, screen_tma)) if on]
        self.local_top = int(local_top)
        # The problem's (maximum) sequence lengths: the design starts from the length-aware default (config.py).
        self.seqlen_q, self.seqlen_k = seqlen_q, seqlen_k
        self.causal, self.screen_short_causal = bool(causal), bool(screen_short_causal)
        self.screen_warp_specialized = bool(screen_warp_specialized)
        self.screen_more_warps = bool(screen_more_warps)
        # Coupled knob pairs (default: the two knobs of each derived feature, features.py) as column pairs of _cat.
        names = [p.name for p in self.space.params]
        pairs = [k for k, _ in FEATURES.values()] if coupled is None else [tuple(pair) for pair in coupled]
        self._pairs = [(names.index(a), names.index(b)) for a, b in pairs if a in names and b in names]
        self._warm: list[tuple[np.ndarray, tuple | None, float | None]] = []  # (x, candidate key or None, score)
        self.timings: list[tuple[int, float]] = []  # (observations told, seconds) per model-based suggestion
        self.cost_aware, self.cost_power, self.bench_s = bool(cost_aware), float(cost_power), float(bench_s)
        self._reset()
        if warm_start is not None:
            self.add_warm_start(warm_start)

    def _reset(self) -> None:
        self._scores: dict[int, float | None] = {}  # candidate index -> score (None = failed)
        self._theta: np.ndarray | None = None  # last optimized kernel hyperparameters (log-transformed)
        self._refit_at, self._n_refits = -1, 0
        self._design = self._initial_design()
        self._compile: dict[int, float] = {}  # candidate index -> compile seconds its result reported (0 = shared)
        self._runner_ups: list[int] = []  # the last model-based pick's next best candidates (likely_next)

    def _inputs(self, configs) -> np.ndarray:
        """GP inputs: the space's encoding, then the derived features (features.py)."""
        return np.hstack([self.encoding.transform(configs), self.features.transform(configs)])

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

    # ---- initial design -----------------------------------------------------------------------------------------
    def _initial_design(self) -> list[int]:
        """The kernel's default config for this head dim (when the space holds it) and its adjacent one-knob
        neighbours, in a seeded order; then Latin hypercube points in [0, 1]^d up to `n_initial` configs, each
        snapped to the nearest candidate not chosen yet.

        The default is what a user runs without tuning, so the search must beat it anyway; measuring it first
        also starts the local steps from a config that is good on every GPU we measured instead of from a random
        corner. Its adjacent neighbours (each knob one value up or down, the others at the default) are a
        one-factor-at-a-time screening design: they measure every knob's local effect, so the first model-based
        picks combine the moves that helped instead of guessing from a few random points (on the recorded H100
        landscapes, a GP fitted to the default and 14 random configs ranked the best config only 27th and 74th of
        ~435 by its mean; docs/search.md).
        """
        n = min(self.n_initial, len(self.candidates))
        rng = np.random.default_rng(self.seed)
        d = self._X_design.shape[1]
        if n == 0 or d == 0:
            return list(range(n))
        chosen: list[int] = []
        free = np.ones(len(self.candidates), dtype=bool)
        if self.seed_default:
            default = default_config(self.head_dim, self.seqlen_q, self.seqlen_k)
            start = {p.name: default.get(p.name) for p in self.space.params}
            key = self._key_or_none(start)
            i0 = self._index.get(key) if key is not None else None
            if i0 is None and self.seqlen_q and all(start[p.name] in p.values for p in self.space.params):
                # The length-aware default may break a constraint of the space (BLOCK_M >= BLOCK_N): start from the
                # candidate nearest to it in the encoded inputs instead.
                i0 = int(np.argmin(((self._X_design - self.encoding.transform([start])[0]) ** 2).sum(axis=1)))
            if i0 is not None:
                chosen.append(i0)
                if self.screen_default:
                    step = self._cat - self._cat[i0]
                    adjacent = np.flatnonzero(((step != 0).sum(axis=1) == 1) & (np.abs(step).max(axis=1) == 1))
                    chosen += [int(j) for j in rng.permutation(adjacent)]
                    if self.screen_coupled:
                        chosen += self._coupled_screen(i0, step, rng)
                    moved = [self._moved(i0, m) for m in self._screen_moves]
                    if self.screen_short_causal:
                        moved.append(self._short_causal(i0))
                    if self.screen_more_warps:
                        moved.append(self._more_warps(i0))
                    if self.screen_warp_specialized:
                        moved += [self._heavy_first(i0, {}, form, self.causal)
                                  for form in warp_specialized(self.head_dim)]
                    chosen += [j for j in moved if j is not None and j not in chosen]
                free[chosen] = False
        n = max(n - len(chosen), 0)
        strata = np.stack([rng.permutation(n) for _ in range(d)], axis=1)
        pts = (strata + rng.random((n, d))) / n
        for p in pts:
            dist = np.where(free, ((self._X_design - p) ** 2).sum(axis=1), np.inf)
            j = int(np.argmin(dist))
            chosen.append(j)
            free[j] = False
        return chosen

    def _short_causal(self, i0: int) -> int | None:
        """SHORT_CAUSAL_MOVE from the start i0, with num_warps set to SHORT_CAUSAL_ROWS_PER_WARP rows a warp, when the
        problem is causal and the start's diagonal blocks waste at least SHORT_CAUSAL_WASTE of the work (BLOCK_M /
        Sq); heavy-first (REVERSE_M) where the space has that config. None otherwise or when the move leaves the
        space."""
        start = self.candidates[i0]
        rows = start.get("BLOCK_M")
        if not (self.causal and self.seqlen_q and rows and rows >= SHORT_CAUSAL_WASTE * self.seqlen_q):
            return None
        absolute = {"num_warps": max(1, rows // 2 // SHORT_CAUSAL_ROWS_PER_WARP)}
        return self._heavy_first(i0, SHORT_CAUSAL_MOVE, absolute)

    def _heavy_first(self, i0: int, move: dict, absolute: dict, heavy_first: bool = True) -> int | None:
        """_moved, heavy-first (REVERSE_M) when asked and the space has that config; otherwise the plain move."""
        j = self._moved(i0, move, {**absolute, "REVERSE_M": True}) if heavy_first else None
        return j if j is not None else self._moved(i0, move, absolute)

    def _more_warps(self, i0: int) -> int | None:
        """MORE_WARPS_DEEPER from the start i0 when the start has more than MORE_WARPS_MIN_ROWS query rows a warp;
        None otherwise or when the move leaves the space."""
        start = self.candidates[i0]
        rows, warps = start.get("BLOCK_M"), start.get("num_warps")
        if not (rows and warps and rows > MORE_WARPS_MIN_ROWS * warps):
            return None
        return self._moved(i0, MORE_WARPS_DEEPER)

    def _moved(self, i: int, move: dict, absolute: dict | None = None) -> int | None:
        """The candidate that `move` (see SCALE_UP) makes of candidate i, with the knobs of `absolute` set to its
        values, or None when that is not in the space."""
        fixed = set(absolute or ())
        move = {**move, **(absolute or {})}
        cfg = dict(self.candidates[i])
        for p in self.space.params:
            if p.name not in move:
                continue
            change = move[p.name]
            if p.name in fixed:  # a value the moved config needs, whatever the start has
                if change not in p.values:
                    return None
                cfg[p.name] = change
                continue
            if isinstance(change, bool) or not isinstance(change, int):
                if change not in p.values or cfg[p.name] == change:
                    return None
                cfg[p.name] = change
                continue
            k = p.values.index(cfg[p.name]) + change
            if not 0 <= k < len(p.values):
                return None
            cfg[p.name] = p.values[k]
        if any(name not in cfg for name in move):
            return None
        key = self._key_or_none(cfg)
        return self._index.get(key) if key is not None else None

    def _coupled_screen(self, i0: int, step: np.ndarray, rng: np.random.Generator) -> list[int]:
        """The start's two-knob moves along each derived feature's iso-line (features.py): both knobs of a coupled
        pair one value each, in the directions that keep the feature nearest its value at the start. From
        128 x 64 tiles with 8 warps and 2 stages: 64 rows with 4 warps (16 rows per warp, as at the start), and
        BLOCK_N 32 with 4 stages or 128 with 1 (128 K/V rows in flight). Each one-knob move off the iso-line can
        be worse than the start while the two-knob move is the best config: on the H200's b16 s1024 Llama
        landscape 64 rows with 8 warps measure 0.76 of the best and 128 with 4 warps 0.83, 64 with 4 warps 1.00,
        and the local steps, climbing from the best screened configs, never got there (docs/search.md)."""
        names = [p.name for p in self.space.params]
        out: list[int] = []
        for (ka, kb), f in FEATURES.values():
            if ka not in names or kb not in names:
                continue
            moves = np.flatnonzero(_pair_step(step, names.index(ka), names.index(kb)))
            if not len(moves):
                continue
            f0 = f(self.candidates[i0])
            dev = np.array([abs(f(self.candidates[j]) - f0) for j in moves])
            out += [int(j) for j in rng.permutation(moves[dev <= dev.min() + 1e-9])]
        return out

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

        `source`: a Parquet path or DataFrame (one row per trial or config; see landscape.py), a Landscape, or an
        iterable of (config, value) pairs with value None for a failed config.
        """
        pairs = list(self._warm_pairs(source, objective or self.metric, params))
        added = 0
        for cfg, value in pairs:
            try:
                x = self._inputs([cfg])[0]
            except (KeyError, ValueError):
                continue  # a knob value outside this space
            if not self.space.contains(cfg):
                continue
            self._warm.append((x, self._key_or_none(cfg), self._score(value)))
            added += 1
        if sum(s is not None for _, _, s in self._warm) >= self.n_initial:
            self._design = []
        return added

    def _warm_pairs(self, source: Any, objective: str, params) -> Iterable[tuple[dict, float | None]]:
        if isinstance(source, Landscape):
            for key, v in source.values.items():
                yield source.space.to_config(key), (None if not np.isfinite(v) else float(v))
            return
        if isinstance(source, (str, Path, pd.DataFrame)):
            df = read_table(source)
            names = list(params or self.space.names)
            for name in names:
                if name not in df.columns:
                    default = default_config().get(name, False)
                    if default not in next(p.values for p in self.space.params if p.name == name):
                        raise ValueError(f"warm-start table lacks column {name!r} and its default is not in space")
                    df[name] = default
            for key, v in table_values(df, names, objective).items():
                yield dict(zip(names, key, strict=True)), (None if not np.isfinite(v) else float(v))
            return
        for cfg, v in source:
            yield dict(cfg), v

    # ---- the model ----------------------------------------------------------------------------------------------
    def _training_data(self, liars: Iterable[int]) -> tuple[np.ndarray, np.ndarray, int]:
        """Inputs and scores: measured configs, warm-start points and liars; failures imputed; + real count."""
        real = list(self._scores.items())
        succ = np.array([s for _, s in real if s is not None])
        offset = 0.0
        overlap = [self._scores[self._index[k]] - s for _, k, s in self._warm
                   if k in self._index and s is not None and self._scores.get(self._index[k]) is not None]  # fmt: skip
        if overlap:
            offset = float(np.median(overlap))
        warm = [(x, s + offset if s is not None else None) for x, k, s in self._warm
                if k not in self._index or self._index[k] not in self._scores]  # fmt: skip
        all_succ = np.concatenate([succ, [s for _, s in warm if s is not None]])
        if all_succ.size:
            # Configs below `floor_ratio` of the best are all just "bad": clipping them keeps a few 100x-slow
            # outliers from dominating the GP's variance and squashing the differences among good configs.
            floor = float(all_succ.max()) + math.log(self.floor_ratio)
            lo, hi = max(float(all_succ.min()), floor), float(all_succ.max())
            fail = lo - self.fail_margin * max(hi - lo, 0.1)
        else:
            floor, fail = -math.inf, 0.0
        clip = lambda s: fail if s is None else max(s, floor)  # noqa: E731
        X = [self._X[i] for i, _ in real] + [x for x, _ in warm]
        y = [clip(s) for _, s in real] + [clip(s) for _, s in warm]
        n_fit = len(y)
        liars = list(liars)
        if liars:
            lie = float(np.mean(y)) if y else 0.0
            X += [self._X[i] for i in liars]
            y += [lie] * len(liars)
        return np.asarray(X, dtype=float).reshape(len(y), self._X.shape[1]), np.asarray(y, dtype=float), n_fit

    def _refit_due(self, n: int) -> bool:
        if self._theta is None:
            return True
        if self._n_refits >= self.max_refits:
            return False
        step = 1 if n <= 20 else 3 if n <= 60 else 10
        return n - self._refit_at >= step

    def _kernel(self):
        d = self._X.shape[1]
        return ConstantKernel(1.0, (1e-2, 1e2)) * Matern(
            length_scale=np.ones(d), length_scale_bounds=(self.min_length_scale, 20.0), nu=2.5
        ) + WhiteKernel(1e-2, (1e-6, 0.5))

    def _fit(self, X: np.ndarray, y: np.ndarray, n_fit: int) -> GaussianProcessRegressor:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn's ConvergenceWarning at bounds is expected and harmless
            if self._refit_due(n_fit):
                # Hyperparameters from the real and warm data only (liars would bias the noise estimate).
                rng = np.random.default_rng(self.seed * 1_000_003 + n_fit)
                sub = _fit_subset(y[:n_fit], self.max_fit_points, rng)
                gp = GaussianProcessRegressor(
                    kernel=self._kernel(), normalize_y=True, n_restarts_optimizer=self.n_restarts,
                    optimizer=_bounded_lbfgs, random_state=int(rng.integers(2**31)),
                )  # fmt: skip
                gp.fit(X[sub], y[sub])
                self._theta, self._refit_at = gp.kernel_.theta.copy(), n_fit
                self._n_refits += 1
            kernel = self._kernel().clone_with_theta(self._theta)
            gp = GaussianProcessRegressor(kernel=kernel, normalize_y=True, optimizer=None)
            gp.fit(X, y)
            return gp

    # ---- compile cost -------------------------------------------------------------------------------------------
    def _compile_cost(self, idx: np.ndarray) -> np.ndarray | None:
        """Predicted cold compile seconds of the candidates `idx`; None before MIN_COLD_COMPILES are known.

        A ridge regression of log(compile seconds) on the GP inputs and all their pairwise products (a quadratic
        model: the slow compiles are the big tiles, where BLOCK_M x BLOCK_N spills registers, an interaction).
        Log scale: compile times span 0.4 s to 107 s on the recorded H100 landscapes, and 1 s vs 2 s matters as
        much as 50 s vs 100 s. Only cold compiles count: a time below CACHE_LOAD_S is a binary built for another
        search of the sweep (reported as 0) or a cache load, which says nothing about what compiling the config
        costs. No hyperparameters to fit: one small least-squares solve, deterministic, no state beyond the times.
        Along the GP's own runs on the recorded landscapes it ranked the unmeasured configs' compile times with a
        Spearman correlation of 0.81-0.92 on the H100 and ~0.45 on the H200 (whose times were taken by ~33
        parallel compiles); a second GP dropped to 0.41 for stretches of the D=128 run (hyperparameter fits that
        made inputs irrelevant), a linear model to 0.59 (docs/search.md).
        """
        cold = [(i, s) for i, s in self._compile.items() if s >= CACHE_LOAD_S]
        if len(cold) < MIN_COLD_COMPILES:
            return None
        X, y = _quadratic(self._X[[i for i, _ in cold]]), np.log([s for _, s in cold])
        mx, my = X.mean(axis=0), y.mean()
        Xc = X - mx
        w = np.linalg.solve(Xc.T @ Xc + COST_RIDGE * np.eye(X.shape[1]), Xc.T @ (y - my))
        return np.exp((_quadratic(self._X[idx]) - mx) @ w + my)

    # ---- choosing -----------------------------------------------------------------------------------------------
    def _pick(self, available: np.ndarray) -> int:
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
        local = self._neighbours(available) if self.local_every and len(self._obs) % self.local_every == 0 else None
        if local is not None and len(local):
            # Local step: the neighbour the model predicts best (exploitation; EI's exploration is the global
            # steps' job).
            order = np.argsort(-gp.predict(self._X[local]), kind="stable")
            self._runner_ups = [int(local[k]) for k in order[1:1 + RUNNER_UPS]]
            self.timings.append((len(self._obs), time.perf_counter() - t0))
            return int(local[order[0]])
        Xa = self._X[available]
        # skopt's acquisitions minimize: give them the negated scores' model via y_opt = -best.
        if self.acq == "EI" and np.isfinite(y[:n_fit]).any() and y[:n_fit].std() > 0:
            best = float(y[:n_fit].max())
            a = gaussian_ei(Xa, _Negated(gp), y_opt=-best, xi=self.xi * float(y[:n_fit].std()))
            if not np.any(a > 0):
                a = gp.predict(Xa, return_std=True)[1]  # nothing expected to improve: explore the least known
            cost = self._compile_cost(available) if self.cost_aware else None
            if cost is not None:
                # Expected improvement per second (Snoek et al. 2012): a trial costs its compile, as the model
                # predicts it, plus the benchmark. A 100 s compile must promise ~100x the improvement of a 1 s one.
                a = a / (cost + self.bench_s) ** self.cost_power
        else:
            a = -gaussian_lcb(Xa, _Negated(gp), kappa=self.kappa)
        # Ties (e.g. never-seen categories) go to the earliest candidate: deterministic.
        order = np.argsort(-a, kind="stable")
        self._runner_ups = [int(available[k]) for k in order[1:1 + RUNNER_UPS]]
        self.timings.append((len(self._obs), time.perf_counter() - t0))
        return int(available[order[0]])

    def _neighbours(self, available: np.ndarray) -> np.ndarray | None:
        """Unmeasured candidates one move away from one of the `local_top` best measured configs.

        A move changes one knob (to any of its values), or steps each knob of a coupled pair (BLOCK_M with
        num_warps, BLOCK_N with num_stages) one value up or down at once. Kernel landscapes are rugged globally
        but locally structured: the best configs sit next to other good ones (one more stage, twice the warps).
        This neighbourhood is a trust region for a discrete space: it climbs to a local optimum in a few steps
        where global expected improvement keeps probing far, poorly modelled corners. The coupled moves connect
        optima that one-knob moves cannot: 64 x 64 tiles with 4 warps and 128 x 64 with 8 hold the same 16 query
        rows per warp, and on the recorded H100 landscapes each is a one-knob local optimum (128-row tiles with 4
        warps use all 255 registers per thread; 64-row tiles with 8 warps run at half the speed).
        """
        measured = sorted(((s, i) for i, s in self._scores.items() if s is not None), reverse=True)
        if not measured:
            return None
        rows = self._cat[available]
        near = np.zeros(len(available), dtype=bool)
        for _, i in measured[: self.local_top]:
            step = rows - self._cat[i]
            changed = (step != 0).sum(axis=1)
            near |= changed <= self.local_knobs
            for a, b in self._pairs:
                near |= _pair_step(step, a, b)
        return available[near]

    # ---- state --------------------------------------------------------------------------------------------------
    def get_state(self) -> dict:
        state = super().get_state()
        state.update(theta=None if self._theta is None else self._theta.tolist(), refit_at=self._refit_at,
                     n_refits=self._n_refits, design=list(self._design), warm=[(x.tolist(), k, s) for x, k, s in
                     self._warm])  # fmt: skip
        state["compile"] = [(self.space.key(self.candidates[i]), s) for i, s in self._compile.items()]
        return state

    def set_state(self, state: dict) -> None:
        super().set_state(state)  # replays the observations through _reset/_observe
        self._theta = None if state["theta"] is None else np.asarray(state["theta"])
        self._refit_at, self._n_refits, self._design = state["refit_at"], state["n_refits"], list(state["design"])
        self._warm = [(np.asarray(x), None if k is None else tuple(k), s) for x, k, s in state["warm"]]
        self._compile = {self._index[tuple(k)]: s for k, s in state.get("compile", [])}


def _pair_step(step: np.ndarray, a: int, b: int) -> np.ndarray:
    """Rows of `step` (value-index differences, one column per knob) that move knobs a and b one value each and
    no other knob: a coupled move."""
    return ((step != 0).sum(axis=1) == 2) & (np.abs(step[:, a]) == 1) & (np.abs(step[:, b]) == 1)


def _quadratic(X: np.ndarray) -> np.ndarray:
    """The columns of X and all their pairwise products (squares included): a quadratic model's inputs."""
    i, j = np.triu_indices(X.shape[1])
    return np.hstack([X, X[:, i] * X[:, j]])


def _fit_subset(y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of at most k observations for the hyperparameter fit: the best half, and a random half of the rest.

    The likelihood's gradient costs O(n^3 + n^2 d) per step; 60 points keep a refit well under a second while
    keeping the region that matters (the best configs) and the overall trend (a sample of the rest).
    """
    n = len(y)
    if n <= k:
        return np.arange(n)
    order = np.argsort(-y, kind="stable")
    top, rest = order[: k // 2], order[k // 2 :]
    return np.sort(np.concatenate([top, rng.choice(rest, size=k - k // 2, replace=False)]))


def _bounded_lbfgs(obj_func, initial_theta, bounds):
    """sklearn's default optimizer (L-BFGS-B on the log-marginal likelihood) with at most 60 iterations."""
    from scipy.optimize import minimize

    r = minimize(obj_func, initial_theta, method="L-BFGS-B", jac=True, bounds=bounds, options={"maxiter": 60})
    return r.x, r.fun


class _Negated:
    """A model predicting -f, for skopt's minimizing acquisition functions."""

    def __init__(self, gp):
        self.gp = gp

    def predict(self, X, return_std=False):
        if return_std:
            mu, sd = self.gp.predict(X, return_std=True)
            return -mu, sd
        return -self.gp.predict(X)
