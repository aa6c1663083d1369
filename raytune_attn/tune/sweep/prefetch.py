"""What a sweep compiles before its trials ask: each search's initial design, then the configs its first local
steps are likely to take.

Compile latency, not throughput, is a GP sweep's critical path: each search's next configs depend on its last
results, and a new config waits 2-15 s (tens of seconds for some) on its compile. On two H200s (32 cores)
showed two stalls: at the start (every search waits on its design) and after the design (every search's first
local steps need new binaries at once, and both GPUs idled for about 10 s). So the driver queues:
1. the design of every search (`design_configs()`, position by position: every search's first config, then every
   second one, ...) at normal priority, while the baselines run;
2. the design's neighbourhood, speculatively: the configs one step (a knob one value up or down, or a coupled
   pair of knobs one step each, as the GP's local moves) from a design config, nearest the default first. The GP's
   first local steps start from the best design configs and take such neighbours. The compile actor runs these
   only on workers no trial's compile is waiting for (`CompileActor`, `speculative=True`).
Each binary once per node (configs of problems that share a `specialization` are one binary).

Then, during the sweep, each search's actor (`SearchHost`, with a `Speculator`) queues what it just suggested
and the runner-ups of that pick (`GPSearcher.likely_next`): while a result is out, a GP search's next pick is
usually one of them. A sweep on two H200s had trials waiting 550 s in all on compiles of configs the searches had
just chosen, while the 31 compile processes were busy about a third of the Tune phase.
"""

from __future__ import annotations

import os

from raytune_attn.problem import Problem
from raytune_attn.tune.measure.compile_pool import specialization

MAX_QUEUED = 256  # binaries queued ahead per node (each holds a compile actor thread while it waits)


def neighbours(space, config: dict, allowed: set) -> list[dict]:
    """Configs of `allowed` (space keys) one step from `config`: one knob one value up or down, or both knobs of a
    coupled pair one value each."""
    names = [p.name for p in space.params]
    idx = {p.name: p.values.index(config[p.name]) for p in space.params}
    moves = [{n: d} for n in names for d in (-1, 1)]
    # The space's coupled pairs: the two-knob steps the GP takes too (space file `coupled:`).
    pairs = [c.knobs for c in space.priors.coupled]
    moves += [{a: da, b: db} for a, b in pairs if a in idx and b in idx for da in (-1, 1) for db in (-1, 1)]
    out = []
    for mv in moves:
        cfg = dict(config)
        for n, d in mv.items():
            j = idx[n] + d
            values = next(p.values for p in space.params if p.name == n)
            if not 0 <= j < len(values):
                break
            cfg[n] = values[j]
        else:
            if space.key(cfg) in allowed:
                out.append(cfg)
    return out


def plan(searches) -> tuple[list, list]:
    """(design, speculative): lists of (search, config), each binary of a search's accelerator type once."""
    seen: set = set()
    design, spec = [], []

    def add(dest, s, cfg):
        key = (s.accel, specialization(Problem.from_dict(s.problem), cfg))
        if key not in seen:
            seen.add(key)
            dest.append((s, cfg))

    designs = [(s, list(getattr(s.searcher, "design_configs", list)())) for s in searches]
    for pos in range(max((len(d) for _, d in designs), default=0)):
        for s, d in designs:
            if pos < len(d):
                add(design, s, d[pos])
    for s, d in designs:
        if not d:
            continue
        space = s.searcher.space
        allowed = {space.key(c) for c in s.searcher.candidates}
        for cfg in d:
            for n in neighbours(space, cfg, allowed):
                add(spec, s, n)
    return design, spec


def _handles(compilers: dict, groups: dict) -> dict:
    """Accelerator type -> the compile actors of its nodes (node id -> actor in `compilers`; None on a node without
    compile processes)."""
    return {accel: [compilers[n["node_id"]] for n in nodes if compilers.get(n["node_id"]) is not None]
            for accel, nodes in groups.items()}


def submit(searches, compilers: dict, groups: dict) -> tuple[int, int]:
    """Queue the plan's compiles on every node of each search's accelerator type (fire and forget: a trial asking
    for one later waits on that build); returns (design, speculative) binaries queued."""
    by_accel = _handles(compilers, groups)
    design, spec = plan(searches)
    design = design[:MAX_QUEUED]
    spec = spec[: MAX_QUEUED - len(design)]
    _REFS.clear()  # only this sweep's: an earlier sweep's are done or moot
    n = [0, 0]
    for k, (items, speculative) in enumerate(((design, False), (spec, True))):
        for s, cfg in items:
            handles = by_accel.get(s.accel, [])
            for h in handles:
                _REFS.append(h.compile.remote(s.problem, cfg, speculative))
            n[k] += bool(handles)
    return n[0], n[1]


_REFS: list = []  # kept so that nothing cancels the queued compiles; their outcomes reach trials via the actor


class Speculator:
    """Compiles ahead what one search is about to ask for, on the compile actors of its accelerator type's nodes.

    `submit(suggested, likely)`: the config just suggested (a trial will run it: normal priority) and the configs
    likely next (speculative: only on compile processes no waiting trial needs). At most `cap` speculative builds of
    this search are queued at once (each holds a compile actor thread while it waits), and a binary is queued once.
    Lives in the search's actor; the compile actors hand the outcomes to the trials that ask."""

    def __init__(self, problem: dict, handles: list, cap: int = 4):
        self.problem, self.handles, self.cap = dict(problem), list(handles), int(cap)
        self._problem = Problem.from_dict(problem)
        self._seen: set = set()
        self._refs: list = []  # speculative builds in flight

    def _new(self, cfg: dict) -> bool:
        key = specialization(self._problem, cfg)
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def submit(self, suggested: dict | None, likely: list[dict]) -> int:
        """Queue the builds; returns how many binaries were queued."""
        import ray

        if not self.handles:
            return 0
        if self._refs:
            _, self._refs = ray.wait(self._refs, num_returns=len(self._refs), timeout=0)
        n = 0
        if isinstance(suggested, dict) and self._new(suggested):
            for h in self.handles:
                h.compile.remote(self.problem, suggested, False)
            n += 1
        for cfg in likely:
            if len(self._refs) >= self.cap * len(self.handles):
                break
            if self._new(cfg):
                self._refs += [h.compile.remote(self.problem, cfg, True) for h in self.handles]
                n += 1
        return n


def speculators(searches, compilers: dict, groups: dict) -> dict:
    """A `Speculator` per search (key -> Speculator) with the compile actors of its accelerator type's nodes; none
    with the benchmark hook RAYTUNE_ATTN_NO_SPECULATION=1 (an A/B of what speculation costs the node's CPUs)."""
    if os.environ.get("RAYTUNE_ATTN_NO_SPECULATION") == "1":
        return {}
    by_accel = _handles(compilers, groups)
    return {s.key: Speculator(s.problem, by_accel[s.accel]) for s in searches if by_accel.get(s.accel)}
