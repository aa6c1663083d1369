"""A space file's priors: where a search starts, which multi-knob moves it screens, which knobs move together.

What is known about a GPU's good configs is data of its space file (search_spaces/<vendor>/<arch>.yaml), not
code: the searcher reads it generically and names no knob. Three optional keys:

    start:      # the config a search starts from, built in order: each entry whose `when:` holds sets its knobs
      - set: {BLOCK_M: 128, BLOCK_N: 64, num_warps: 4, num_stages: 2}
      - when: head_dim == 128
        set: {num_warps: 8}
    moves:      # configs screened right after the start and its one-knob neighbours, in this order
      - name: scale up
        step: {BLOCK_M: 1, BLOCK_N: 1, num_warps: 1}  # +n / -n: n values up / down in the knob's listed order
      - name: short causal
        when: causal and BLOCK_M >= seqlen_q / 8        # over the problem and the start
        step: {BLOCK_M: -1, num_stages: 1}
        set: {num_warps: BLOCK_M // 32}                  # a value, or an expression over the problem and the start
        prefer: {set: {REVERSE_M: true}}                 # tried first; the plain move where the space lacks it
    coupled:    # knob pairs that move together; `keep` is the quantity a two-knob step holds nearest constant
      - {knobs: [BLOCK_M, num_warps], keep: BLOCK_M / num_warps}

`when:` and string values of `set:` are the restricted expressions of `constraints:` (_expr.py). They may read the
problem's fields (PROBLEM_FIELDS) and, in moves, the start's knobs. A condition naming a problem field the search
was not given, or a knob its space lacks, does not hold. Knobs the start leaves unset take their first listed
value. A move applies when its result is a value of every knob it names; the searcher then screens it if the
result is one of its candidates.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raytune_attn.problem import Problem
from raytune_attn.tune.search._expr import Expression, SpaceError, compile_expression

PROBLEM_FIELDS = tuple(f.name for f in dataclasses.fields(Problem))
# A problem to evaluate each condition on once at load time, so that type errors surface there.
_PROBE = {"batch": 1, "hq": 8, "hkv": 8, "seqlen_q": 1024, "seqlen_k": 1024, "head_dim": 128, "causal": True,
          "dtype": "bfloat16", "varlen": False}  # fmt: skip


@dataclass(frozen=True)
class Setting:
    """Knob values set when `when` holds: an entry of `start:`, or a move's `prefer:`."""

    values: tuple[tuple[str, Any], ...]
    when: Expression | None = None


@dataclass(frozen=True)
class Move:
    """Knobs stepped along their listed values (`step`) and set (`set`: a value or an Expression) from a start."""

    name: str
    step: tuple[tuple[str, int], ...] = ()
    set: tuple[tuple[str, Any], ...] = ()
    when: Expression | None = None
    prefer: Setting | None = None

    @property
    def knobs(self) -> set[str]:
        return {k for k, _ in self.step} | {k for k, _ in self.set}


@dataclass(frozen=True)
class Coupled:
    """Two knobs that step together; `keep` (over a config, positive) is what a two-knob step keeps nearest."""

    knobs: tuple[str, str]
    keep: Expression

    def log_keep(self, config: Mapping[str, Any]) -> float:
        return math.log2(self.keep(config))


@dataclass(frozen=True)
class Priors:
    start: tuple[Setting, ...] = ()
    moves: tuple[Move, ...] = ()
    coupled: tuple[Coupled, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.start or self.moves or self.coupled)

    def without(self, *moves: str) -> Priors:
        """These priors less the named moves."""
        unknown = set(moves) - {m.name for m in self.moves}
        if unknown:
            raise ValueError(f"no move named {sorted(unknown)}; moves are {[m.name for m in self.moves]}")
        return dataclasses.replace(self, moves=tuple(m for m in self.moves if m.name not in moves))


# ---- problems ---------------------------------------------------------------------------------------------------
def problem_fields(problem: Problem | Mapping[str, Any] | None) -> dict[str, Any]:
    """Every problem field, None where unknown: from a Problem, a mapping of some of its fields, or None."""
    if problem is None:
        given: Mapping[str, Any] = {}
    elif isinstance(problem, Problem):
        given = dataclasses.asdict(problem)
    elif isinstance(problem, Mapping):
        unknown = sorted(set(problem) - set(PROBLEM_FIELDS))
        if unknown:
            raise ValueError(f"unknown problem field(s) {unknown}; known fields are {list(PROBLEM_FIELDS)}")
        given = problem
    else:
        raise TypeError(f"problem must be a Problem, a mapping of its fields or None, got {type(problem).__name__}")
    return {name: given.get(name) for name in PROBLEM_FIELDS}


