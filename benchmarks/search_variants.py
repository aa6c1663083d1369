"""Variants of the GP without priors, replayed on the recorded landscapes: does the model lack information?

The GP without priors misses issue #36's bar (b) (every seed within 2% of the best by 50 evaluations) on a few
landscapes whose best config stands alone: a config one knob from configs at 0.76-0.91 of it. On Hopper such peaks
follow occupancy: the best config fits 4 blocks on an SM by its registers and shared memory where its neighbours
fit 2. This script asks whether the model would find them with that information, and with two other changes:

- `recorded occupancy` (an oracle): the GP's inputs gain each candidate's blocks per SM, by registers and by
  shared memory (log2, normalized), computed from the `n_regs` and `shared_bytes` the landscape recorded for
  every config, measured or not. A live search could not know them before compiling; if they do not help here,
  no resource model will.
- `3-model ensemble`: the kernel hyperparameters fitted three times (the usual subset and two bootstraps of it)
  and the acquisitions read the mixture of the three posteriors (Bayesian model averaging over length scales).
- `global every 4th`: a global step every 4th evaluation without improvement instead of every 3rd.
- `copula scores` and `Yeo-Johnson scores`: the scores the GP is fitted on warped before the fit (HEBO, Cowen-Rivers
  et al. 2022; the copula of Salinas et al. 2020): each score's rank as a standard normal quantile, or a Yeo-Johnson
  power transform fitted by maximum likelihood to the log scores less the best. Either spreads the few configs near
  the best, which the log scale packs into a few hundredths, over more of the model's range.
- `plateau centres`: the local steps also move from every measured config within 1% of the best (a plateau's
  members, which the basin rule drops as one knob from a better config), in turn with the basins' best.
- `design of 20`: a space-filling design of 20 configs instead of 10 (more of the space covered before the model
  leads).
- `late polish`: the last 8 evaluations of the budget go to the best config's untried one-knob neighbours (ranked as
  every local step), no global steps: the failing runs often end one knob from the best, on a neighbour never tried.
- `local model` and `local model, 1 knob`: the local steps ranked by a GP fitted, with its own hyperparameters, on
  the measured configs within 2 knobs (at least 8 of them) or 1 knob (at least 5) of the step's centres (TuRBO's
  local model): the global GP carries a knob value's effect from the rest of the space into the best basin.
- `significant 1%` and `significant 2%`: an improvement restarts the count of evaluations without one (the global
  steps, the basins' turns) only when it beats the best by more than 1% (2%): polishing the best basin by tenths
  of a percent keeps the search there.
- `Sobol design`: the space-filling design from a scrambled Sobol sequence instead of the maximin Latin hypercube.
- `long length scales`: the kernel's length scales bounded by 1000 instead of 20, so a knob can be modelled as not
  mattering; `skip known neighbours`: that, and the local steps skip neighbours the model knows within 0.5% (twins of
  the best in such a knob, which mean + sd ranks first).
- `best basin every other turn`: while the best does not improve, every other local step moves from the best basin
  (the kept code turns through up to 5 basins, one step each).
- `no pair features`: the GP's inputs are the knobs' encoding alone: is the kept code's pair features (the sum and
  the difference of every two ordered knobs) worth its inputs (on the 8-knob short space, 28 pairs of them)?
- `niches of 3 knobs` and `7 niches of 3 knobs`: each basin's best differs from every better measured config in 3
  knobs instead of 2 (5 or 7 basins); `global steps to new basins`: global steps only to candidates 3 or more knobs
  from every basin's best; `global every 2nd`: a global step every 2nd evaluation without improvement. The failing
  runs on the H100's S=1024 D=128 full table of the short space never leave the 128-row basins: do more distinct
  basins, or global steps away from them, reach the 64-row one?
- `Matern 3/2` and `Matern 1/2`: a rougher kernel than the Matern 5/2, whose prior lets a sharp peak sit one knob
  from configs well below it.
- `LOO-calibrated sd` and `sd x2`: the GP's posterior sd scaled by the root mean square of its leave-one-out z-scores
  on the measured configs (at least 1), or doubled everywhere. On the runs that miss, the model ranks the best config
  as a sure loss (benchmarks.miss_trace): is it too sure?
- `main-effects mean`: the GP fitted on the residuals of a Bayesian linear model of every knob value's effect (an
  additive model in log TFLOP/s), so that a knob value's effect measured in one part of the space is expected in
  another: in seed 1 of the H100 fp16 D=128 causal runs that miss, 8 warps measured 1.6x 4 warps at 128 x 64, and the GP
  still ranked the best, 128 x 32 with 8 warps (its 4-warp twin measured), a sure loss.
  `main effects, global steps`: that model ranks the global steps only, the kept GP the local steps.
- `forest, global steps`: the global steps ranked by expected improvement under a tree ensemble (scikit-optimize's
  extra trees, as SMAC's random forest), which models knob interactions; the kept GP ranks the local steps.
  `global steps by turns`: the global steps take turns between the kept GP, the main-effects model and the trees.

For each landscape (the first problem key of each file of tests/data and tests/data/h200, and of the 9 files of
tests/data/heldout recorded up to 2026-11-27, HELD_OUT) and variant: median / worst evaluations to 98% of the best
over the seeds (budget + 1 = not reached), in brackets the seeds within 2% by the budget; per group the geometric
mean of the medians and the landscapes where every seed got within 2%. Prints the table and writes it (markdown) to
`--out`.

    python -m benchmarks.search_variants --jobs 2 --out docs/benchmarks/search/variants.md
    # held-out seeds, a 2% run-to-run spread, some columns only:
    python -m benchmarks.search_variants --jobs 2 --seed-start 10 --variant 'no priors' --variant 'late polish'
    python -m benchmarks.search_variants --jobs 2 --noise 0.02 --variant 'no priors' --variant 'late polish'
    # every problem of other recorded tables instead:
    python -m benchmarks.search_variants --jobs 2 --landscape tests/data/heldout/h200_short_full.parquet
"""

