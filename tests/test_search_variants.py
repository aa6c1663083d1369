"""benchmarks/search_variants: the occupancy figures, the mixture of posteriors, the oracle's extra inputs."""

import math
from pathlib import Path

import numpy as np
import pytest
from skopt.learning import GaussianProcessRegressor

from benchmarks.search_variants import RecordedOccupancy, _Mixture, blocks_per_sm
from raytune_attn.tune.search._model import Model
from raytune_attn.tune.search.space import SearchSpace


def test_blocks_per_sm_by_registers_warps_and_shared_memory():
    # 124 registers round up to 128; 4 warps = 128 threads: 65536 / (128 * 128) = 4 blocks, warps allow 16.
    # 32776 bytes + 1 KB reserved: 233472 // 33800 = 6 blocks.
    assert blocks_per_sm(124, 32776, 4) == (2.0, math.log2(6))
    # 223 registers round up to 224 over 256 threads: 1 block; 114688 + 1024 bytes: 2 blocks.
    assert blocks_per_sm(223, 114688, 8) == (0.0, 1.0)
    # Few registers: the 64 warps of an SM bound it (64 / 16 = 4 blocks).
    assert blocks_per_sm(16, 1024, 16)[0] == 2.0
    # A failed config (nothing recorded) is below every real one.
    assert blocks_per_sm(float("nan"), float("nan"), 4) == (-1.0, -1.0)


def test_mixture_mean_and_variance_of_two_posteriors():
    rng = np.random.default_rng(0)
    X, y = rng.random((12, 2)), rng.random(12)
    a = GaussianProcessRegressor(normalize_y=True).fit(X, y)
    b = GaussianProcessRegressor(normalize_y=True).fit(X[:8], y[:8])
    q = rng.random((5, 2))
    (ma, sa), (mb, sb) = a.predict(q, return_std=True), b.predict(q, return_std=True)
    mu, sd = _Mixture([a, b]).predict(q, return_std=True)
    np.testing.assert_allclose(mu, (ma + mb) / 2)
    np.testing.assert_allclose(sd**2, (sa**2 + sb**2) / 2 + ((ma - mb) / 2) ** 2, rtol=1e-9)
    np.testing.assert_allclose(_Mixture([a]).predict(q), ma)


def test_recorded_occupancy_extends_the_gp_inputs():
    space = SearchSpace.from_values({"BLOCK_M": [32, 64], "num_warps": [2, 4]})
    s = RecordedOccupancy(space, seed=0, priors=False, occupancy={(32, 2): (3.0, 1.0), (64, 4): (-1.0, 0.0)})
    plain = RecordedOccupancy.__mro__[1]._model_inputs(s, s.candidates)
    X = s._model_inputs(s.candidates)
    assert X.shape == (len(s.candidates), plain.shape[1] + 2)
    np.testing.assert_array_equal(X[:, :-2], plain)
    rows = {space.key(c): x[-2:] for c, x in zip(s.candidates, X, strict=True)}
    np.testing.assert_allclose(rows[(32, 2)], [1.0, 0.5])
    np.testing.assert_allclose(rows[(64, 4)], [0.0, 0.25])
    np.testing.assert_allclose(rows[(32, 4)], [0.0, 0.0])  # not recorded: as a failed config


def test_score_warps_keep_the_order_and_spread_the_best():
    from scipy.stats import norm

    from benchmarks.search_variants import CopulaScores, YeoJohnsonScores

    y = np.log(np.array([0.2, 0.5, 0.9, 0.97, 0.98, 1.0]))
    for warp in (CopulaScores.warp, YeoJohnsonScores.warp):
        w = warp(y)
        assert (np.argsort(w) == np.argsort(y)).all()
        # the gap between the two best, relative to the whole range, grows
        assert (w[-1] - w[-2]) / (w.max() - w.min()) > (y[-1] - y[-2]) / (y.max() - y.min())
    np.testing.assert_allclose(CopulaScores.warp(y), norm.ppf((np.arange(6) + 0.5) / 6))