def holds(cond: Expression | None, env: Mapping[str, Any]) -> bool:
    """True when `cond` is absent or true; false when it reads a name `env` lacks or holds None (unknown)."""
    if cond is None:
        return True
    if any(env.get(n) is None for n in cond.names):
        return False
    return bool(cond(env))


def _member(value: Any, values: Sequence) -> bool:
    """`value in values`, where a bool and an int never stand for each other."""
    return any(value == v and isinstance(value, bool) == isinstance(v, bool) for v in values)


# ---- applying them ----------------------------------------------------------------------------------------------
def start_config(priors: Priors, params: Mapping[str, Sequence], problem: Mapping[str, Any]) -> dict | None:
    """The start for a space with these `params` (knob -> listed values) and problem; None without a `start:`.
    Values of knobs the space lacks are left out; knobs no entry sets take their first value."""
    if not priors.start:
        return None
    cfg = {name: values[0] for name, values in params.items()}
    for entry in priors.start:
        if holds(entry.when, problem):
            cfg.update((k, v) for k, v in entry.values if k in params)
    return cfg


def apply_move(move: Move, start: Mapping[str, Any], params: Mapping[str, Sequence],
               problem: Mapping[str, Any]) -> list[dict]:
    """The configs `move` makes of `start`, preferred form first; [] when it does not apply here."""
    env = {**problem, **start}
    if not holds(move.when, env) or not move.knobs <= set(params):
        return []
    cfg = dict(start)
    for knob, n in move.step:
        k = list(params[knob]).index(start[knob]) + n
        if not 0 <= k < len(params[knob]):
            return []
        cfg[knob] = params[knob][k]
    for knob, value in move.set:
        if isinstance(value, Expression):
            if any(env.get(n) is None for n in value.names):
                return []
            value = value(env)
        if not _member(value, params[knob]):
            return []
        cfg[knob] = value
    pref = move.prefer
    if pref is None or not holds(pref.when, env):
        return [cfg]
    if not all(k in params and _member(v, params[k]) for k, v in pref.values):
        return [cfg]
    return [{**cfg, **dict(pref.values)}, cfg]


# ---- parsing ----------------------------------------------------------------------------------------------------
def parse_priors(doc: Mapping[str, Any], params: Mapping[str, Sequence], configs: Sequence[Mapping[str, Any]],
                 source: str) -> Priors:
    """The `start:`, `moves:` and `coupled:` of a space file whose parameters are `params` (knob -> values);
    `configs` are its feasible configs (each `keep` must be positive on them). SpaceError names the entry."""
    start = tuple(_setting(e, params, source, f"start[{i}]", PROBLEM_FIELDS)
                  for i, e in enumerate(_list(doc, "start", source)))  # fmt: skip
    moves = tuple(_move(e, params, source, f"moves[{i}]") for i, e in enumerate(_list(doc, "moves", source)))
    names = [m.name for m in moves]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise SpaceError(source, f"moves[{i}].name", f"{name!r} names an earlier move too")
    coupled = tuple(_coupled(e, params, configs, source, f"coupled[{i}]")
                    for i, e in enumerate(_list(doc, "coupled", source)))  # fmt: skip
    return Priors(start, moves, coupled)


def _list(doc: Mapping[str, Any], key: str, source: str) -> list:
    entries = doc.get(key) or []
    if not isinstance(entries, list):
        raise SpaceError(source, key, "must be a list")
    return entries


def _mapping(entry: Any, keys: set[str], source: str, key: str) -> Mapping[str, Any]:
    if not isinstance(entry, dict):
        raise SpaceError(source, key, f"must be a mapping with keys {', '.join(sorted(keys))}")
    extra = sorted(set(entry) - keys)
    if extra:
        raise SpaceError(source, f"{key}.{extra[0]}", f"unknown key (known: {', '.join(sorted(keys))})")
    return entry


def _when(entry: Mapping[str, Any], names: Sequence[str], source: str, key: str, probe: Mapping) -> Expression | None:
    if "when" not in entry:
        return None
    what = "a problem field" + (" or a knob of this space" if len(names) > len(PROBLEM_FIELDS) else "")
    cond = compile_expression(entry["when"], names, source=source, key=f"{key}.when", what=what)
    try:
        holds(cond, probe)
    except Exception as e:  # noqa: BLE001 - any evaluation error is the file's mistake
        raise SpaceError(source, f"{key}.when", f"{cond.expr!r} fails to evaluate: {e}") from None
    return cond


