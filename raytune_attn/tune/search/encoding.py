"""The one place where a search space becomes scikit-optimize dimensions and configs become GP inputs.

Encodings (see space.py): `log2` parameters become a Real over [log2(min), log2(max)] (tile sizes, warps and
stages act multiplicatively, so 16 -> 32 is as big a step as 128 -> 256); `index` parameters an Integer over their
rank; `categorical` ones a Categorical (one-hot, a single 0/1 column for two values). Every dimension is then
normalized to [0, 1] by skopt's transform, so one GP length-scale range fits all. Parameters with a single value
carry no information and get no dimension.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from skopt.space import Categorical, Integer, Real, Space

from raytune_attn.tune.search.space import Param, SearchSpace


def _dimension(p: Param):
    if p.encoding == "log2":
        return Real(math.log2(p.values[0]), math.log2(p.values[-1]), transform="normalize", name=p.name)
    if p.encoding == "index":
        return Integer(0, len(p.values) - 1, transform="normalize", name=p.name)
    return Categorical(list(p.values), transform="onehot", name=p.name)


def _raw(p: Param, value: Any):
    if p.encoding == "log2":
        return math.log2(value)
    if p.encoding == "index":
        return p.values.index(value)
    return value


class Encoding:
    """skopt dimensions of a space, and the transform of configs to points in [0, 1]^d."""

    def __init__(self, space: SearchSpace):
        self.params = [p for p in space.params if len(p.values) > 1]
        self.dimensions = [_dimension(p) for p in self.params]
        self.skopt_space = Space(self.dimensions)

    @property
    def n_dims(self) -> int:
        """Columns of the transformed points (one-hot categoricals of k > 2 values take k columns)."""
        return self.skopt_space.transformed_n_dims

    def to_point(self, config: Mapping[str, Any]) -> list:
        """A config as a point of the skopt space (untransformed)."""
        return [_raw(p, config[p.name]) for p in self.params]

    def transform(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        if not configs:
            return np.zeros((0, self.n_dims))
        if not self.params:
            return np.zeros((len(configs), 0))
        return np.asarray(self.skopt_space.transform([self.to_point(c) for c in configs]), dtype=float)
