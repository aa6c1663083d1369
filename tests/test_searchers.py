"""Searchers through the Ray Tune Searcher interface: feasibility, concurrency, failures, save/restore,
determinism and warm start."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_optuna
from ray.tune.search import Searcher
from scipy.stats import spearmanr
from synthetic import synthetic_landscape

from raytune_attn.kernels.resources import Prefilter
from raytune_attn.problem import Problem
from raytune_attn.tune.search import SEARCHERS, make_searcher
from raytune_attn.tune.search.landscape import load_landscape
from raytune_attn.tune.search.replay import run_searcher
from raytune_attn.tune.search.space import load_space

# The searcher names to parametrize over: tpe needs Optuna (an optional extra), and skips, saying so, without it.
NAMES = [pytest.param(n, marks=needs_optuna) if n == "tpe" else n for n in sorted(SEARCHERS)]

H100 = sorted((Path(__file__).parent / "data").glob("landscape_h100_*.parquet"))
D128 = Path(__file__).parent / "data" / "landscape_h100_d128_causal_s4096.parquet"
D64 = Path(__file__).parent / "data" / "landscape_h100_d64_full_s1024.parquet"


@pytest.fixture(scope="module")
def cpu_space():
    return load_space("cpu/interpreter")  # 48 feasible configs


@pytest.fixture(scope="module")
def land():
    return load_landscape(synthetic_landscape(0))


def toy_value(c):
    """A smooth peaked objective over the interpreter space (best at BLOCK_M=64, BLOCK_N=32, 2 stages)."""
    return 100 * math.exp(-((math.log2(c["BLOCK_M"]) - 6) ** 2) - (math.log2(c["BLOCK_N"]) - 5) ** 2
                          - 0.3 * (c["num_stages"] - 2) ** 2 + 0.1 * c["PRE_LOAD_V"])  # fmt: skip


def drive(s, n, value=toy_value):
    out = []
    for k in range(n):
        c = s.suggest(f"t{k}")
        if c == Searcher.FINISHED:
            break
        v = value(c)
        s.on_trial_complete(f"t{k}", {"tflops": v} if v is not None else None, error=v is None)
        out.append(c)
    return out


def test_unknown_searcher(cpu_space):
    with pytest.raises(ValueError, match="unknown searcher 'bayes'"):
        make_searcher("bayes", cpu_space)


@pytest.mark.parametrize("name", NAMES)
def test_exhausts_the_space_without_repeats_then_finishes(name, cpu_space):
    s = make_searcher(name, cpu_space, seed=3)
    seen = drive(s, 100)
    keys = [cpu_space.key(c) for c in seen]
    assert len(keys) == len(set(keys)) == cpu_space.size == 48
    assert all(cpu_space.contains(c) for c in seen)
    assert s.suggest("late") == Searcher.FINISHED


@pytest.mark.parametrize("name", NAMES)
def test_concurrent_suggestions_are_distinct_and_skip_in_flight(name, land):
    s = make_searcher(name, land.space, seed=1)
    drive(s, 8, value=lambda c: land.value(c) if np.isfinite(land.value(c)) else None)
    measured = {land.space.key(c) for c, _ in s.observations}
    batch = [s.suggest(f"p{k}") for k in range(6)]  # six trials in flight at once
    keys = {land.space.key(c) for c in batch}
    assert len(keys) == 6 and not keys & measured


@pytest.mark.parametrize("name", NAMES)
def test_every_searcher_takes_the_problem(name, cpu_space):
    problem = Problem(batch=1, hq=2, hkv=2, seqlen_q=64, seqlen_k=64, head_dim=64, causal=True)
    s = make_searcher(name, cpu_space, seed=0, problem=problem)
    assert s.problem["head_dim"] == 64 and s.problem["causal"] is True
    assert make_searcher(name, cpu_space, seed=0, problem={"head_dim": 64}).problem["seqlen_q"] is None
    with pytest.raises(ValueError, match="unknown problem field"):
        make_searcher(name, cpu_space, problem={"head_size": 64})


def test_the_gp_keeps_a_few_keyword_arguments():
    import inspect

    from raytune_attn.tune.search.gp import GPSearcher

    own = [p for p in inspect.signature(GPSearcher).parameters.values() if p.name not in ("space", "kw")]
    assert all(p.kind is p.KEYWORD_ONLY for p in own) and len(own) <= 5


@pytest.fixture(scope="module")
def sm90_prefiltered():
    space = load_space("nvidia/sm90")
    pf = Prefilter.for_arch("sm90", head_dim=128)
    return space, pf, [c for c in space.configs() if pf.accepts(c)]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_prefilter_excludes_configs_that_cannot_compile(name, sm90_prefiltered):
    space, pf, accepted = sm90_prefiltered
    s = make_searcher(name, space, prefilter=pf)
    assert 0 < len(accepted) < space.size
    keys = [space.key(c) for c in s.candidates]
    assert len(keys) == len(set(keys)) == len(accepted)
    assert set(keys) == {space.key(c) for c in accepted}


@pytest.mark.parametrize(
    "outcome",
    [
        dict(result=None, error=True),  # errored trial
        dict(result=None),  # no result
        dict(result={"tflops": 50.0, "status": "invalid"}),  # wrong output or unsupported
        dict(result={"status": "ok"}),  # metric missing
        dict(result={"tflops": 0.0}),  # failed benchmark reported as 0
        dict(result={"tflops": float("nan")}),
    ],
)
def test_failures_are_recorded_and_never_suggested_again(outcome, cpu_space):
    s = make_searcher("gp", cpu_space, seed=0)
    c = s.suggest("a")
    s.on_trial_complete("a", **outcome)
    assert s.observations == [(c, None)]
    rest = drive(s, 12)
    assert len(rest) == 12 and cpu_space.key(c) not in {cpu_space.key(x) for x in rest}


def test_gp_learns_failed_regions(cpu_space):
    """Big tiles fail: after observing that, the GP predicts them below the working configs."""
    fail = lambda c: None if c["BLOCK_M"] == 64 else toy_value(c)  # noqa: E731
    s = make_searcher("gp", cpu_space, seed=0, n_initial=10)
    drive(s, 20, value=fail)
    assert any(v is None for _, v in s.observations) and any(v is not None for _, v in s.observations)
    X, y, n = s._training_data([])
    gp = s._fit(X, y, n)
    mu = gp.predict(s._X)
    big = np.array([c["BLOCK_M"] == 64 for c in s.candidates])
    assert mu[big].mean() < mu[~big].mean()


def test_gp_is_deterministic_per_seed(land):
    val = lambda c: land.value(c) if np.isfinite(land.value(c)) else None  # noqa: E731
    a = drive(make_searcher("gp", land.space, seed=7), 10, value=val)
    b = drive(make_searcher("gp", land.space, seed=7), 10, value=val)
    c = drive(make_searcher("gp", land.space, seed=8), 10, value=val)
    assert a == b
    assert a != c


@pytest.mark.parametrize("name", NAMES)
def test_save_restore_round_trip(name, land, tmp_path):
    val = lambda c: land.value(c) if np.isfinite(land.value(c)) else None  # noqa: E731
    s = make_searcher(name, land.space, seed=5)
    drive(s, 12, value=val)
    in_flight = s.suggest("flying")
    path = tmp_path / "searcher.pkl"
    s.save(str(path))
    r = make_searcher(name, land.space, seed=0)  # the seed comes back from the checkpoint
    r.restore(str(path))
    assert r.observations == s.observations
    # the in-flight trial's result still arrives after the restore
    for x in (s, r):
        x.on_trial_complete("flying", {"tflops": 10.0})
    cont_s = [s.suggest(f"n{k}") for k in range(4)]
    cont_r = [r.suggest(f"n{k}") for k in range(4)]
    assert cont_s == cont_r
    assert in_flight not in cont_r


def test_restore_refuses_another_searchers_state(cpu_space, tmp_path):
    g = make_searcher("grid", cpu_space)
    g.save(str(tmp_path / "g.pkl"))
    with pytest.raises(ValueError, match="'grid' searcher cannot restore a 'gp'"):
        make_searcher("gp", cpu_space).restore(str(tmp_path / "g.pkl"))


def test_warm_start_from_a_neighbouring_landscape(tmp_path):
    target = load_landscape(synthetic_landscape(0))
    neighbour = synthetic_landscape(0)
    neighbour["tflops"] *= 0.6  # another GPU: same shape of landscape, another scale
    neighbour["gpu"] = "other"
    path = tmp_path / "earlier.parquet"
    neighbour.to_parquet(path)
    s = make_searcher("gp", target.space, seed=0, warm_start=str(path))
    assert len(s._warm) == len(target.values)
    first = s.suggest("t0")  # no random initial design: straight to the model's pick
    assert target.value(first) >= 0.9 * target.best
    cold = make_searcher("gp", target.space, seed=0).suggest("t0")
    assert target.value(first) > (target.value(cold) if np.isfinite(target.value(cold)) else 0)


def test_warm_start_fills_missing_knob_columns(tmp_path):
    """A study-space table (no SPLIT_MASK column) warm-starts the sm80 space at the knob's default."""
    synthetic_landscape(1).to_parquet(tmp_path / "study.parquet")
    s = make_searcher("gp", load_space("nvidia/sm80"), warm_start=str(tmp_path / "study.parquet"))
    assert len(s._warm) == 450
    # and a measured config replaces its warm value in the model
    c = s.suggest("t0")
    s.on_trial_complete("t0", {"tflops": 123.456})
    X, y, n = s._training_data([])
    assert n == 450 + (not c["SPLIT_MASK"]) and math.log(123.456) in y  # warm configs all have SPLIT_MASK=True