def _values(raw: Any, params: Mapping[str, Sequence], source: str, key: str, exprs: Sequence[str] = ()) -> tuple:
    """knob -> value pairs of a `set:`; a string is an expression over `exprs` (none allowed when empty)."""
    if not isinstance(raw, dict) or not raw:
        raise SpaceError(source, key, "must be a non-empty mapping of knob -> value")
    out = []
    for knob, value in raw.items():
        if knob not in params:
            raise SpaceError(source, f"{key}.{knob}", f"not a parameter of this space ({', '.join(params)})")
        if isinstance(value, str) and exprs:
            value = compile_expression(value, exprs, source=source, key=f"{key}.{knob}",
                                       what="a problem field or a knob of this space")  # fmt: skip
        elif not _member(value, params[knob]):
            raise SpaceError(source, f"{key}.{knob}", f"{value!r} is not one of its values {list(params[knob])}")
        out.append((knob, value))
    return tuple(out)


def _setting(entry: Any, params: Mapping[str, Sequence], source: str, key: str, names: Sequence[str]) -> Setting:
    entry = _mapping(entry, {"when", "set"}, source, key)
    if "set" not in entry:
        raise SpaceError(source, f"{key}.set", "missing")
    probe = {**_PROBE, **{k: v[0] for k, v in params.items()}}
    return Setting(_values(entry["set"], params, source, f"{key}.set"), _when(entry, names, source, key, probe))


def _move(entry: Any, params: Mapping[str, Sequence], source: str, key: str) -> Move:
    entry = _mapping(entry, {"name", "when", "step", "set", "prefer"}, source, key)
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpaceError(source, f"{key}.name", "every move needs a name (a non-empty string)")
    if "step" not in entry and "set" not in entry:
        raise SpaceError(source, key, "a move needs `step:`, `set:` or both")
    names = [*PROBLEM_FIELDS, *params]
    probe = {**_PROBE, **{k: v[0] for k, v in params.items()}}
    step = []
    raw = entry.get("step", {})
    if not isinstance(raw, dict) or ("step" in entry and not raw):
        raise SpaceError(source, f"{key}.step", "must be a non-empty mapping of knob -> +n / -n")
    for knob, n in raw.items():
        if knob not in params:
            raise SpaceError(source, f"{key}.step.{knob}", f"not a parameter of this space ({', '.join(params)})")
        if isinstance(n, bool) or not isinstance(n, int) or n == 0:
            raise SpaceError(source, f"{key}.step.{knob}", f"must be a non-zero integer (values up or down), got {n!r}")
        step.append((knob, n))
    sets = _values(entry["set"], params, source, f"{key}.set", names) if "set" in entry else ()
    both = {k for k, _ in step} & {k for k, _ in sets}
    if both:
        raise SpaceError(source, key, f"{sorted(both)[0]} is both stepped and set")
    prefer = _setting(entry["prefer"], params, source, f"{key}.prefer", names) if "prefer" in entry else None
    return Move(name.strip(), tuple(step), sets, _when(entry, names, source, key, probe), prefer)


def _coupled(entry: Any, params: Mapping[str, Sequence], configs: Sequence[Mapping[str, Any]], source: str,
             key: str) -> Coupled:
    entry = _mapping(entry, {"knobs", "keep"}, source, key)
    knobs = entry.get("knobs")
    if not isinstance(knobs, list) or len(knobs) != 2 or knobs[0] == knobs[1]:
        raise SpaceError(source, f"{key}.knobs", f"must name two different knobs, got {knobs!r}")
    for knob in knobs:
        if knob not in params:
            raise SpaceError(source, f"{key}.knobs", f"{knob!r} is not a parameter of this space")
    if "keep" not in entry:
        raise SpaceError(source, f"{key}.keep", "missing")
    keep = compile_expression(entry["keep"], list(params), source=source, key=f"{key}.keep")
    for cfg in configs:
        try:
            v = keep(cfg)
            ok = not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0
        except Exception:  # noqa: BLE001 - any evaluation error is the file's mistake
            ok = False
        if not ok:
            raise SpaceError(source, f"{key}.keep", f"{keep.expr!r} is not a positive number on {dict(cfg)}")
    return Coupled((knobs[0], knobs[1]), keep)
