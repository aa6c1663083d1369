"""benchmarks/bootstrap: the interval of a ratio of two searchers' bar (a) figures, resampling each one's units."""

import numpy as np
import pandas as pd
import pytest

from benchmarks.bootstrap import figure, paired_ratio_interval, ratio_interval

KW = {"problem": ["problem"], "unit": "seed", "value": "evals"}


def _runs(evals: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"problem": p, "seed": i, "evals": e} for p, v in evals.items() for i, e in enumerate(v)])


def _figure(runs: pd.DataFrame) -> float:
    return float(np.exp(np.log(runs.groupby("problem").evals.median()).mean()))


def test_the_interval_is_the_percentiles_of_the_ratio_over_units_drawn_again():
    """Reference: each resample drawn unit by unit as the function's generator draws them, then pandas' medians."""
    a = _runs({"x": [3, 40, 51, 9, 12], "y": [10, 11, 7, 30, 10]})
    b = _runs({"x": [50, 51, 20, 33], "y": [4, 8, 51, 9]})
    lo, hi = ratio_interval(a, b, resamples=300, seed=7, level=0.9, **KW)
    rng = np.random.default_rng(7)
    picks = [rng.integers(0, n, size=(300, n)) for n in (5, 4)]
    ratios = []
    for ia, ib in zip(*picks, strict=True):
        draw_a = pd.concat([a[a.seed == s].assign(seed=k) for k, s in enumerate(ia)])
        draw_b = pd.concat([b[b.seed == s].assign(seed=k) for k, s in enumerate(ib)])
        ratios.append(_figure(draw_a) / _figure(draw_b))
    assert (lo, hi) == pytest.approx(tuple(np.percentile(ratios, [5, 95])))
    assert lo < _figure(a) / _figure(b) < hi
    assert figure(a, problem=["problem"], value="evals") == pytest.approx(np.sqrt(12 * 10))  # medians x 12, y 10


def test_units_that_agree_give_no_spread():
    a, b = _runs({"x": [6] * 4, "y": [10] * 4}), _runs({"x": [12] * 3, "y": [40] * 3})
    assert ratio_interval(a, b, **KW) == pytest.approx((np.sqrt(60 / 480),) * 2)


def test_a_paired_interval_draws_the_same_units_for_both_sides():
    a = _runs({"x": [3, 40, 51, 9, 12], "y": [10, 11, 7, 30, 10]})
    b = a.assign(evals=a.evals * 2.0)  # every seed twice as slow: every paired draw says 0.5
    assert paired_ratio_interval(a, b, **KW) == pytest.approx((0.5, 0.5))
    lo, hi = ratio_interval(a, b, **KW)  # drawn apart, the same runs look unsure
    assert lo < 0.4 and hi > 0.6
    c = a.assign(evals=a.evals + np.where(a.seed == 1, 20, 0))  # one seed worse
    rng = np.random.default_rng(3)
    picks = rng.integers(0, 5, size=(400, 5))
    ratios = [_figure(pd.concat([a[a.seed == s].assign(seed=k) for k, s in enumerate(row)]))
              / _figure(pd.concat([c[c.seed == s].assign(seed=k) for k, s in enumerate(row)])) for row in picks]
    want = tuple(np.percentile(ratios, [2.5, 97.5]))
    assert paired_ratio_interval(a, c, resamples=400, seed=3, **KW) == pytest.approx(want)
    with pytest.raises(ValueError, match="same seeds and problems"):
        paired_ratio_interval(a, a[a.seed < 4], **KW)


@pytest.mark.parametrize("change, message", [
    (lambda r: r[r.seed == 0], "at least 2"),
    (lambda r: r.assign(evals=r.evals - 3), "positive"),
    (lambda r: pd.concat([r, r.iloc[:1]]), "two runs of one problem"),
    (lambda r: r.drop(index=5), "seed 2 has no run of y"),
])  # fmt: skip
def test_bad_runs_are_refused(change, message):
    good = _runs({"x": [3, 4, 5], "y": [1, 2, 3]})
    with pytest.raises(ValueError, match=message):
        ratio_interval(change(good), good, **KW)
    with pytest.raises(ValueError, match="level"):
        ratio_interval(good, good, level=95, **KW)
