"""Test set-up: without a GPU, every kernel runs in the Triton interpreter on the CPU.

TRITON_INTERPRET must be set before any @triton.jit function is defined, so it is set here, before the package
is imported by any test module.

On a GPU the parametrized kernel tests mark the cases outside their fast set `gpu_slow` (test_flash_attn.py says
how the fast set is chosen). A run whose `-m` expression does not name gpu_slow (or that has none) leaves those
out, so the GPU suite fits in one short device call; `-m gpu_slow` runs only them, `-m "gpu_slow or not gpu_slow"`
everything (docs/gpu-tests.md).

Under pytest-xdist (`make test-fast` runs `-n auto --dist loadgroup`) the test files that start Ray (a local cluster, a
`ray start` head, a sweep) run one after another in one worker: `ray.init()` joins a cluster already running on the
machine, so two of them side by side would share one.
"""

import os
from pathlib import Path

import pytest
import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = "cuda" if HAS_GPU else "cpu"
_RAY_FILES = {"test_cli.py", "test_deploy.py", "test_doctor_ray_private.py", "test_pipeline_submit.py",
              "test_sweep_cluster.py", "test_sweep_simulated.py", "test_sweep_tracking_host.py", "test_sweep_units.py",
              "test_tracking.py", "test_bench.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).name in _RAY_FILES:
            item.add_marker(pytest.mark.xdist_group("ray"))
    if "gpu_slow" in config.option.markexpr:  # the caller chose them with -m (`-m "not slow"` does not)
        return
    slow = [item for item in items if item.get_closest_marker("gpu_slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("gpu_slow")]