def test_plateau_centres_add_the_configs_near_the_best():
    from benchmarks.search_variants import PlateauCentres

    space = SearchSpace.from_values({"BLOCK_M": [32, 64, 128], "num_warps": [2, 4, 8]})
    s = PlateauCentres(space, seed=0, priors=False)
    idx = {space.key(c): i for i, c in enumerate(s.candidates)}
    # best (64, 4); (64, 8) within 1% of it and one knob away; (32, 2) far away and a basin of its own
    measured = [(0.0, idx[(64, 4)]), (math.log(0.995), idx[(64, 8)]), (math.log(0.9), idx[(32, 2)])]
    plain = PlateauCentres.__mro__[1]._centres(s, measured)
    assert plain == [idx[(64, 4)], idx[(32, 2)]]
    assert s._centres(measured) == [idx[(64, 4)], idx[(32, 2)], idx[(64, 8)]]


def test_larger_design_measures_twenty_configs_before_the_model_leads():
    from benchmarks.search_variants import LargerDesign

    space = SearchSpace.from_values({"BLOCK_M": [16, 32, 64, 128], "BLOCK_N": [16, 32, 64, 128],
                                     "num_warps": [1, 2, 4, 8], "num_stages": [1, 2, 3, 4]})
    s = LargerDesign(space, seed=0, priors=False)
    design = s.design_configs()
    assert len(design) == 20 and len({space.key(c) for c in design}) == 20


def test_late_polish_spends_the_last_evaluations_on_the_best_configs_neighbours():
    from benchmarks.search_variants import LatePolish

    space = SearchSpace.from_values({"BLOCK_M": [16, 32, 64, 128], "BLOCK_N": [16, 32, 64, 128],
                                     "num_warps": [1, 2, 4, 8], "num_stages": [1, 2, 3, 4]})
    budget = 20
    s = LatePolish(space, seed=0, priors=False, budget=budget)
    score = lambda c: -abs(c["BLOCK_M"] - 64) - abs(c["BLOCK_N"] - 32) - c["num_stages"]  # noqa: E731
    seen = []
    for n in range(budget):
        cfg = s.suggest(f"t{n}")
        if n >= budget - LatePolish.LAST:
            best = max(seen, key=score)
            assert sum(cfg[k] != best[k] for k in best) == 1  # one knob from the best so far
        s.on_trial_complete(f"t{n}", {"tflops": 100.0 + score(cfg), "status": "ok", "config": cfg})
        seen.append(cfg)


def test_local_model_ranks_by_a_gp_of_the_configs_near_the_centres_only():
    from benchmarks.search_variants import LocalModel
    from raytune_attn.tune.search._model import Model

    space = SearchSpace.from_values({"BLOCK_M": [16, 32, 64, 128], "BLOCK_N": [16, 32, 64, 128],
                                     "num_warps": [1, 2, 4, 8], "num_stages": [1, 2, 3, 4]})
    s = LocalModel(space, seed=0, priors=False)
    score = lambda c: -abs(c["BLOCK_M"] - 64) - abs(c["BLOCK_N"] - 32) - c["num_stages"]  # noqa: E731
    for n in range(24):
        cfg = s.suggest(f"t{n}")
        s.on_trial_complete(f"t{n}", {"tflops": 200.0 + score(cfg), "status": "ok", "config": cfg})
    available = np.flatnonzero(~s._taken)
    local = s._neighbours(available)
    centres = s._turn
    near = [i for i, v in s._scores.items() if v is not None
            and min((s._cat[i] != s._cat[c]).sum() for c in centres) <= LocalModel.RADIUS]  # fmt: skip
    assert len(near) >= LocalModel.MIN_POINTS and len(near) < len(s._scores)  # a strict subset: the test means it
    X, y = s._F[near], np.array([s._scores[i] for i in near])
    mu, sd = Model(X.shape[1], s.seed + len(s._obs)).fit(X, y, len(y)).predict(s._F[local], return_std=True)
    X_all, y_all, n = s._training_data([])
    got = s._local_acquisition(s._fit(X_all, y_all, n), s._F[local])
    np.testing.assert_allclose(got, mu + s._local_kappa * sd)
    s._turn = []  # no measured config near: the global model's ranking
    gp = s._fit(X_all, y_all, n)
    np.testing.assert_allclose(s._local_acquisition(gp, s._F[local]),
                               LocalModel.__mro__[1]._local_acquisition(s, gp, s._F[local]))


