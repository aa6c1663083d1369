"""The GP model: a Matern 5/2 kernel over the encoded inputs, fitted by maximum likelihood on a schedule.

Kernel: a constant times a Matern 5/2 with one length scale per input (at least a quarter of an input's range, so
no input is modelled as noise on the few points a search has), plus white noise. Hyperparameters are optimized
(L-BFGS, at most 60 iterations, one restart) on at most MAX_FIT_POINTS observations (the best half and a random
half of the rest), every observation up to 20, every 3rd up to 60 and every 10th after, at most MAX_REFITS times.
In between, the GP is only re-conditioned on the new data with the last hyperparameters: one Cholesky of an n x n
matrix, milliseconds at n = 200.
"""

from __future__ import annotations

import warnings

import numpy as np
from skopt.learning import GaussianProcessRegressor
from skopt.learning.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

MIN_LENGTH_SCALE = 0.25
MAX_FIT_POINTS = 60
MAX_REFITS = 40
N_RESTARTS = 1


class Model:
    """The hyperparameters fitted so far and when; `fit` returns a GP conditioned on all the data."""

    def __init__(self, n_dims: int, seed: int):
        self.n_dims, self.seed = n_dims, seed
        self.theta: np.ndarray | None = None  # last optimized kernel hyperparameters (log-transformed)
        self.refit_at, self.n_refits = -1, 0

    def kernel(self):
        return ConstantKernel(1.0, (1e-2, 1e2)) * Matern(
            length_scale=np.ones(self.n_dims), length_scale_bounds=(MIN_LENGTH_SCALE, 20.0), nu=2.5
        ) + WhiteKernel(1e-2, (1e-6, 0.5))

    def refit_due(self, n: int) -> bool:
        if self.theta is None:
            return True
        if self.n_refits >= MAX_REFITS:
            return False
        step = 1 if n <= 20 else 3 if n <= 60 else 10
        return n - self.refit_at >= step

    def fit(self, X: np.ndarray, y: np.ndarray, n_fit: int) -> GaussianProcessRegressor:
        """A GP on all rows of X, y; hyperparameters refitted (when due) on the first `n_fit` rows only (the rest
        are constant liars, which would bias the noise estimate)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn's ConvergenceWarning at bounds is expected and harmless
            if self.refit_due(n_fit):
                rng = np.random.default_rng(self.seed * 1_000_003 + n_fit)
                sub = fit_subset(y[:n_fit], MAX_FIT_POINTS, rng)
                gp = GaussianProcessRegressor(
                    kernel=self.kernel(), normalize_y=True, n_restarts_optimizer=N_RESTARTS,
                    optimizer=_bounded_lbfgs, random_state=int(rng.integers(2**31)),
                )  # fmt: skip
                gp.fit(X[sub], y[sub])
                self.theta, self.refit_at = gp.kernel_.theta.copy(), n_fit
                self.n_refits += 1
            gp = GaussianProcessRegressor(kernel=self.kernel().clone_with_theta(self.theta), normalize_y=True,
                                          optimizer=None)  # fmt: skip
            gp.fit(X, y)
            return gp


def fit_subset(y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
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


class Negated:
    """A model predicting -f, for skopt's minimizing acquisition functions."""

    def __init__(self, gp):
        self.gp = gp

    def predict(self, X, return_std=False):
        if return_std:
            mu, sd = self.gp.predict(X, return_std=True)
            return -mu, sd
        return -self.gp.predict(X)
