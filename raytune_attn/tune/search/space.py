"""Declarative search spaces: one YAML file per vendor and architecture (`search_spaces/<vendor>/<arch>.yaml`).

File format (schema_version 1)::

    schema_version: 1
    vendor: nvidia            # nvidia | amd | cpu
    arch: sm90                # one of the vendor's; picks the resource limits of the pre-filter (see resources.ARCHS)
    parameters:               # knob name -> its values, in order (ordinal knobs small to large)
      BLOCK_M: [16, 32, 64, 128, 256]
      PRE_LOAD_V: [false, true]
      waves_per_eu: {values: [0, 1, 2], encoding: index}   # long form: pick the GP encoding
    constraints:              # conditions (Python, true or false) over the parameter names; a config must satisfy all
      - BLOCK_M >= BLOCK_N
    start: [...]              # priors (optional): where a search starts, the multi-knob moves it screens and
    moves: [...]              # the knob pairs that step together; see priors.py
    coupled: [...]

Encodings (how the GP sees a parameter): `log2` (default for positive integers: tile sizes, warps and stages act
multiplicatively), `index` (rank among the values; default for integers that include 0, where 0 means "auto"),
`categorical` (default for booleans). Parameter names must be kernel knobs (`raytune_attn.config.KNOBS`).
A key given twice in one mapping is an error (yaml_input.py), as is a non-UTF-8 file.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raytune_attn import validation
from raytune_attn.config import AMD_ONLY_KNOBS, KNOBS, InvalidConfig
from raytune_attn.tune.search._expr import Constraint, Expression, SpaceError, compile_constraint
from raytune_attn.tune.search.priors import Priors, parse_priors
from raytune_attn.tune.yaml_input import YamlInputError, read_yaml, schema_version_problem

SCHEMA_VERSION = 1
VENDORS = ("nvidia", "amd", "cpu")
ENCODINGS = ("log2", "index", "categorical")
# The package's link to the repository's search_spaces/ (a wheel holds the files themselves), resolved so that
# messages name the files where a clone keeps them.
SPACES_DIR = (Path(__file__).resolve().parents[1] / "search_spaces").resolve()
_KEYS = ("schema_version", "vendor", "arch", "parameters", "constraints", "description", "start", "moves", "coupled")


@dataclass(frozen=True)
class Param:
    name: str
    values: tuple  # in the file's order; ordinal parameters are sorted ascending
    encoding: str


@dataclass(frozen=True)
class SearchSpace:
    """Parameters with ordered values, constraints between them, and (for recorded landscapes) an explicit set of
    allowed configs. `configs()` enumerates every feasible config in a fixed order: the grid's and the GP's."""

    params: tuple[Param, ...]
    constraints: tuple[Constraint, ...] = ()
    vendor: str = "cpu"
    arch: str = "interpreter"
    source: str = "<memory>"
    allowed: frozenset | None = None  # tuples of values in param order; None = the whole constrained product
    priors: Priors = Priors()  # where a search starts and what it screens (priors.py); none for a table's space

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def size_unconstrained(self) -> int:
        return math.prod(len(p.values) for p in self.params)

    def key(self, config: Mapping[str, Any]) -> tuple:
        """A hashable identity of a config over this space's parameters (extra knobs are ignored)."""
        return tuple(config[n] for n in self.names)

    def to_config(self, key: Sequence) -> dict[str, Any]:
        return dict(zip(self.names, key, strict=True))

    def contains(self, config: Mapping[str, Any]) -> bool:
        """True when every parameter has one of its values and all constraints hold."""
        try:
            k = self.key(config)
        except KeyError:
            return False
        # `in` alone would let 1 stand for True (bool is an int): also require the same bool-ness.
        for v, p in zip(k, self.params, strict=True):
            if v not in p.values or isinstance(v, bool) != isinstance(p.values[0], bool):
                return False
        if self.allowed is not None and k not in self.allowed:
            return False
        return all(c(config) for c in self.constraints)

    def configs(self) -> list[dict[str, Any]]:
        """Every feasible config, in the product order of the parameters' values.

        The product is walked depth-first and each constraint is checked as soon as the parameters it and every
        constraint before it read are set, which prunes whole subtrees (the Hopper space: 2.3M combinations, 9248
        configs). The constraints still run in their listed order, each only where those before it held, as over
        the full product: a constraint guarded by an earlier one raises where it did before, and nowhere else."""
        return self._enumerate(lambda c, cfg: c(cfg))

    def _enumerate(self, holds: Callable[[Constraint, dict], bool]) -> list[dict[str, Any]]:
        """`configs()`, with `holds(constraint, config)` judging each constraint (the loader's also checks it)."""
        names, cfg, out = self.names, {}, []
        checks = self._checks_by_depth()

        def walk(depth: int) -> None:
            if depth == len(names):
                if self.allowed is None or tuple(cfg[n] for n in names) in self.allowed:
                    out.append(dict(cfg))
                return
            for v in self.params[depth].values:
                cfg[names[depth]] = v
                if all(holds(c, cfg) for c in checks[depth]):
                    walk(depth + 1)
            del cfg[names[depth]]

        walk(0)
        return out

    def _checks_by_depth(self) -> list[list[Constraint]]:
        """For each parameter, the constraints to check once it is set: constraint k goes where every parameter
        read by constraints 0..k is set (so their listed order is kept)."""
        index = {n: i for i, n in enumerate(self.names)}
        checks: list[list[Constraint]] = [[] for _ in self.params]
        depth = 0
        for c in self.constraints:
            depth = max([depth] + [index[n] for n in c.names if n in index])
            checks[depth].append(c)
        return checks

    @property
    def size(self) -> int:
        return len(self.configs())

    @property
    def values(self) -> dict[str, tuple]:
        """Knob -> its values, in the listed order."""
        return {p.name: p.values for p in self.params}

    def with_priors(self, priors: Priors) -> SearchSpace:
        """This space with other priors (e.g. a space file's, for a recorded table's space). Entries naming knobs
        or values this space lacks do not apply to it (priors.py)."""
        return dataclasses.replace(self, priors=priors)

    def describe(self) -> str:
        """Human-readable listing for `raytune-attn space show`."""
        lines = [f"space {self.source}  (vendor {self.vendor}, arch {self.arch})", "parameters:"]
        width = max(len(n) for n in self.names)
        for p in self.params:
            vals = ", ".join(_fmt(v) for v in p.values)
            count = f"{len(p.values)} value" + ("s" if len(p.values) != 1 else "")
            lines.append(f"  {p.name:<{width}}  [{vals}]  ({count}, {p.encoding})")
        lines.append("constraints:" if self.constraints else "constraints: none")
        lines += [f"  {c.expr}" for c in self.constraints]
        lines.append(f"size: {self.size_unconstrained} before constraints, {self.size} after")
        pr = self.priors
        lines.append(f"start: {len(pr.start)} entries" if pr.start else "start: none")
        lines.append("moves: " + ("; ".join(m.name for m in pr.moves) if pr.moves else "none"))
        lines.append("coupled: " + (", ".join("/".join(c.knobs) for c in pr.coupled) if pr.coupled else "none"))
        return "\n".join(lines)

    @classmethod
    def from_values(
        cls, values: Mapping[str, Sequence], *, allowed: Iterable[tuple] | None = None, source: str = "<table>"
    ) -> SearchSpace:
        """A space from distinct values per parameter (e.g. read from a landscape table), default encodings."""
        params = []
        for name, vals in values.items():
            vals = tuple(sorted(set(vals), key=lambda v: (isinstance(v, str), v)))
            params.append(Param(name, vals, _default_encoding(vals)))
        return cls(tuple(params), (), source=source, allowed=None if allowed is None else frozenset(allowed))