def test_significant_improvement_counts_only_gains_above_its_margin():
    from benchmarks.search_variants import SignificantImprovement, SignificantImprovement2
    from raytune_attn.tune.search.gp import GPSearcher

    space = SearchSpace.from_values({"BLOCK_M": [16, 32, 64, 128], "num_warps": [1, 2, 4, 8]})
    # 100, then +0.5% (polish), a failure, +1.5% over 100, +0.99% (2.5% over 100), a loss
    values = [100.0, 100.5, None, 101.5, 102.5, 90.0]
    want = {GPSearcher: [0, 0, 1, 0, 0, 1], SignificantImprovement: [0, 1, 2, 0, 1, 2],
            SignificantImprovement2: [0, 1, 2, 3, 0, 1]}
    for cls, since in want.items():
        s = cls(space, seed=0, priors=False)
        got = []
        for n, v in enumerate(values):
            cfg = s.suggest(f"t{n}")
            result = {"tflops": v, "status": "ok", "config": cfg} if v else {"status": "error", "config": cfg}
            s.on_trial_complete(f"t{n}", result)
            got.append(s._since())
        assert got == since, cls.__name__


def test_sobol_design_snaps_each_sobol_point_to_the_nearest_free_candidate():
    from scipy.stats import qmc

    from benchmarks.search_variants import SobolDesign
    from raytune_attn.tune.search.gp import GPSearcher

    space = SearchSpace.from_values({"BLOCK_M": [16, 32, 64, 128], "BLOCK_N": [16, 32, 64, 128],
                                     "num_warps": [1, 2, 4, 8], "num_stages": [1, 2, 3, 4]})
    s, plain = SobolDesign(space, seed=3, priors=False), GPSearcher(space, seed=3, priors=False)
    design = [s._index[space.key(c)] for c in s.design_configs()]
    assert len(design) == len(plain.design_configs()) == len(set(design))
    pts = qmc.Sobol(s._X.shape[1], scramble=True, seed=3).random(16)[: len(design)]
    for k, (p, j) in enumerate(zip(pts, design, strict=True)):
        d = ((s._X - p) ** 2).sum(axis=1)
        d[design[:k]] = np.inf  # taken by an earlier point
        assert d[j] == d.min()


def test_cli_refuses_bad_options_before_any_replay(capsys):
    import pytest

    from benchmarks.search_variants import main

    for argv, msg in ((["--noise", "0.7"], "--noise is a relative spread"), (["--seed-start", "-1"], "--seed-start"),
                      (["--variant", "no such"], "invalid choice")):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err


def test_the_table_names_the_command_that_measures_it():
    import argparse

    from benchmarks.search_variants import _command

    args = argparse.Namespace(seeds=10, budget=50, seed_start=10, noise=0.02, variant=["no priors", "late polish"],
                              landscape=None)
    assert _command(args) == ("python -m benchmarks.search_variants --seeds 10 --budget 50 --seed-start 10 "
                              "--noise 0.02 --variant 'no priors' --variant 'late polish'")


