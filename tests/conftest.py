"""Test set-up: without a GPU, every kernel runs in the Triton interpreter on the CPU.

TRITON_INTERPRET must be set before any @triton.jit function is defined, so it is set here, before the package
is imported by any test module.
"""

import os

import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = "cuda" if HAS_GPU else "cpu"
