"""Derived GP inputs: products of knobs that the kernel's performance depends on jointly.

A GP with one length scale per knob (gp.py) models each knob's effect as smooth, and an interaction between two
knobs only once it has seen enough configs to pin it down. Some interactions follow from how the kernel maps
onto the hardware, so they can be given to the GP as inputs of their own:

* `rows_per_warp` = log2(BLOCK_M / num_warps): each warp of a program computes BLOCK_M / num_warps query rows
  (the MMA tiles are 16 rows per warp on NVIDIA and 16/32 on AMD). Doubling BLOCK_M without doubling the warps
  doubles every warp's registers and work; doubling both keeps the per-warp tile. The good configs sit along a
  diagonal of (BLOCK_M, num_warps), not at an optimum of each knob alone.
* `kv_pipeline` = log2(BLOCK_N * num_stages): the K/V tiles held in flight by the software pipeline, i.e. the
  shared-memory footprint per program and the latency it hides; deep pipelines pay off for narrow K/V tiles.

Each feature is present only when the space has both of its knobs with more than one value between them, and is
scaled to [0, 1] over the feasible candidates, like the space's own encoding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

FEATURES = {
    "rows_per_warp": (("BLOCK_M", "num_warps"), lambda c: math.log2(c["BLOCK_M"] / c["num_warps"])),
    "kv_pipeline": (("BLOCK_N", "num_stages"), lambda c: math.log2(c["BLOCK_N"] * c["num_stages"])),
}


class DerivedFeatures:
    """The features of `names` that apply to the space, scaled to [0, 1] over `candidates`."""

    def __init__(self, space, candidates: Sequence[Mapping[str, Any]], names: Sequence[str] = tuple(FEATURES)):
        unknown = set(names) - set(FEATURES)
        if unknown:
            raise ValueError(f"unknown derived feature(s) {sorted(unknown)}; known: {sorted(FEATURES)}")
        varying = {p.name for p in space.params if len(p.values) > 1}
        have = {p.name for p in space.params}
        self.names: list[str] = []
        self._lo: list[float] = []
        self._span: list[float] = []
        for name in names:
            knobs, f = FEATURES[name]
            if not set(knobs) <= have or not set(knobs) & varying:
                continue
            v = np.array([f(c) for c in candidates], dtype=float)
            if not len(v) or v.max() == v.min():
                continue
            self.names.append(name)
            self._lo.append(float(v.min()))
            self._span.append(float(v.max() - v.min()))

    def transform(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        out = np.zeros((len(configs), len(self.names)))
        for j, name in enumerate(self.names):
            f = FEATURES[name][1]
            out[:, j] = [(f(c) - self._lo[j]) / self._span[j] for c in configs]
        return out