def test_given_landscapes_replay_every_problem_key(capsys, tmp_path):
    import pandas as pd
    import pytest

    from benchmarks.search_variants import main, measure

    path = "tests/data/heldout/h200_short_full.parquet"
    keys = sorted(pd.read_parquet(path, columns=["problem_key"]).problem_key.unique())
    out = tmp_path / "t.md"
    argv = ["--landscape", path, "--seeds", "1", "--budget", "3", "--variant", "no priors", "--out", str(out)]
    assert main(argv) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| given | h200_short_full ")]
    assert len(rows) == len(keys) == 4
    for key, row in zip(keys, rows, strict=True):
        median, worst, reached = measure(Path(path), key, "no priors", 1, 3)
        assert row == f"| given | h200_short_full {key} | {median:g} / {worst} ({reached}/1) |"
    assert f"--landscape {path}" in out.read_text()
    with pytest.raises(SystemExit):
        main(["--landscape", str(tmp_path / "none.parquet")])
    assert "no such file" in capsys.readouterr().err


def test_niches_of_3_knobs_merge_a_basin_whose_best_differs_in_two():
    from benchmarks.search_variants import Niche3, Niche3Of7
    from raytune_attn.tune.search.gp import GPSearcher

    space = SearchSpace.from_values({"BLOCK_M": [32, 64, 128], "BLOCK_N": [32, 64], "num_warps": [2, 4, 8],
                                     "num_stages": [2, 3]})
    s = Niche3(space, seed=0, priors=False)
    idx = {space.key(c): i for i, c in enumerate(s.candidates)}
    # the best; a config 2 knobs from it (a niche of 2 knobs, not of 3); one 3 knobs from both
    measured = [(0.0, idx[(64, 64, 4, 3)]), (-0.1, idx[(64, 32, 4, 2)]), (-0.2, idx[(128, 32, 8, 3)])]
    kept = GPSearcher(space, seed=0, priors=False)
    assert kept._centres(measured) == [idx[(64, 64, 4, 3)], idx[(64, 32, 4, 2)], idx[(128, 32, 8, 3)]]
    assert s._centres(measured) == [idx[(64, 64, 4, 3)], idx[(128, 32, 8, 3)]]
    assert Niche3Of7._niche == 3 and Niche3Of7._free_top == 7


def _four_measured(cls):
    """A `cls` searcher (without priors) on a 4-knob space with four configs measured in two basins, its GP fitted on
    them: (searcher, config key -> candidate index, gp, the scores fitted on)."""
    space = SearchSpace.from_values({"BLOCK_M": [32, 64, 128], "BLOCK_N": [32, 64, 128], "num_warps": [2, 4, 8],
                                     "num_stages": [2, 3, 4]})
    s = cls(space, seed=0, priors=False)
    idx = {space.key(c): i for i, c in enumerate(s.candidates)}
    for k, v in {(64, 64, 4, 3): 0.0, (64, 32, 4, 2): -0.3, (32, 128, 2, 4): -0.5, (128, 64, 8, 2): -0.4}.items():
        s._scores[idx[k]] = v
    X, y, n = s._training_data([])
    return s, idx, s._fit(X, y, n), y[:n]


def test_global_steps_to_new_basins_rank_only_candidates_far_from_every_basin():
    from benchmarks.search_variants import GlobalToNewBasins

    s, _, gp, y = _four_measured(GlobalToNewBasins)
    free = np.array([i for i in range(len(s.candidates)) if i not in s._scores])
    a = s._global_acquisition(gp, s._F[free], y, free)
    centres = s._step_centres(0)
    assert len(centres) >= 2  # the best and at least one other basin
    far = np.array([min((s._cat[i] != s._cat[c]).sum() for c in centres) >= GlobalToNewBasins.FAR for i in free])
    assert far.any() and (~far).any()
    assert np.isneginf(a[~far]).all() and np.isfinite(a[far]).all()


