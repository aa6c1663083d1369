"""Compile time as a cost: a model of each candidate's cold compile seconds from the ones a search has seen.

A ridge regression of log(compile seconds) on the GP inputs and all their pairwise products (a quadratic model:
the slow compiles are the big tiles, where the two tile sizes together make the registers spill, an interaction).
Log scale: compile times span two orders of magnitude, and 1 s vs 2 s matters as much as 50 s vs 100 s. Only cold
compiles count: a time below CACHE_LOAD_S is a binary built for another search of the sweep (reported as 0) or a
cache load, which says nothing about what compiling the config costs. No hyperparameters to fit: one small
least-squares solve, deterministic. docs/benchmarks/search/compile_cost.md compares it with a second GP and a
linear model.
"""

from __future__ import annotations

import numpy as np

CACHE_LOAD_S = 0.1  # compile seconds below this are a cache load or a shared build; cold compiles take > 0.3 s
MIN_COLD_COMPILES = 5  # cold compile times known before the model is used
RIDGE = 0.3  # the ridge penalty (inputs in [0, 1])


def compile_cost(X: np.ndarray, compile_s: dict[int, float], idx: np.ndarray) -> np.ndarray | None:
    """Predicted cold compile seconds of the candidates `idx` (rows of X), from `compile_s` (candidate index ->
    seconds its result reported); None before MIN_COLD_COMPILES cold compiles are known."""
    cold = [(i, s) for i, s in compile_s.items() if s >= CACHE_LOAD_S]
    if len(cold) < MIN_COLD_COMPILES:
        return None
    Xq, y = _quadratic(X[[i for i, _ in cold]]), np.log([s for _, s in cold])
    mx, my = Xq.mean(axis=0), y.mean()
    Xc = Xq - mx
    w = np.linalg.solve(Xc.T @ Xc + RIDGE * np.eye(Xq.shape[1]), Xc.T @ (y - my))
    return np.exp((_quadratic(X[idx]) - mx) @ w + my)


def _quadratic(X: np.ndarray) -> np.ndarray:
    """The columns of X and all their pairwise products (squares included): a quadratic model's inputs."""
    i, j = np.triu_indices(X.shape[1])
    return np.hstack([X, X[:, i] * X[:, j]])