def test_suggest_latency_is_recorded(land):
    s = make_searcher("gp", land.space, seed=0)
    n_design = len(s._design)
    drive(s, n_design + 4, value=lambda c: land.value(c) if np.isfinite(land.value(c)) else None)
    assert len(s.timings) == 4
    assert all(t > 0 for _, t in s.timings)


def test_gp_screens_the_default_then_moves_along_coupled_knobs(land):
    """The initial design is the default, its adjacent one-knob neighbours, then its coupled moves along each
    coupled pair of the priors (tests/test_search_start.py); local moves add coupled steps."""
    default = {"BLOCK_M": 128, "BLOCK_N": 64, "PRE_LOAD_V": False, "num_warps": 8, "num_stages": 2}
    s = make_searcher("gp", land.space, seed=0, problem={"head_dim": 128})
    other = make_searcher("gp", land.space, seed=1, problem={"head_dim": 128})
    assert len(s._design) == 12 and s._design[0] == other._design[0] == s._index[land.space.key(default)]
    assert sorted(s._design) == sorted(other._design) and s._design != other._design  # seeded order
    idx = lambda c: np.array([p.values.index(c[p.name]) for p in land.space.params])  # noqa: E731
    for j in s._design[1:9]:
        step = idx(s.candidates[j]) - idx(default)
        assert (step != 0).sum() == 1 and np.abs(step).max() == 1
    names = [p.name for p in land.space.params]
    for j in s._design[9:]:  # both knobs of (BLOCK_M, num_warps) or of (BLOCK_N, num_stages), one step each
        step = idx(s.candidates[j]) - idx(default)
        moved = {names[k] for k in np.flatnonzero(step)}
        assert moved in ({"BLOCK_M", "num_warps"}, {"BLOCK_N", "num_stages"}) and np.abs(step).max() == 1
    lhs = make_searcher("gp", land.space, seed=0, problem={"head_dim": 128}, priors=False)
    # Without priors: a space-filling design, one config per 45 candidates from n_initial up to 10.
    assert len(lhs._design) == max(lhs.n_initial, min(10, len(lhs.candidates) // 45))
    assert s._design[0] not in lhs._design[:1]
    # Local moves from a measured config: one knob to any value, or one step of both knobs of a coupled pair.
    s = make_searcher("gp", land.space, seed=0, n_initial=0)
    i = s._index[land.space.key(default)]
    s._scores[i] = 1.0
    near = {land.space.key(s.candidates[j]) for j in s._neighbours(np.delete(np.arange(len(s.candidates)), i))}
    key = lambda **kw: land.space.key({**default, **kw})  # noqa: E731
    assert key(num_stages=8) in near and key(BLOCK_M=64) in near
    assert key(BLOCK_M=256, num_warps=4) in near and key(BLOCK_M=64, num_warps=4) in near
    assert key(BLOCK_N=128, num_stages=1) in near and key(BLOCK_N=32, num_stages=4) in near
    assert key(BLOCK_M=256, BLOCK_N=128) not in near and key(num_warps=4, num_stages=4) not in near
    assert key(BLOCK_M=64, num_warps=2) not in near  # two steps of one knob of the pair
    # Without priors no file names the coupled pairs: every two knobs step one value each.
    plain = make_searcher("gp", land.space, seed=0, n_initial=0, priors=False)
    plain._scores[i] = 1.0
    plain_near = {land.space.key(plain.candidates[j])
                  for j in plain._neighbours(np.delete(np.arange(len(s.candidates)), i))}  # fmt: skip
    assert near <= plain_near and key(num_warps=4, num_stages=4) in plain_near
    assert key(BLOCK_M=64, num_warps=2) not in plain_near


def tell(s, land, configs, compile_s=None):
    """Tell these configs' recorded values (failed ones as "invalid") and compile seconds (`compile_s(config)`,
    the landscape's by default; None leaves the key out), as a live sweep's results carry them."""
    for c in configs:
        v = land.value(c)
        secs = land.compile_seconds(c) if compile_s is None else compile_s(c)
        result = {"tflops": v, "status": "ok" if np.isfinite(v) else "invalid", "config": c}
        if secs is not None:
            result["compile_s"] = secs
        s.on_trial_complete(f"told{len(s.observations)}", result)


@pytest.mark.parametrize("path", H100, ids=[p.stem for p in H100])
def test_gp_learns_which_configs_compile_slowly(path):
    """After the GP's own first 20 trials on a recorded H100 landscape, its compile-time model ranks the recorded
    cold compile seconds of the ~430 configs it has not measured, and the tenth it predicts slowest is slow."""
    land = load_landscape(path)
    s = make_searcher("gp", land.space, seed=0, problem=land.problem)
    run = run_searcher(s, land, 20)
    assert s._compile == {s._index[land.space.key(c)]: land.compile_seconds(c) for c in run.configs}
    rest = np.flatnonzero(~s._taken)
    predicted = s._compile_cost(rest)
    recorded = np.array([land.compile_seconds(s.candidates[i]) for i in rest])
    assert spearmanr(predicted, recorded).statistic > 0.7
    slowest = np.argsort(predicted)[-len(rest) // 10 :]
    assert np.median(recorded[slowest]) > 5 * np.median(recorded)


def test_shared_builds_are_remembered_but_not_fitted():
    """compile_s 0 (built by another search) or a cache load is kept as free but says nothing about the cold
    cost: the model is the one fitted on the cold compiles alone, and there is none before 5 of them."""
    land = load_landscape(D128)
    configs = [land.space.to_config(k) for k in sorted(land.values)[::45]]  # 10 configs across the space
    shared = {land.space.key(c) for c in configs[::3]}  # 4 of them arrive already built
    secs = lambda c: 0.0 if land.space.key(c) in shared else land.compile_seconds(c)  # noqa: E731
    a, b = (make_searcher("gp", land.space, seed=0) for _ in range(2))
    tell(a, land, configs, compile_s=secs)
    tell(b, land, configs, compile_s=lambda c: None if land.space.key(c) in shared else secs(c))
    assert sorted(a._compile.values()).count(0.0) == 4 and len(b._compile) == 6
    idx = np.arange(len(a.candidates))
    assert np.array_equal(a._compile_cost(idx), b._compile_cost(idx))
    few = make_searcher("gp", land.space, seed=0)
    tell(few, land, configs[:6], compile_s=secs)  # 4 cold compiles
    assert few._compile_cost(idx) is None


@pytest.mark.slow
def test_cost_aware_global_steps_avoid_slow_compiles():
    """Global EI per second avoids the configs it predicts slow to compile. With the local steps off, every pick
    after the screening design is global: on the recorded D=64 landscape, where plain EI compiles several of the
    13-34 s big-tile configs within 30 trials, the cost-aware runs spend less compile time and their slowest
    compile is shorter."""
    land = load_landscape(D64)
    total, slowest = {}, {}
    for cost_aware in (True, False):
        runs = [run_searcher(_global_only(land, seed, cost_aware=cost_aware), land, 30) for seed in range(5)]
        total[cost_aware] = np.median([sum(r.compile_s) for r in runs])
        slowest[cost_aware] = np.median([max(r.compile_s) for r in runs])
    assert total[True] < total[False] and slowest[True] < slowest[False]


def _global_only(land, seed, **kw):
    """A GP search whose picks after the design are all global (no local steps)."""
    s = make_searcher("gp", land.space, seed=seed, problem=land.problem, **kw)
    s._local_top = 0
    return s


def test_compile_state_round_trip(tmp_path):
    """The compile seconds told survive save/restore, and the restored searcher's cost-aware picks match."""
    land = load_landscape(D128)
    s = _global_only(land, 2)
    run_searcher(s, land, 14)
    path = tmp_path / "gp.pkl"
    s.save(str(path))
    r = _global_only(land, 0)
    r.restore(str(path))
    assert r._compile == s._compile and len(r._compile) == 14
    assert [r.suggest(f"n{k}") for k in range(3)] == [s.suggest(f"n{k}") for k in range(3)]


def test_gp_likely_next_is_the_design_then_the_runner_ups_of_each_pick(land):
    s = make_searcher("gp", land.space, seed=0, problem={"head_dim": 128})
    assert s.likely_next() == s.design_configs()[:3]
    val = lambda c: land.value(c) if np.isfinite(land.value(c)) else None  # noqa: E731
    drive(s, len(s._design) + 2, value=val)  # past the design: model-based picks
    pick = s.suggest("out")  # in flight: its runner-ups are what the next picks will likely be
    likely = s.likely_next()
    assert 1 <= len(likely) <= 3
    keys = [land.space.key(c) for c in likely]
    measured = {land.space.key(s.candidates[i]) for i, _ in s._obs}
    assert len(set(keys)) == len(keys) and land.space.key(pick) not in keys and not set(keys) & measured
    assert all(land.space.contains(c) for c in likely)