from __future__ import annotations

import argparse
import math
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.linalg import cho_solve
from scipy.stats import norm, rankdata
from sklearn.preprocessing import PowerTransformer

from benchmarks.replay_args import add_replay_args, check_replay_args
from benchmarks.replay_table import runs_cell, summary_cell
from benchmarks.search_table import DATA, landscapes
from raytune_attn.tune.search._model import MAX_FIT_POINTS, Model, _bounded_lbfgs, fit_subset
from raytune_attn.tune.search.gp import GPSearcher
from raytune_attn.tune.search.landscape import Landscape, _native, load_landscape, read_table
from raytune_attn.tune.search.replay import Run, run_seeds

# The held-out landscapes the variants tables were measured on (those recorded up to 2026-11-27); later recordings
# in tests/data/heldout are replayed by benchmarks.search_table (docs/benchmarks/search/heldout.md).
HELD_OUT = ("h100_bf16_d256_causal", "h100_fp16_d128_causal", "h100_fp16_d128_full_gqa", "h100_fp16_d64_causal",
            "h100_llama_exhaustive", "h200_bf16_d256_causal", "h200_fp16_d128_causal", "h200_fp16_d128_full_gqa",
            "h200_fp16_d64_causal")  # fmt: skip

# Hopper (H100 and H200, every landscape here): 64K registers, 64 warps and 228 KB of shared memory per SM, 1 KB of
# it reserved per block; registers are allocated per thread in steps of 8.
_SM_REGS, _SM_WARPS, _SM_SMEM, _BLOCK_RESERVED = 65536, 64, 233472, 1024


