"""The version-guarded private Ray functions of `doctor` act on the installed Ray (or the guard says it is not one
they were checked on)."""

import os

from raytune_attn.tune import ray_private


def test_the_installed_ray_is_one_the_functions_were_checked_on():
    # A Ray upgrade fails here first: read the two private functions again, then move SUPPORTED.
    assert ray_private.supported()


def test_auto_takes_ray_address(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6399")
    assert ray_private.auto_address() == "127.0.0.1:6399"
    # Without $RAY_ADDRESS, Ray's own resolution reads the last cluster started on this machine, which depends on
    # what else ran here: not asserted.


def test_token_auth_setup_runs_and_respects_an_explicit_mode(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert ray_private.enable_token_auth() is True
    assert os.environ["RAY_AUTH_MODE"] == "disabled"