def test_matern_variants_fit_the_rougher_kernel_they_name():
    from benchmarks.search_variants import Matern12, Matern32

    forms = {Matern32: lambda r: (1 + math.sqrt(3) * r) * math.exp(-math.sqrt(3) * r), Matern12: lambda r: math.exp(-r)}
    for cls, form in forms.items():
        s, idx, gp, _ = _four_measured(cls)
        matern = gp.kernel_.k1
        scale, ls = matern.k1.constant_value, np.asarray(matern.k2.length_scale)
        a, b = s._F[idx[(64, 64, 4, 3)]], s._F[idx[(128, 128, 8, 4)]]
        r = float(np.sqrt((((a - b) / ls) ** 2).sum()))
        assert math.isclose(matern(a[None], b[None])[0, 0], scale * form(r), rel_tol=1e-9), cls.__name__


def test_leave_one_out_z_scores_match_refits_without_each_point():
    from sklearn.gaussian_process import GaussianProcessRegressor as Plain
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel

    from benchmarks.search_variants import loo_z

    rng = np.random.default_rng(1)
    X, y = rng.random((12, 2)), rng.standard_normal(12)
    kernel = RBF(0.4) + WhiteKernel(0.05)
    full = Plain(kernel, optimizer=None).fit(X, y)
    for i, z in enumerate(loo_z(full)):  # the reference: the GP conditioned on the other 11 points
        rest = np.arange(12) != i
        mu, sd = Plain(kernel, optimizer=None).fit(X[rest], y[rest]).predict(X[i : i + 1], return_std=True)
        assert z == pytest.approx((y[i] - mu[0]) / sd[0], rel=1e-6)


def test_loo_calibrated_model_scales_the_sd_by_its_leave_one_out_errors():
    from benchmarks.search_variants import _LooCalibratedModel, loo_z

    rng = np.random.default_rng(2)
    X = rng.random((20, 3))
    smooth = X.sum(axis=1)
    spiky = smooth + np.where(np.arange(20) == 0, 3.0, 0.0)  # one point far above its neighbours' trend
    q = rng.random((6, 3))
    for y in (smooth, spiky):
        plain = Model(3, seed=0).fit(X, y, len(y))
        model = _LooCalibratedModel(3, seed=0)
        calibrated = model.fit(X, y, len(y))
        rms = float(np.sqrt(np.mean(loo_z(plain) ** 2)))
        assert model.scale == pytest.approx(min(max(rms, 1.0), _LooCalibratedModel.MAX_SCALE))
        (mu, sd), (cmu, csd) = plain.predict(q, return_std=True), calibrated.predict(q, return_std=True)
        np.testing.assert_allclose(cmu, mu)
        np.testing.assert_allclose(csd, sd * model.scale)
    assert model.scale > 1  # the spike misses its leave-one-out prediction by more than the sd says


def test_wider_sd_doubles_the_posterior_sd_and_keeps_the_mean():
    from benchmarks.search_variants import _WiderSdModel

    rng = np.random.default_rng(3)
    X, y, q = rng.random((10, 2)), rng.random(10), rng.random((4, 2))
    (mu, sd), (wmu, wsd) = (m(2, seed=0).fit(X, y, 10).predict(q, return_std=True) for m in (Model, _WiderSdModel))
    np.testing.assert_allclose(wmu, mu)
    np.testing.assert_allclose(wsd, 2 * sd)