def blocks_per_sm(n_regs: float, shared_bytes: float, num_warps: int) -> tuple[float, float]:
    """log2 of the blocks an SM holds by registers (and warps) and by shared memory; -1 for a failed config."""
    if not (np.isfinite(n_regs) and np.isfinite(shared_bytes)):
        return -1.0, -1.0
    regs = math.ceil(max(n_regs, 1) / 8) * 8
    by_regs = min(_SM_REGS // (regs * num_warps * 32), _SM_WARPS // num_warps)
    by_smem = _SM_SMEM // (int(shared_bytes) + _BLOCK_RESERVED)
    return math.log2(max(by_regs, 0.5)), math.log2(max(by_smem, 0.5))


class RecordedOccupancy(GPSearcher):
    """The GP without priors, its inputs extended by each candidate's recorded blocks per SM (`occupancy`: config
    key -> the two log2 figures of `blocks_per_sm`; a config without them counts as failed)."""

    def __init__(self, space, *, occupancy: dict[tuple, tuple[float, float]], **kw):
        self.occupancy = occupancy  # before the base class computes the inputs of every candidate
        super().__init__(space, **kw)

    def _model_inputs(self, configs) -> np.ndarray:
        X = super()._model_inputs(configs)
        if not len(configs):
            return X
        extra = [self.occupancy.get(self.space.key(c), (-1.0, -1.0)) for c in configs]
        return np.hstack([X, (np.asarray(extra, dtype=float) + 1) / 4])  # log2 blocks in [-1, 3] -> [0, 1]


class _Mixture:
    """Equal-weight mixture of GP posteriors: the mean of the means, the variance of the mixture."""

    def __init__(self, gps):
        self.gps = gps

    def predict(self, X, return_std=False):
        mus, sds = (np.array(a) for a in zip(*(g.predict(X, return_std=True) for g in self.gps), strict=True))
        mu = mus.mean(axis=0)
        if not return_std:
            return mu
        return mu, np.sqrt(np.maximum((sds**2 + mus**2).mean(axis=0) - mu**2, 1e-12))


class _EnsembleModel(Model):
    K = 3

    def fit(self, X, y, n_fit):
        from skopt.learning import GaussianProcessRegressor

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self.refit_due(n_fit):
                self.thetas = []
                for k in range(self.K):
                    rng = np.random.default_rng((self.seed * 1_000_003 + n_fit) * 7 + k)
                    sub = fit_subset(y[:n_fit], MAX_FIT_POINTS, rng)
                    if k:  # the others on bootstraps of the same points
                        sub = np.unique(rng.choice(sub, size=len(sub), replace=True))
                    gp = GaussianProcessRegressor(kernel=self.kernel(), normalize_y=True, n_restarts_optimizer=0,
                                                  optimizer=_bounded_lbfgs, random_state=int(rng.integers(2**31)))
                    self.thetas.append(gp.fit(X[sub], y[sub]).kernel_.theta.copy())
                self.theta, self.refit_at, self.n_refits = self.thetas[0], n_fit, self.n_refits + 1
            gps = [GaussianProcessRegressor(kernel=self.kernel().clone_with_theta(t), normalize_y=True,
                                            optimizer=None).fit(X, y) for t in self.thetas]  # fmt: skip
            return _Mixture(gps)


class Ensemble(GPSearcher):
    _model_class = _EnsembleModel


class GlobalEvery4th(GPSearcher):
    _stall = 4


class _WarpedScores(GPSearcher):
    """The GP fitted on `warp` of the measured scores (at least 3); configs in flight at the warped scores' mean."""

    def _training_data(self, liars):
        X, y, n_fit = super()._training_data(liars)
        if n_fit >= 3:
            y = y.copy()
            y[:n_fit] = self.warp(y[:n_fit])
            y[n_fit:] = float(np.mean(y[:n_fit]))
        return X, y, n_fit


class CopulaScores(_WarpedScores):
    @staticmethod
    def warp(y):
        return norm.ppf((rankdata(y) - 0.5) / len(y))


class YeoJohnsonScores(_WarpedScores):
    @staticmethod
    def warp(y):
        return PowerTransformer(method="yeo-johnson").fit_transform((y - y.max())[:, None])[:, 0]


class PlateauCentres(GPSearcher):
    def _centres(self, measured):
        out = super()._centres(measured)
        near = [i for s, i in measured if s >= measured[0][0] - math.log(1.01) and i not in out]
        return (out + near)[: self._free_top + 3]


class LargerDesign(GPSearcher):
    def __init__(self, space, **kw):
        super().__init__(space, **{**kw, "n_initial": 20})


class LatePolish(GPSearcher):
    LAST = 8

    def __init__(self, space, *, budget: int, **kw):
        self.budget = budget
        super().__init__(space, **kw)

    def _late(self) -> bool:
        return len(self._obs) >= self.budget - self.LAST

    def _stalled(self, since: int) -> bool:
        return not self._late() and super()._stalled(since)

    def _neighbours(self, available, since=0):
        measured = [i for i, v in self._scores.items() if v is not None]
        if self._late() and measured:
            best = max(measured, key=lambda i: self._scores[i])
            near = available[(self._cat[available] != self._cat[best]).sum(axis=1) <= 1]
            if len(near):
                return near
        return super()._neighbours(available, since)


class LocalModel(GPSearcher):
    """Local steps ranked by a GP fitted only on the measured configs within RADIUS knobs of this step's centres
    (TuRBO's local model, Eriksson et al. 2019), with its own hyperparameters; the global GP where fewer than
    MIN_POINTS are that near. The global model carries a knob value's effect from the rest of the space into the
    best basin (8 warps measured poor elsewhere, best beside the centre)."""

    RADIUS, MIN_POINTS = 2, 8

    def _step_centres(self, since):
        self._turn = super()._step_centres(since)  # what _local_acquisition's local data is near
        return self._turn

    def _local_acquisition(self, gp, Xl):
        near = [(i, s) for i, s in self._scores.items() if s is not None and self._turn
                and min((self._cat[i] != self._cat[c]).sum() for c in self._turn) <= self.RADIUS]  # fmt: skip
        if self.priors or len(near) < self.MIN_POINTS:
            return super()._local_acquisition(gp, Xl)
        X, y = self._F[[i for i, _ in near]], np.array([s for _, s in near])
        local = Model(X.shape[1], self.seed + len(self._obs)).fit(X, y, len(y))
        mu, sd = local.predict(Xl, return_std=True)
        return mu + self._local_kappa * sd


class LocalModelOneKnob(LocalModel):
    """The local model on the centres' one-knob neighbours only (at least 5 of them measured)."""

    RADIUS, MIN_POINTS = 1, 5


class SignificantImprovement(GPSearcher):
    """An improvement resets the stall count (global steps, the basins' turns) only when it beats the best by more
    than MARGIN: polishing the best basin by tenths of a percent is no reason to keep searching only there."""

    MARGIN = 0.01

    def _since(self) -> int:
        ref, since = -math.inf, 0  # ref: the best as of the last significant improvement
        for _, v in self._obs:
            s = self._score(v)
            if s is not None and s > ref + math.log1p(self.MARGIN):
                ref, since = s, 0
            else:
                since += 1
        return since


class SignificantImprovement2(SignificantImprovement):
    MARGIN = 0.02


class SobolDesign(GPSearcher):
    """The space-filling design from a scrambled Sobol sequence (the first n of 16 points, each snapped to the nearest
    free candidate) instead of the maximin Latin hypercube."""

    def _reset(self) -> None:
        super()._reset()
        if self.priors or not self._design:
            return
        from scipy.stats import qmc

        n, d = len(self._design), self._X.shape[1]
        pts = qmc.Sobol(d, scramble=True, seed=self.seed).random(16)[:n]
        free, out = np.ones(len(self.candidates), dtype=bool), []
        for p in pts:
            j = int(np.argmin(np.where(free, ((self._X - p) ** 2).sum(axis=1), np.inf)))
            out.append(j)
            free[j] = False
        self._design = out


class _LongModel(Model):
    """Length scales up to LONG instead of 20: at 20 a knob spanning its input's range still leaves a few percent of
    the signal's sd between two configs that differ only in it, so the model never says that knob does not matter."""

    LONG = 1e3

    def kernel(self):
        kernel = super().kernel()
        kernel.k1.k2.length_scale_bounds = (kernel.k1.k2.length_scale_bounds[0], self.LONG)
        return kernel


class LongScales(GPSearcher):
    _model_class = _LongModel


class SkipKnown(LongScales):
    """With long length scales, local steps skip a neighbour the model knows within KNOWN_SD (log units: 0.5%, a
    config's timing spread within a run): a twin of the best in a knob that does not matter (V preloaded or not)
    ranks first by mean + sd, and measuring it teaches nothing."""

    KNOWN_SD = 0.005

    def _local_acquisition(self, gp, Xl):
        mu, sd = gp.predict(Xl, return_std=True)
        a = mu + self._local_kappa * sd
        known = sd < self.KNOWN_SD
        return a if known.all() else np.where(known, -np.inf, a)


class BestEveryOther(GPSearcher):
    """While the best does not improve, every other local step moves from the best basin's centre, and the steps
    between go to the other basins in turn (the kept code gives each basin one turn in five)."""

    def _step_centres(self, since: int) -> list[int]:
        centres = super()._step_centres(0)  # every basin's centre, the best first
        if not since or len(centres) < 2:
            return centres
        turn = since - 1
        return [centres[0] if turn % 2 == 0 else centres[1 + (turn // 2) % (len(centres) - 1)]]


class NoPairFeatures(GPSearcher):
    """The GP's inputs are the knobs' encoding alone, without the sum and difference of every two ordered knobs."""

    def _model_inputs(self, configs) -> np.ndarray:
        return self.encoding.transform(configs)


class Niche3(GPSearcher):
    """Each basin's best differs from every better measured config in 3 knobs, not 2: two configs of one basin that
    differ in two knobs that matter little (V preloaded, TMA) no longer take two of the basins' turns."""

    _niche = 3


class Niche3Of7(Niche3):
    """Those basins, 7 of them instead of 5."""

    _free_top = 7


class GlobalToNewBasins(GPSearcher):
    """Global steps go to candidates at least 3 knobs from every basin's best (when any is free): the failing runs on
    the H100's S=1024 D=128 full table spend their steps in the 128-row basins and never measure the 64-row one."""

    FAR = 3

    def _global_acquisition(self, gp, Xa, y, available):
        a = super()._global_acquisition(gp, Xa, y, available)
        centres = self._step_centres(0)  # every basin's best; none before a success
        if not centres:
            return a
        rows = self._cat[available]
        far = np.ones(len(available), dtype=bool)
        for i in centres:
            far &= (rows != self._cat[i]).sum(axis=1) >= self.FAR
        return np.where(far, a, -np.inf) if far.any() else a


class GlobalEvery2nd(GPSearcher):
    """A global step every 2nd evaluation without improvement instead of every 3rd."""

    _stall = 2


class _RoughModel(Model):
    """A Matern kernel of smoothness NU instead of 5/2: a rougher prior lets a lone peak sit beside configs that
    measure well below it, so the model keeps more uncertainty one knob away from what it has measured."""

    NU = 1.5

    def kernel(self):
        kernel = super().kernel()
        kernel.k1.k2.nu = self.NU
        return kernel


class _RoughestModel(_RoughModel):
    NU = 0.5


class Matern32(GPSearcher):
    """The GP's kernel a Matern 3/2 instead of 5/2."""

    _model_class = _RoughModel


class Matern12(Matern32):
    """The GP's kernel a Matern 1/2 (exponential) instead of 5/2."""

    _model_class = _RoughestModel


def loo_z(gp) -> np.ndarray:
    """Each training point's leave-one-out residual over its leave-one-out sd under the fitted GP's hyperparameters,
    in closed form from its Cholesky factor (Rasmussen and Williams 2006, eq. 5.12): alpha_i / sqrt([K^-1]_ii)."""
    k_inv = cho_solve((gp.L_, True), np.eye(len(gp.L_)))
    return np.asarray(gp.alpha_).ravel() / np.sqrt(np.diag(k_inv))


class _ScaledSd:
    """A fitted GP whose posterior standard deviation is multiplied by `scale`."""

    def __init__(self, gp, scale: float):
        self.gp, self.scale = gp, scale

    def predict(self, X, return_std=False):
        if not return_std:
            return self.gp.predict(X)
        mu, sd = self.gp.predict(X, return_std=True)
        return mu, sd * self.scale


class _LooCalibratedModel(Model):
    """The GP's posterior sd scaled by the root mean square of its leave-one-out z-scores on the measured configs
    (at least 1, at most MAX_SCALE; from MIN_POINTS of them): a model that misses its own points by more than its sd
    says is told to be that much less sure everywhere."""

    MIN_POINTS, MAX_SCALE = 5, 10.0

    def fit(self, X, y, n_fit):
        gp = super().fit(X, y, n_fit)
        z = loo_z(gp)[:n_fit]
        self.scale = float(np.clip(np.sqrt(np.mean(z**2)), 1.0, self.MAX_SCALE)) if n_fit >= self.MIN_POINTS else 1.0
        return _ScaledSd(gp, self.scale)


class LooCalibrated(GPSearcher):
    """The GP's uncertainty recalibrated by its leave-one-out errors (_LooCalibratedModel)."""

    _model_class = _LooCalibratedModel


class _WiderSdModel(Model):
    """The GP's posterior sd times SCALE everywhere: on the configs it ranks and has not measured, its errors run at
    about twice its sd (benchmarks.miss_trace) while its leave-one-out errors match it."""

    SCALE = 2.0

    def fit(self, X, y, n_fit):
        return _ScaledSd(super().fit(X, y, n_fit), self.SCALE)


class WiderSd(GPSearcher):
    _model_class = _WiderSdModel


class _MainEffectsPlusGP:
    """A Bayesian linear model of the knobs' main effects plus a GP on its residuals: the sum of the two means, the
    standard deviation of the sum (the linear model's weight uncertainty and the GP's, taken as independent)."""

    def __init__(self, linear, gp, levels):
        self.linear, self.gp, self.levels = linear, gp, levels

    def predict(self, X, return_std=False):
        Z = one_hot(X, self.levels)
        mean = self.linear.predict(Z)
        if not return_std:
            return mean + self.gp.predict(X)
        mu, sd = self.gp.predict(X, return_std=True)
        Zc = Z - self.linear.X_offset_
        var = np.maximum(np.einsum("ij,jk,ik->i", Zc, self.linear.sigma_, Zc), 0.0)
        return mean + mu, np.sqrt(sd**2 + var)


def one_hot(X: np.ndarray, levels: Sequence[np.ndarray]) -> np.ndarray:
    """Indicator columns of each encoded knob's values (`levels[j]`: the values column j takes; a column with one value
    gives none): the design matrix of the knobs' main effects."""
    cols = [np.isclose(X[:, j, None], lv[None, :]).astype(float) for j, lv in enumerate(levels) if len(lv) > 1]
    return np.hstack(cols) if cols else np.zeros((len(X), 0))


class MainEffectsMean(GPSearcher):
    """The GP models the residuals of a Bayesian ridge regression (sklearn's BayesianRidge) on indicators of every
    knob's value, fitted on the measured scores: an additive model in log TFLOP/s, so that what a knob value does in
    one part of the space (8 warps instead of 4 at 128 x 64) is expected where it has not been measured (at 128 x 32);
    the stationary kernel alone lets that effect fade a few knobs away. Both means add up; the uncertainty is the
    regression's and the GP's."""

    def __init__(self, space, **kw):
        super().__init__(space, **kw)
        self._levels = [np.unique(self._X[:, j]) for j in range(self._X.shape[1])]

    def _fit(self, X, y, n_fit):
        from sklearn.linear_model import BayesianRidge

        Z = one_hot(X[:, : self._X.shape[1]], self._levels)
        linear = BayesianRidge().fit(Z[:n_fit], y[:n_fit])
        return _MainEffectsPlusGP(linear, self._model.fit(X, y - linear.predict(Z), n_fit), self._levels)


class MainEffectsGlobal(MainEffectsMean):
    """The main-effects model ranks the global steps only; the local steps rank by the kept code's GP (a model of its
    own, fitted on the same scores with its own hyperparameters)."""

    def _reset(self) -> None:
        super()._reset()
        self._plain_model = Model(self._F.shape[1], self.seed)

    def _fit(self, X, y, n_fit):
        self._plain = self._plain_model.fit(X, y, n_fit)
        return super()._fit(X, y, n_fit)

    def _local_acquisition(self, gp, Xl):
        return super()._local_acquisition(self._plain, Xl)


class ForestGlobal(GPSearcher):
    """Global steps ranked by expected improvement under an extremely randomized trees model of the measured scores
    (scikit-optimize's ExtraTreesRegressor as its forest_minimize builds it: 100 trees, leaves of at least 3, the
    spread over the trees as the uncertainty; SMAC's random forest surrogate, Hutter et al. 2011); the local steps
    rank by the kept GP. Trees split on one knob at a time and so model the interactions (tiles with warps with
    stages) that make a lone peak, which neither the stationary kernel nor an additive model carries."""

    TREES, LEAF = 100, 3

    def _global_acquisition(self, gp, Xa, y, available):
        return super()._global_acquisition(self._forest(), Xa, y, available)

    def _forest(self):
        """The tree ensemble fitted on the knobs' encoding (not the pair features) of the scores the GP was fitted on,
        read at the GP's inputs."""
        from skopt.learning import ExtraTreesRegressor

        X, scores, _ = self._training_data(self._live.values())
        k = self._X.shape[1]
        forest = ExtraTreesRegressor(n_estimators=self.TREES, min_samples_leaf=self.LEAF, random_state=self.seed)
        return _KnobsOnly(forest.fit(X[:, :k], scores), k)


class _KnobsOnly:
    """A model fitted on the knobs' encoding, read at inputs that carry the pair features after it."""

    def __init__(self, model, k: int):
        self.model, self.k = model, k

    def predict(self, X, return_std=False):
        return self.model.predict(X[:, : self.k], return_std=return_std)


class GlobalByTurns(MainEffectsGlobal, ForestGlobal):
    """The global steps take turns between three models' expected improvement: the kept GP's, the main-effects
    model's (MainEffectsGlobal) and the tree ensemble's (ForestGlobal); the local steps rank by the kept GP. Each
    variant alone moved the misses between landscapes and seeds: do the three together cover what each misses?"""

    def _reset(self) -> None:
        super()._reset()
        self._turn = 0

    def _global_acquisition(self, gp, Xa, y, available):
        turn, self._turn = self._turn % 3, self._turn + 1
        model = self._plain if turn == 0 else gp if turn == 1 else self._forest()
        return GPSearcher._global_acquisition(self, model, Xa, y, available)


VARIANTS = {"no priors": GPSearcher, "recorded occupancy": RecordedOccupancy, "3-model ensemble": Ensemble,
            "global every 4th": GlobalEvery4th, "copula scores": CopulaScores, "Yeo-Johnson scores": YeoJohnsonScores,
            "plateau centres": PlateauCentres, "design of 20": LargerDesign, "late polish": LatePolish,
            "local model": LocalModel, "local model, 1 knob": LocalModelOneKnob,
            "significant 1%": SignificantImprovement, "significant 2%": SignificantImprovement2,
            "Sobol design": SobolDesign, "long length scales": LongScales,
            "skip known neighbours": SkipKnown, "best basin every other turn": BestEveryOther,
            "no pair features": NoPairFeatures, "niches of 3 knobs": Niche3, "7 niches of 3 knobs": Niche3Of7,
            "global steps to new basins": GlobalToNewBasins, "global every 2nd": GlobalEvery2nd,
            "Matern 3/2": Matern32, "Matern 1/2": Matern12, "LOO-calibrated sd": LooCalibrated,
            "sd x2": WiderSd, "main-effects mean": MainEffectsMean,
            "main effects, global steps": MainEffectsGlobal, "forest, global steps": ForestGlobal,
            "global steps by turns": GlobalByTurns}  # fmt: skip


def occupancy(df: pd.DataFrame, names: Sequence[str]) -> dict[tuple, tuple[float, float]]:
    """Config key over `names` -> `blocks_per_sm` of its recorded row in the landscape table `df`."""
    out = {}
    for row in df.to_dict("records"):
        out[tuple(_native(row[n]) for n in names)] = blocks_per_sm(float(row.get("n_regs", np.nan)),
                                                                    float(row.get("shared_bytes", np.nan)),
                                                                    int(row["num_warps"]))  # fmt: skip
    return out


def variant_runs(path: Path, key: str | None, variant: str, *, seeds: int, budget: int, seed_start: int = 0,
                 noise: float = 0.0, screen: bool = False) -> tuple[Landscape, list[Run]]:
    """The landscape and the runs of `variant` (the GP without priors, changed) on seeds seed_start ..
    seed_start + seeds - 1; `noise` and `screen` as in replay.run_seeds."""
    df = read_table(path, select={"problem_key": key} if key else {})
    land = load_landscape(df)
    cls = VARIANTS[variant]
    extra = {"occupancy": occupancy(df, land.space.names)} if cls is RecordedOccupancy else {}
    extra |= {"budget": budget} if cls is LatePolish else {}
    return land, run_seeds(land, "gp", budget=budget, seeds=seeds, seed_start=seed_start, noise=noise,
                           options={"priors": False, **extra}, cls=cls, screen=screen)  # fmt: skip


def measure(path: Path, key: str | None, variant: str, seeds: int, budget: int, seed_start: int = 0,
            noise: float = 0.0) -> tuple[float, int, int]:
    """(median, worst evaluations to 98% of the best, seeds within 2% by the budget) over seeds seed_start ..
    seed_start + seeds - 1; `noise`: the searcher told each value with that run-to-run spread (replay.py)."""
    land, runs = variant_runs(path, key, variant, seeds=seeds, budget=budget, seed_start=seed_start, noise=noise)
    evals = [r.evals_to(0.98 * land.best, budget) for r in runs]
    return float(np.median(evals)), max(evals), sum(e <= budget for e in evals)


def _measure(args):
    return measure(*args)


def table(groups: dict[str, list[tuple[str, dict]]], seeds: int, cols: Sequence[str], *, digits: int = 1) -> str:
    """Markdown rows of each group, then its geometric mean of the medians (`digits` decimals) and the rows where
    every seed got within 2%."""
    lines = ["| group | landscape | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for group, rows in groups.items():
        for name, res in rows:
            lines.append(f"| {group} | {name} | " + " | ".join(runs_cell(res[c], seeds) for c in cols) + " |")
        lines.append(f"| {group} | geometric mean, every seed within 2% on (of {len(rows)}) | "
                     + " | ".join(summary_cell([r[c] for _, r in rows], seeds, digits) for c in cols) + " |")
    return "\n".join(lines)


def _command(args) -> str:
    """The command line that measures the same table (the options that change a figure)."""
    cmd = f"python -m benchmarks.search_variants --seeds {args.seeds} --budget {args.budget}"
    cmd += f" --seed-start {args.seed_start}" if args.seed_start else ""
    cmd += f" --noise {args.noise:g}" if args.noise else ""
    cmd += "".join(f" --landscape {p}" for p in args.landscape or [])
    return cmd + "".join(f" --variant '{v}'" for v in args.variant or [])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_replay_args(ap, budget=50)
    ap.add_argument("--variant", action="append", choices=list(VARIANTS), help="Only these columns (repeatable).")
    ap.add_argument("--landscape", action="append", type=Path,
                    help="Replay every problem key of this recorded table instead of the default files (repeatable).")
    args = ap.parse_args(argv)
    check_replay_args(ap, args)
    cols = args.variant or list(VARIANTS)
    files = {"developed on": sorted(DATA.glob("landscape_h100_*.parquet")) + sorted((DATA / "h200").glob("*.parquet")),
             "held out": [DATA / "heldout" / f"{name}.parquet" for name in HELD_OUT]}  # fmt: skip
    missing = [str(p) for p in args.landscape or [] if not p.is_file()]
    if missing:
        ap.error(f"--landscape: no such file {', '.join(missing)}")
    files, per_file = ({"given": args.landscape}, 0) if args.landscape else (files, 1)
    cells = [(g, p, k, v) for g, paths in files.items() for p, k in landscapes(paths, per_file) for v in cols]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(_measure, [(p, k, v, args.seeds, args.budget, args.seed_start, args.noise)
                                           for _, p, k, v in cells]))  # fmt: skip
    groups: dict[str, dict[str, dict]] = {}
    for (g, p, k, v), res in zip(cells, results, strict=True):
        groups.setdefault(g, {}).setdefault(p.stem if per_file else f"{p.stem} {k}", {})[v] = res
    text = table({g: list(rows.items()) for g, rows in groups.items()}, args.seeds, cols)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(f"Replays of the recorded H100 and H200 landscapes (deterministic, no GPU), measured by "
                            f"`{_command(args)}`: "
                            f"median / worst evaluations to 98% of the best (budget + 1 = not reached), in brackets "
                            f"the seeds within 2% by the budget.\n\n{text}\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
