"""triage/formula.py: the ranking's formulas, evaluated as site/static/triage.js evaluates them."""

from __future__ import annotations

import math
import re

import pytest

from runbook.triage.formula import FormulaError, evaluate, problems


def test_constants_names_and_operators() -> None:
    assert evaluate(0.25, {}) == 0.25 and evaluate(True, {}) is True
    assert evaluate("weight", {"weight": 1.5}) == 1.5
    assert evaluate(["+", 1, ["/", ["log2", 8], 3]], {}) == 2.0
    assert evaluate(["-", 10, 4, 3], {}) == 3  # folded left to right: (10 - 4) - 3
    assert evaluate(["min", 0.95, ["max", "x", 1], 2], {"x": 0.5}) == 0.95
    assert evaluate(["sqrt", ["*", 2, 8]], {}) == 4.0


def test_operations_keep_their_order_bit_for_bit() -> None:
    # 0.1 + 0.2 * score / best is ((0.2 * score) / best) + 0.1 in Python: the formula says the same
    score, best = 7.3, 11.9
    assert evaluate(["+", 0.1, ["/", ["*", 0.2, "score"], "best"]], {"score": score, "best": best}) == \
        0.1 + 0.2 * score / best
    weight = 1.7
    formula = ["min", 0.95, ["+", 0.45, ["*", 0.25, ["log2", ["+", 1, "weight"]]]]]
    assert evaluate(formula, {"weight": weight}) == min(0.95, 0.45 + 0.25 * math.log2(1 + weight))


def test_if_evaluates_only_the_branch_it_takes() -> None:
    formula = ["if", "generic", 0.2, ["log2", ["-", 0, 1]]]  # log2(-1) raises in Python
    assert evaluate(formula, {"generic": True}) == 0.2
    with pytest.raises(ValueError):
        evaluate(formula, {"generic": False})


@pytest.mark.parametrize("formula, message", [
    ("count", "unknown name 'count'"),
    (["pow", 2, 3], "'pow' with 2 operands"),
    (["log2", 2, 3], "'log2' with 2 operands"),
    (["+", 1], "'+' with 1 operands"),
])
def test_a_bad_formula_says_what_is_wrong(formula, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FormulaError, match=re.escape(message)):
        evaluate(formula, {"weight": 1.0})


def test_problems_names_unknown_names_and_operators() -> None:
    assert problems(["min", 0.95, ["+", "weight", 1]], {"weight"}) == []
    assert problems(["min", "score", ["pow", 1, 2], []], {"weight"}) == [
        "unknown name 'score'", "not a formula: ['pow', 1, 2]", "not a formula: []"]