def test_main_effects_mean_adds_a_linear_model_of_knob_values_to_the_gp():
    from sklearn.linear_model import BayesianRidge

    from benchmarks.search_variants import MainEffectsMean, one_hot

    X = np.array([[0.0, 0.5], [1.0, 0.5], [0.5, 0.0], [0.0, 0.0]])
    levels = [np.unique(X[:, 0]), np.unique(X[:, 1]), np.array([0.3])]  # a one-valued column gives no indicator
    np.testing.assert_array_equal(one_hot(np.hstack([X, np.full((4, 1), 0.3)]), levels),
                                  [[1, 0, 0, 0, 1], [0, 0, 1, 0, 1], [0, 1, 0, 1, 0], [1, 0, 0, 1, 0]])  # fmt: skip
    s, _, model, y = _four_measured(MainEffectsMean)
    X, _, n = s._training_data([])
    k = s._X.shape[1]
    Z = one_hot(X[:, :k], s._levels)
    linear = BayesianRidge().fit(Z, y)  # the reference: the regression, then the GP on its residuals
    gp = Model(X.shape[1], s.seed).fit(X, y - linear.predict(Z), n)
    q = s._F[:7]
    zq = one_hot(q[:, :k], s._levels) - linear.X_offset_
    (mu, sd), (gmu, gsd) = model.predict(q, return_std=True), gp.predict(q, return_std=True)
    np.testing.assert_allclose(mu, linear.predict(one_hot(q[:, :k], s._levels)) + gmu, rtol=1e-9)
    np.testing.assert_allclose(sd**2, gsd**2 + np.sum((zq @ linear.sigma_) * zq, axis=1), rtol=1e-9)


def test_main_effects_global_ranks_local_steps_by_the_kept_gp():
    from benchmarks.search_variants import MainEffectsGlobal
    from raytune_attn.tune.search.gp import GPSearcher

    s, _, model, y = _four_measured(MainEffectsGlobal)
    kept, _, gp, _ = _four_measured(GPSearcher)  # the same scores: the reference for the local steps
    q = s._F[:7]
    np.testing.assert_allclose(s._local_acquisition(model, q), kept._local_acquisition(gp, q), rtol=1e-9)
    free = np.arange(7)
    assert not np.allclose(s._global_acquisition(model, q, y, free), kept._global_acquisition(gp, q, y, free))


def test_forest_global_ranks_global_steps_by_ei_under_extra_trees_and_local_steps_by_the_kept_gp():
    from skopt.acquisition import gaussian_ei
    from skopt.learning import ExtraTreesRegressor

    from benchmarks.search_variants import ForestGlobal
    from raytune_attn.tune.search._model import Negated
    from raytune_attn.tune.search.gp import _XI, GPSearcher

    s, _, gp, y = _four_measured(ForestGlobal)
    kept, _, kept_gp, _ = _four_measured(GPSearcher)
    free = np.array([i for i in range(len(s.candidates)) if i not in s._scores])
    q = s._F[free]
    np.testing.assert_allclose(s._local_acquisition(gp, q), kept._local_acquisition(kept_gp, q), rtol=1e-9)
    measured = list(s._scores)  # the reference: the forest on the knobs' encoding of the four measured configs
    forest = ExtraTreesRegressor(n_estimators=100, min_samples_leaf=3, random_state=s.seed).fit(s._X[measured], y)
    want = gaussian_ei(s._X[free], Negated(forest), y_opt=-float(y.max()), xi=_XI * float(y.std()))
    assert np.any(want > 0)
    np.testing.assert_allclose(s._global_acquisition(gp, q, y, free), want)


def test_global_steps_by_turns_rank_by_the_kept_gp_the_main_effects_model_and_the_trees_in_turn():
    from benchmarks.search_variants import ForestGlobal, GlobalByTurns, MainEffectsGlobal
    from raytune_attn.tune.search.gp import GPSearcher

    s, _, model, y = _four_measured(GlobalByTurns)
    free = np.array([i for i in range(len(s.candidates)) if i not in s._scores])
    q = s._F[free]
    references = []
    for cls in (GPSearcher, MainEffectsGlobal, ForestGlobal):  # each turn's reference: that searcher on the same scores
        r, _, gp, _ = _four_measured(cls)
        references.append(r._global_acquisition(gp, q, y, free))
    for turn in range(6):
        np.testing.assert_allclose(s._global_acquisition(model, q, y, free), references[turn % 3], rtol=1e-9)
    kept, _, kept_gp, _ = _four_measured(GPSearcher)
    np.testing.assert_allclose(s._local_acquisition(model, q), kept._local_acquisition(kept_gp, q), rtol=1e-9)
