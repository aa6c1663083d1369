"""Baselines through the same Searcher interface: random search without replacement, and exhaustive grid."""

from __future__ import annotations

import numpy as np

from raytune_attn.tune.search.base import DiscreteSearcher


class RandomSearcher(DiscreteSearcher):
    """Feasible configs in a random order fixed by the seed; each is suggested at most once."""

    name = "random"

    def __init__(self, space, **kw):
        super().__init__(space, **kw)
        self._rank = np.random.default_rng(self.seed).permutation(len(self.candidates))

    def _pick(self, available: np.ndarray) -> int:
        return int(available[np.argmin(self._rank[available])])

    def set_state(self, state: dict) -> None:
        self._rank = np.random.default_rng(state["seed"]).permutation(len(self.candidates))
        super().set_state(state)


class GridSearcher(DiscreteSearcher):
    """Every feasible config once, in the space's order (the product of the parameters' values)."""

    name = "grid"

    def _pick(self, available: np.ndarray) -> int:
        return int(available[0])


class TPESearcher(DiscreteSearcher):
    """Optuna's TPE (multivariate), the usual baseline of black-box tuners, over the same candidates and failure
    rule as the other searchers: a reference to compare the GP with (`raytune-attn replay --searcher tpe`).

    Knobs with ordered values (log2 or index encoding) are integer ranks, so TPE's kernel sees their order; the
    others are categorical. TPE samples from the whole product of values: a sample that is no free candidate (a
    constraint excludes it, or it is measured or in flight) is told to Optuna as failed and TPE samples again, up
    to `_TRIES` times, then the free candidate nearest the last sample (in the GP's encoding) is taken. Measured
    configs enter the study as completed trials, failed ones as failed trials (Optuna's own rule). The sampler is
    seeded from the seed and the number of observations, so a restored search suggests what the saved one would.
    Needs `pip install optuna` (the `tpe` extra)."""

    name = "tpe"
    _TRIES = 20

    def __init__(self, space, *, n_startup: int = 10, **kw):
        self._optuna, self.n_startup = self._import_optuna(), int(n_startup)
        super().__init__(space, **kw)
        from raytune_attn.tune.search.encoding import Encoding

        self._encoding = Encoding(self.space)
        self._X = self._encoding.transform(self.candidates)
        D = self._optuna.distributions
        self._params = [p for p in self.space.params if len(p.values) > 1]
        self._dists = {p.name: (D.IntDistribution(0, len(p.values) - 1) if p.encoding in ("log2", "index")
                                else D.CategoricalDistribution(list(p.values))) for p in self._params}  # fmt: skip
        self._reset()

    @classmethod
    def check_dependencies(cls) -> None:
        cls._import_optuna()

    @staticmethod
    def _import_optuna():
        try:
            import optuna
        except ImportError as e:
            raise ImportError("the tpe searcher needs Optuna: pip install 'raytune-attn[tpe]'") from e
        return optuna

    def _reset(self) -> None:
        if not hasattr(self, "_dists"):
            return  # DiscreteSearcher.__init__ runs before the distributions exist; __init__ calls _reset again
        optuna = self._optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._study = optuna.create_study(direction="maximize" if self.mode == "max" else "minimize")

    def _config(self, params: dict) -> dict:
        cfg = {p.name: p.values[0] for p in self.space.params}
        for p in self._params:
            v = params[p.name]
            cfg[p.name] = p.values[v] if p.encoding in ("log2", "index") else v
        return cfg

    def _trial_params(self, i: int) -> dict:
        c = self.candidates[i]
        return {p.name: (p.values.index(c[p.name]) if p.encoding in ("log2", "index") else c[p.name])
                for p in self._params}  # fmt: skip

    def _pick(self, available: np.ndarray) -> int:
        import warnings

        optuna = self._optuna
        free = np.zeros(len(self.candidates), dtype=bool)
        free[available] = True
        cfg = None
        for attempt in range(self._TRIES):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # multivariate TPE is "experimental" in Optuna's terms
                self._study.sampler = optuna.samplers.TPESampler(
                    multivariate=True, n_startup_trials=self.n_startup,
                    seed=(self.seed * 1_000_003 + len(self._obs) * 101 + attempt) % 2**31)  # fmt: skip
                trial = self._study.ask(self._dists)
            cfg = self._config(trial.params)
            self._study.tell(trial, state=optuna.trial.TrialState.FAIL)  # only measured configs count as complete
            i = self._index.get(self.space.key(cfg))
            if i is not None and free[i]:
                return i
        d = ((self._X[available] - self._encoding.transform([cfg])[0]) ** 2).sum(axis=1)
        return int(available[int(np.argmin(d))])

    def _observe(self, i: int, value: float | None) -> None:
        optuna = self._optuna
        state = optuna.trial.TrialState.COMPLETE if value is not None else optuna.trial.TrialState.FAIL
        self._study.add_trial(optuna.trial.create_trial(params=self._trial_params(i), distributions=self._dists,
                                                        value=value, state=state))  # fmt: skip
