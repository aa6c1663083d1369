"""Which candidates will fail: a classifier of the failed region learned from the configs a search has measured.

Kernel configs fail for structured reasons (shared memory over the GPU's limit, too many registers): the failed
region is a few corners of the space, bounded by products of knobs (tile sizes times stages). A logistic regression
on the GP inputs and their pairwise products (the quadratic features of _cost.py) draws such a boundary from a
few failures. It is used only to skip candidates it is sure will fail (probability above SKIP_P). The GP without
priors does not see the failures at all: the best configs are often the largest that still fit (the next pipeline
stage or tile size fails), and a failure imputed as a bad score drags the model down right beside them. A weak
penalty (C) lets a handful of failures draw a sharp boundary: with C = 3 the classifier stayed unsure near the
edge and the search spent up to half its evaluations there. Until both outcomes have been seen MIN_EACH times it
predicts nothing.
"""

from __future__ import annotations

import warnings

import numpy as np

from raytune_attn.tune.search._cost import _quadratic

MIN_EACH = 2  # failures and successes seen before the classifier is used
SKIP_P = 0.9  # candidates predicted to fail with at least this probability are skipped
C = 30.0  # inverse L2 penalty of the logistic regression (inputs in [0, 1])


def fail_probability(X_seen: np.ndarray, failed: np.ndarray, X_query: np.ndarray) -> np.ndarray | None:
    """P(fail) at the rows of X_query from the measured inputs X_seen and whether each failed; None while fewer
    than MIN_EACH failures or successes are known."""
    n_fail = int(failed.sum())
    if n_fail < MIN_EACH or len(failed) - n_fail < MIN_EACH:
        return None
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # separable data: lbfgs reaches its iteration cap, harmlessly
        clf = LogisticRegression(C=C, max_iter=200).fit(_quadratic(X_seen), failed.astype(int))
    return clf.predict_proba(_quadratic(X_query))[:, 1]
