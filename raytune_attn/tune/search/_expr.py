"""The restricted expressions of a search-space file (`constraints:`, and the `when:` and `set:` of its priors).

An expression is Python syntax limited to arithmetic, comparisons, boolean logic, conditional expressions,
literals and names; no calls, attributes or subscripts. It is checked once, when the file is loaded, against the
names it may use (the space's knobs, and for priors the problem's fields), and evaluated with no builtins.

It is also bounded, so that a file cannot make loading run for minutes or fill memory (`BLOCK_M ** 10**9`):
at most `MAX_LENGTH` characters; a power's exponent is an integer literal of at most `MAX_EXPONENT`; arithmetic
takes numbers only (no `"x" * n`, `[0] * n` or `"%s" % x`); and an integer result longer than `MAX_INT_BITS`
bits is refused before it is computed. A refusal is a SpaceError naming the expression.
"""

from __future__ import annotations

import ast
import operator
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
MAX_LENGTH = 1000
MAX_EXPONENT = 64
MAX_INT_BITS = 4096  # far above any knob or problem arithmetic, far below a slow or memory-filling integer
_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_GUARD = "__bounded_binop__"  # not a name an expression may use: names are checked against the space's


class ExpressionBoundError(ValueError):
    """An evaluation that would exceed the bounds of an expression (the module docstring)."""


def _bounded_binop(op: str, a: Any, b: Any) -> Any:
    """`a op b` for numbers, refusing an integer result of more than MAX_INT_BITS bits before computing it."""
    for x in (a, b):
        if not isinstance(x, (int, float)):
            raise ExpressionBoundError(f"arithmetic on {type(x).__name__} {x!r}: only numbers may be combined")
    if isinstance(a, int) and isinstance(b, int):
        if op == "Mult" and a.bit_length() + b.bit_length() > MAX_INT_BITS:
            raise ExpressionBoundError(f"a product of {a.bit_length()}- and {b.bit_length()}-bit integers is beyond "
                                       f"{MAX_INT_BITS} bits")
        if op == "Pow" and b > 0 and a.bit_length() * b > MAX_INT_BITS:
            raise ExpressionBoundError(f"a {a.bit_length()}-bit integer ** {b} is beyond {MAX_INT_BITS} bits")
    return _BINOPS[getattr(ast, op)](a, b)


class _Guard(ast.NodeTransformer):
    """Every binary operation becomes a call of `_bounded_binop` (the only call in a compiled expression)."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        call = ast.Call(ast.Name(_GUARD, ast.Load()), [ast.Constant(type(node.op).__name__), node.left, node.right],
                        [])
        return ast.copy_location(call, node)


@dataclass(frozen=True)
class Expression:
    """A checked expression; `names` are the variables it reads."""

    expr: str
    names: frozenset = field(compare=False)
    code: Any = field(repr=False, compare=False)

    def __call__(self, env: Mapping[str, Any]) -> Any:
        try:
            return eval(self.code, {"__builtins__": {}, _GUARD: _bounded_binop}, dict(env))  # noqa: S307 - AST checked
        except ExpressionBoundError as e:
            raise ExpressionBoundError(f"{self.expr!r}: {e}") from None


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
    if len(expr) > MAX_LENGTH:
        raise SpaceError(source, key, f"{expr[:40]!r}... is {len(expr)} characters long, more than {MAX_LENGTH}")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as e:
        raise SpaceError(source, key, f"cannot parse {expr!r}: {e.msg}") from None
    except (RecursionError, MemoryError):
        raise SpaceError(source, key, f"{expr!r} is nested too deeply to parse") from None
    allowed = set(names) | _LITERAL_NAMES
    used = set()
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise SpaceError(source, key, f"{expr!r} uses {type(node).__name__}, not allowed in an expression")
        if isinstance(node, ast.Name):
            if node.id not in allowed:
                raise SpaceError(source, key, f"{expr!r} names {node.id!r}, which is not {what}")
            used.add(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            _check_exponent(node.right, expr, source, key)
    code = compile(ast.fix_missing_locations(_Guard().visit(tree)), f"{source}:{key}", "eval")
    return kind(expr.strip(), frozenset(used - _LITERAL_NAMES), code)


def _check_exponent(node: ast.AST, expr: str, source: str, key: str) -> None:
    n = node.operand if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) else node
    ok = isinstance(n, ast.Constant) and type(n.value) is int and n.value <= MAX_EXPONENT
    if not ok:
        raise SpaceError(source, key, f"{expr!r} raises to the power {ast.unparse(node)}: an exponent must be an "
                                      f"integer literal of at most {MAX_EXPONENT}")


def compile_constraint(expr: Any, names: Iterable[str], *, source: str = "<constraint>",
                       key: str = "constraints") -> Constraint:
    """A constraint over the space's parameter `names`."""
    return compile_expression(expr, names, source=source, key=key, kind=Constraint)  # type: ignore[return-value]
