"""The formulas of the ranking (ranking.py), evaluated: JSON expressions, operator first.

`["min", 0.95, ["+", 0.45, ["*", 0.25, ["log2", ["+", 1, "weight"]]]]]` is
`min(0.95, 0.45 + 0.25 * log2(1 + weight))`. A number or a boolean is itself, a string is a
name given by the caller, a list is an operator and its operands. The operators are few, each
one step of IEEE arithmetic that JavaScript does alike (site/static/triage.js evaluates the same
expressions the same way: left to right, `if` evaluating only the branch it takes), so the CLI
and the triage page get the same numbers. An expression is a finite tree of our own data: it
evaluates in time linear in its size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import reduce
from typing import Any

Formula = Any  # float | int | bool | str | list[Formula]

_FOLDS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "min": min,
    "max": max,
}
_UNARY: dict[str, Callable[[Any], Any]] = {"log2": math.log2, "sqrt": math.sqrt}
OPERATORS = frozenset({*_FOLDS, *_UNARY, "if"})


class FormulaError(ValueError):
    """A formula that names an unknown operator or name, or has the wrong operands."""


def evaluate(formula: Formula, names: Mapping[str, Any]) -> Any:
    """The value of `formula` with `names` bound."""
    if isinstance(formula, bool | int | float):
        return formula
    if isinstance(formula, str):
        if formula not in names:
            raise FormulaError(f"unknown name {formula!r} (known: {', '.join(sorted(names))})")
        return names[formula]
    op, *operands = formula
    if op == "if" and len(operands) == 3:
        condition, then, otherwise = operands
        return evaluate(then if evaluate(condition, names) else otherwise, names)
    if op in _UNARY and len(operands) == 1:
        return _UNARY[op](evaluate(operands[0], names))
    if op in _FOLDS and len(operands) >= 2:
        return reduce(_FOLDS[op], (evaluate(operand, names) for operand in operands))
    raise FormulaError(f"{op!r} with {len(operands)} operands: not an operator of a ranking formula")


def problems(formula: Formula, names: set[str]) -> list[str]:
    """What is wrong with `formula` when it may use `names`: unknown operators and names."""
    if isinstance(formula, bool | int | float):
        return []
    if isinstance(formula, str):
        return [] if formula in names else [f"unknown name {formula!r}"]
    if not isinstance(formula, list) or not formula or formula[0] not in OPERATORS:
        return [f"not a formula: {formula!r}"]
    return [problem for operand in formula[1:] for problem in problems(operand, names)]
