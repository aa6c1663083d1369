"""The restricted expressions of a search-space file (`constraints:`, and the `when:` and `set:` of its priors).

An expression is Python syntax limited to arithmetic, comparisons, boolean logic, conditional expressions,
literals and names; no calls, attributes or subscripts. It is checked once, when the file is loaded, against the
names it may use (the space's knobs, and for priors the problem's fields), and evaluated with no builtins.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


class SpaceError(ValueError):
    """A search-space file that is not valid; the message names the file, the key and what is wrong."""

    def __init__(self, source: str, key: str, problem: str):
        super().__init__(f"{source}: {key}: {problem}")
        self.source, self.key, self.problem = source, key, problem


# Nodes an expression may use: arithmetic, comparisons, boolean logic, names and literals.
_ALLOWED_NODES = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.BinOp, ast.Add, ast.Sub,
    ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt,
    ast.GtE, ast.In, ast.NotIn, ast.Name, ast.Load, ast.Constant, ast.IfExp, ast.Tuple, ast.List,
)  # fmt: skip
_LITERAL_NAMES = frozenset({"True", "False", "None"})


@dataclass(frozen=True)
class Expression:
    """A checked expression; `names` are the variables it reads."""

    expr: str
    names: frozenset = field(compare=False)
    code: Any = field(repr=False, compare=False)

    def __call__(self, env: Mapping[str, Any]) -> Any:
        return eval(self.code, {"__builtins__": {}}, dict(env))  # noqa: S307 - AST checked in compile_expression


class Constraint(Expression):
    """A constraint of the space: true for the configs it allows."""

    def __call__(self, config: Mapping[str, Any]) -> bool:
        return bool(super().__call__(config))


def compile_expression(expr: Any, names: Iterable[str], *, source: str = "<expression>", key: str = "expression",
                       kind: type[Expression] = Expression, what: str = "a parameter of this space") -> Expression:
    """Parse `expr` as a restricted Python expression over `names`; SpaceError naming `source` and `key` if not.
    `what` says what the names are, for the error about a name outside them."""
    if not isinstance(expr, str) or not expr.strip():
        raise SpaceError(source, key, f"must be a non-empty expression string, got {expr!r}")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as e:
        raise SpaceError(source, key, f"cannot parse {expr!r}: {e.msg}") from None
    allowed = set(names) | _LITERAL_NAMES
    used = set()
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise SpaceError(source, key, f"{expr!r} uses {type(node).__name__}, not allowed in an expression")
        if isinstance(node, ast.Name):
            if node.id not in allowed:
                raise SpaceError(source, key, f"{expr!r} names {node.id!r}, which is not {what}")
            used.add(node.id)
    return kind(expr.strip(), frozenset(used - _LITERAL_NAMES), compile(tree, f"{source}:{key}", "eval"))


def compile_constraint(expr: Any, names: Iterable[str], *, source: str = "<constraint>",
                       key: str = "constraints") -> Constraint:
    """A constraint over the space's parameter `names`."""
    return compile_expression(expr, names, source=source, key=key, kind=Constraint)  # type: ignore[return-value]