def _fmt(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _default_encoding(values: Sequence) -> str:
    if all(isinstance(v, bool) for v in values) or not all(isinstance(v, (int, float)) for v in values):
        return "categorical"
    return "log2" if all(v > 0 for v in values) else "index"


def load_space(path: str | Path) -> SearchSpace:
    """Load and validate a search-space YAML file; raise SpaceError naming the file, the key and the problem.

    `path` may also be a shipped space by name, e.g. "nvidia/sm90", "nvidia/sm90.yaml", or the repository's path
    "search_spaces/nvidia/sm90.yaml" from anywhere (an installed package holds the spaces itself).
    """
    p = Path(path)
    if not p.exists():
        name = str(path).removeprefix("search_spaces/")
        alt = SPACES_DIR / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
        if not alt.exists():
            raise FileNotFoundError(f"no search-space file {path} (nor {alt})")
        p = alt
    src = str(path)
    try:
        doc = read_yaml(p, src, "a search-space YAML file")
    except YamlInputError as e:
        raise SpaceError(src, "<file>", e.problem) from None
    return parse_space(doc, source=src)


def parse_space(doc: Any, *, source: str = "<memory>") -> SearchSpace:
    if not isinstance(doc, dict):
        raise SpaceError(source, "<file>", "must be a mapping with schema_version, vendor, arch, parameters")
    unknown = sorted(set(doc) - set(_KEYS))
    if unknown:
        raise SpaceError(source, unknown[0], f"unknown key (known: {', '.join(_KEYS)})")
    version = schema_version_problem(doc, SCHEMA_VERSION)
    if version:
        raise SpaceError(source, "schema_version", version)
    vendor = doc.get("vendor")
    if vendor not in VENDORS:
        raise SpaceError(source, "vendor", f"is {vendor!r}; must be one of {', '.join(VENDORS)}")
    arch = doc.get("arch")
    _check_arch(arch, vendor, source)
    raw = doc.get("parameters")
    if not isinstance(raw, dict) or not raw:
        raise SpaceError(source, "parameters", "must be a non-empty mapping of knob name -> list of values")
    params = [_parse_param(name, spec, vendor, source) for name, spec in raw.items()]
    cons = doc.get("constraints") or []
    if not isinstance(cons, list):
        raise SpaceError(source, "constraints", "must be a list of expression strings")
    names = [p.name for p in params]
    constraints = [compile_constraint(c, names, source=source, key=f"constraints[{i}]") for i, c in enumerate(cons)]
    space = SearchSpace(tuple(params), tuple(constraints), vendor=vendor, arch=arch, source=source)
    for i, c in enumerate(constraints):  # evaluate once on a config so that e.g. type errors surface at load time
        try:
            c(space.to_config(tuple(p.values[0] for p in params)))
        except Exception as e:  # noqa: BLE001 - any evaluation error is the file's mistake
            raise SpaceError(source, f"constraints[{i}]", f"{c.expr!r} fails to evaluate: {e}") from None
    try:
        configs = space._enumerate(_boolean_constraint(source, constraints))
    except SpaceError:
        raise
    except Exception as e:  # noqa: BLE001 - on some config, a constraint past its bounds (_expr.py) or dividing by 0
        raise SpaceError(source, "constraints", f"{type(e).__name__}: {e}") from None
    if not configs:
        raise SpaceError(source, "constraints", "no config satisfies all constraints")
    _check_values_usable(space, configs)
    return space.with_priors(parse_priors(doc, space.values, configs, source))


def _check_arch(arch: Any, vendor: str, source: str) -> None:
    """`arch` must be an architecture of `vendor`: it picks the pre-filter's limits (resources.ARCHS), so gfx942
    under nvidia would screen NVIDIA configs with AMD's shared memory. An arch the model does not know (a newer GPU:
    the sweep then takes the device's) is judged by validation's naming rule."""
    from raytune_attn.kernels.resources import ARCHS

    if not isinstance(arch, str) or not arch:
        raise SpaceError(source, "arch", f"must be a non-empty string, got {arch!r}")
    owner = ARCHS[arch].vendor if arch in ARCHS else validation._arch_vendor(arch)
    if owner != vendor:
        raise SpaceError(source, "arch",
                         f"{arch!r} is an architecture of vendor {owner}, not of this space's vendor {vendor}")


def _boolean_constraint(source: str, constraints: Sequence[Constraint]) -> Callable[[Constraint, dict], bool]:
    """A check of a constraint on a candidate config that refuses a result other than True or False: a constraint
    such as `BLOCK_M` (a number, always truthy) would otherwise allow every config without a word."""

    def holds(c: Constraint, cfg: dict) -> bool:
        value = Expression.__call__(c, cfg)  # the expression's own value, before Constraint makes it a bool
        if not isinstance(value, bool):
            raise SpaceError(source, f"constraints[{constraints.index(c)}]",
                             f"{c.expr!r} is {value!r} (not true or false) at {cfg}: a constraint must be a "
                             f"condition, e.g. a comparison")
        return value

    return holds


def _check_values_usable(space: SearchSpace, configs: list[dict[str, Any]]) -> None:
    """Every value of every parameter must appear in a config that `validation.check` (the one judge of knob values
    and the rules among them, the paged kernel's too) accepts for this space's vendor; SpaceError naming the first
    that does not.
    Configs are checked until every value is seen in a valid one: usually a few dozen."""
    missing = {(p.name, v): None for p in space.params for v in p.values}  # -> why a config with it was refused
    first_reason = None
    for cfg in configs:
        try:
            validation.check(cfg, vendor=space.vendor)
        except InvalidConfig as e:
            first_reason = first_reason or str(e)
            for item in cfg.items():
                if item in missing and missing[item] is None:
                    missing[item] = str(e)
            continue
        for item in cfg.items():
            missing.pop(item, None)
        if not missing:
            return
    if len(missing) == sum(len(p.values) for p in space.params):
        raise SpaceError(space.source, "parameters", f"every config is an invalid kernel config, e.g.: {first_reason}")
    (name, value), why = next(iter(missing.items()))
    why = why or "no config the constraints allow has it"
    raise SpaceError(space.source, f"parameters.{name}",
                     f"value {_fmt(value)} is in no valid kernel config of this space ({why})")


def priors_for_arch(arch: str) -> Priors | None:
    """The priors of the shipped space file named for `arch` (search_spaces/<vendor>/<arch>.yaml), if one is."""
    files = sorted(SPACES_DIR.glob(f"*/{arch}.yaml"))
    return load_space(files[0]).priors if len(files) == 1 else None


def _parse_param(name: Any, spec: Any, vendor: str, source: str) -> Param:
    key = f"parameters.{name}"
    if name not in KNOBS:
        raise SpaceError(source, key, f"not a kernel knob; knobs are {', '.join(sorted(KNOBS))}")
    if name in AMD_ONLY_KNOBS and vendor != "amd":
        raise SpaceError(source, key, f"exists only on AMD GPUs, this space is for {vendor}")
    encoding = None
    if isinstance(spec, dict):
        extra = sorted(set(spec) - {"values", "encoding"})
        if extra:
            raise SpaceError(source, f"{key}.{extra[0]}", "unknown key (known: values, encoding)")
        encoding, spec = spec.get("encoding"), spec.get("values")
    if not isinstance(spec, list) or not spec:
        raise SpaceError(source, key, "must be a non-empty list of values (or {values: [...], encoding: ...})")
    want = KNOBS[name]
    for v in spec:
        if (want is bool) != isinstance(v, bool) or not isinstance(v, want):
            raise SpaceError(source, key, f"value {v!r} is not a{'n integer' if want is int else ' boolean'}")
    if len(set(spec)) != len(spec):
        raise SpaceError(source, key, f"repeated values in {spec}")
    if want is int and list(spec) != sorted(spec):
        raise SpaceError(source, key, f"values {spec} must be listed in increasing order")
    values = tuple(spec)
    encoding = encoding or _default_encoding(values)
    if encoding not in ENCODINGS:
        raise SpaceError(source, f"{key}.encoding", f"is {encoding!r}; must be one of {', '.join(ENCODINGS)}")
    if encoding == "log2" and not all(v > 0 for v in values):
        raise SpaceError(source, f"{key}.encoding", "log2 needs positive values")
    if encoding != "categorical" and want is bool:
        raise SpaceError(source, f"{key}.encoding", "a boolean knob must be categorical")
    return Param(name, values, encoding)
