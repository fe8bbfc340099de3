"""Random `when:` expressions: the compiled closures (format/compiled.py) give what the sandboxed
Jinja evaluation gives: the same value, or the same error."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runbook.format.expr import ExprError, compile_command, compile_expression, compile_value
from tests.format.test_expr_compiled import comparable as _comparable
from tests.fuzz.test_fuzz_expr import EXPRESSIONS, VARIABLES

pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")


def _outcome(run: Any) -> tuple[Any, ...]:
    random.seed(0)  # the `random` filter picks the same item on both paths
    try:
        value = run(copy.deepcopy(VARIABLES))
    except Exception as exc:  # noqa: BLE001 - the error is the outcome
        return ("error", type(exc).__name__, _comparable(str(exc)))
    return ("value", type(value).__name__, _comparable(repr(value)))


@settings(max_examples=settings.default.max_examples * 20)
@given(source=EXPRESSIONS)
def test_compiled_and_sandboxed_agree(source: str, time_limit: Any) -> None:
    try:
        expression = compile_expression(source)
    except ExprError:
        return
    with time_limit(20, f"evaluating {source!r:.300}"):
        assert _outcome(expression.evaluate) == _outcome(expression.evaluate_sandboxed), source


@settings(max_examples=settings.default.max_examples * 4)
@given(parts=st.lists(st.one_of(st.text(alphabet=st.characters(blacklist_characters="{}%#"), max_size=20),
                                EXPRESSIONS.map(lambda s: "{{ " + s + " }}")), min_size=1, max_size=4))
def test_compiled_and_sandboxed_templates_agree(parts: list[str], time_limit: Any) -> None:
    """Text templates (`with:` text, findings) and fix commands (shell-quoted): the same text."""
    source = "".join(parts)
    for compile_ in (compile_value, compile_command):
        try:
            compiled = compile_(source)
        except ExprError:
            continue
        template = compiled.template if compile_ is compile_value else compiled
        if template is None:  # a literal, or one whole `{{ expr }}` (the test above covers it)
            continue
        with time_limit(20, f"rendering {source!r:.300}"):
            compiled_text = _outcome(lambda v, t=template: t.render(**v))
            assert compiled_text == _outcome(lambda v, t=template: t.render_sandboxed(**v)), source
