"""Test set-up: without a GPU, every kernel runs in the Triton interpreter on the CPU.

TRITON_INTERPRET must be set before any @triton.jit function is defined, so it is set here, before the package
is imported by any test module.

On a GPU the parametrized kernel tests mark the cases outside their fast set `gpu_slow` (test_flash_attn.py says
how the fast set is chosen). A run whose `-m` expression does not name gpu_slow (or that has none) leaves those
out, so the GPU suite fits in one short device call; `-m gpu_slow` runs only them, `-m "gpu_slow or not gpu_slow"`
everything (docs/gpu-tests.md).

Ray and pytest-xdist (`make test` and `make test-fast` run `-n auto --dist loadgroup`): every test process gets a Ray
temp dir of its own (RAY_TMPDIR). A plain `ray.init()` joins the cluster named in `<temp dir>/ray/ray_current_cluster`,
which `ray.cluster_utils.Cluster` writes; with one shared /tmp/ray a test in one worker (or in another pytest on the
machine) joined a cluster another had started, and refused its num_cpus ("When connecting to an existing cluster,
num_cpus and num_gpus must not be provided"). A module whose tests share a module-scoped fixture (a Ray cluster, a
`ray start` head, a tracking server) runs whole in one worker, so that fixture starts once.
"""

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = "cuda" if HAS_GPU else "cpu"
# For tests of CPU-side logic that build CPU tensors or float32 workloads: only the interpreter takes those, and a
# GPU machine's run has no interpreter (TRITON_INTERPRET is set above only without a GPU). CI's CPU run covers them.
interpreter_only = pytest.mark.skipif(HAS_GPU, reason="CPU tensors and float32 workloads run only in the Triton "
                                      "interpreter, which a run on a GPU machine does not use")
# For tests of the tpe searcher: Optuna is an optional extra.
needs_optuna = pytest.mark.skipif(importlib.util.find_spec("optuna") is None,
                                  reason="the tpe searcher needs Optuna: pip install 'raytune-attn[tpe]'")

# Short (Ray's socket paths under it must fit in 107 bytes), and removed when the session ends.
_RAY_TMPDIR = tempfile.mkdtemp(prefix="rt", dir="/tmp")
os.environ["RAY_TMPDIR"] = _RAY_TMPDIR


def _shares_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d.scope in ("module", "package", "session") and d.baseid for ds in defs for d in ds)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if _shares_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(Path(str(item.fspath)).stem))
    if "gpu_slow" in config.option.markexpr:  # the caller chose them with -m (`-m "not slow"` does not)
        return
    slow = [item for item in items if item.get_closest_marker("gpu_slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("gpu_slow")]


def pytest_unconfigure(config):
    shutil.rmtree(_RAY_TMPDIR, ignore_errors=True)
