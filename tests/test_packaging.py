"""The package as `pip install 'raytune-attn[tune]'` installs it, not as a clone runs it: a wheel built from the
project's files carries the shipped search spaces and problem sets, and an install of it finds them by name."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "raytune_attn", "search_spaces", "pipelines/problems")


def _isolation():
    """pip's isolated build downloads the build backend, which a host without a package index cannot; where this
    environment already has a setuptools that pyproject.toml's build requirement accepts, the build uses it."""
    try:
        import setuptools
        import tomllib  # Python 3.11+
        from packaging.requirements import Requirement
    except ImportError:
        return []
    (need,) = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    return ["--no-build-isolation"] if Requirement(need).specifier.contains(setuptools.__version__) else []


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """A wheel built from a copy of the sources (links kept as links, as git keeps them)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(ROOT / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *_isolation(), str(src), "-w", str(dist)],
                   check=True, capture_output=True, text=True, timeout=600)
    (whl,) = dist.glob("raytune_attn-*.whl")
    return whl


@pytest.mark.slow
def test_the_wheel_carries_every_shipped_space_and_problem_set(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    spaces = {f"raytune_attn/tune/search_spaces/{p.parent.name}/{p.name}" for p in ROOT.glob("search_spaces/*/*.yaml")}
    problems = {f"raytune_attn/tune/problem_sets/{p.name}" for p in ROOT.glob("pipelines/problems/*.yaml")}
    assert spaces and problems and spaces | problems <= names


@pytest.mark.slow
def test_an_install_of_the_wheel_loads_spaces_and_problem_sets_by_name(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, text=True, timeout=300)
    code = ("import raytune_attn\n"
            "from raytune_attn.tune.search.space import SPACES_DIR, load_space\n"
            "from raytune_attn.tune.sweep.problems import PROBLEMS_DIR, load_problems\n"
            "print(raytune_attn.__file__, SPACES_DIR, PROBLEMS_DIR)\n"
            "print(load_space('nvidia/sm90').size, len(load_problems('standard')))\n"
            "print(load_space('search_spaces/nvidia/sm90.yaml').size,"
            " len(load_problems('pipelines/problems/standard.yaml')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": ""},
                         capture_output=True, text=True, timeout=300, check=True).stdout.split("\n")
    assert all(p.startswith(str(site)) for p in out[0].split())  # the installed files, not this clone's
    from raytune_attn.tune.search.space import load_space
    from raytune_attn.tune.sweep.problems import load_problems

    sizes = [str(load_space("nvidia/sm90").size), str(len(load_problems("standard")))]
    assert out[1].split() == out[2].split() == sizes  # by name, and by the repository's path from elsewhere
