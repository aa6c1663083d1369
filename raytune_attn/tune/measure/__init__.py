"""Measurement: workloads and their references, timing, SDPA/cuDNN baselines, the compile pool."""
