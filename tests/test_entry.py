"""The entry points (`raytune-attn`, `python -m raytune_attn`, pipelines/sweep.py): an install without the tune extra
gets the install command, before a sweep starts Ray, instead of a traceback."""

import importlib.util
import sys
from pathlib import Path

import pytest

from raytune_attn import _entry

ROOT = Path(__file__).resolve().parents[1]


def test_the_console_script_runs_the_entry_point_that_names_the_extra():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["raytune-attn"] == "raytune_attn._entry:main"


def _without_skopt(monkeypatch):
    """scikit-optimize as if not installed: the GP's module imports it again and fails."""
    monkeypatch.delitem(sys.modules, "raytune_attn.tune.search.gp", raising=False)
    for name in [m for m in sys.modules if m == "skopt" or m.startswith("skopt.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "skopt", None)


def test_a_missing_part_of_the_tune_extra_is_named_with_the_install_command(monkeypatch, capsys):
    _without_skopt(monkeypatch)
    assert _entry.run("raytune_attn.tune.search.gp", []) == 2
    err = capsys.readouterr().err
    assert err.strip() == "raytune-attn: the tuner needs its extra: pip install 'raytune-attn[tune]' (skopt is missing)"


def test_other_missing_modules_are_not_taken_for_the_extra():
    with pytest.raises(ModuleNotFoundError, match="raytune_attn.no_such_module"):
        _entry.run("raytune_attn.no_such_module", [])


def _load_pipeline():
    spec = importlib.util.spec_from_file_location("pipeline_sweep", ROOT / "pipelines" / "sweep.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cluster_pipeline_names_the_extra_before_ray_starts(monkeypatch, tmp_path, capsys):
    ray = pytest.importorskip("ray")
    _without_skopt(monkeypatch)
    ray_before = ray.is_initialized()  # another test of this worker may hold a Ray of its own
    out = tmp_path / "out"
    argv = ["--address", "local", "--problems", str(ROOT / "pipelines/problems/cpu_smoke.yaml"), "--budget", "1",
            "--out", str(out), "--no-mlflow"]
    assert _load_pipeline().main(argv) == 2
    assert "pip install 'raytune-attn[tune]' (skopt is missing)" in capsys.readouterr().err
    assert ray.is_initialized() == ray_before and not out.exists()


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_the_cluster_pipelines_help_says_what_differs_from_tune(flag, capsys):
    assert _load_pipeline().main([flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith("pipelines/sweep.py takes the flags of `raytune-attn tune`") and "--address auto" in out
    assert "--problems" in out  # tune's own flags follow
