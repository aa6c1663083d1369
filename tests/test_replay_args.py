"""benchmarks/replay_args.py: the replay benchmarks' shared options and their checks."""

import argparse

import pytest

from benchmarks.replay_args import add_replay_args, check_replay_args


def _parse(argv, **kw):
    ap = argparse.ArgumentParser()
    add_replay_args(ap, **kw)
    args = ap.parse_args(argv)
    check_replay_args(ap, args)
    return args


def test_defaults_and_the_options_a_script_leaves_out():
    a = _parse([], budget=30)
    assert (a.seeds, a.budget, a.jobs, a.seed_start, a.noise, a.out) == (10, 30, 1, 0, 0.0, None)
    b = _parse(["--seeds", "3", "--budget", "7"], budget=50, seed_start=False, noise=False)
    assert (b.seeds, b.budget) == (3, 7) and not hasattr(b, "seed_start") and not hasattr(b, "noise")
    with pytest.raises(SystemExit):
        _parse(["--noise", "0.02"], budget=50, noise=False)  # not an option of that script
    assert not hasattr(a, "screen") and _parse(["--screen"], budget=50, screen=True).screen


@pytest.mark.parametrize("argv, named", [(["--seeds", "0"], "--seeds"), (["--budget", "-1"], "--budget"),
                                         (["--jobs", "0"], "--jobs"), (["--seed-start", "-2"], "--seed-start"),
                                         (["--noise", "-0.1"], "--noise")])  # fmt: skip
def test_a_bad_value_is_a_usage_error_naming_its_option(argv, named, capsys):
    with pytest.raises(SystemExit) as e:
        _parse(argv, budget=50)
    assert e.value.code == 2 and named in capsys.readouterr().err
