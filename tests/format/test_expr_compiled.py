"""Compiled `when:` closures (format/compiled.py) give what the sandboxed Jinja evaluation gives:
on every condition of the shipped runbooks, with the variables of every case of their tests."""

from __future__ import annotations

import copy
import hashlib
import re
from pathlib import Path
from typing import Any

import pytest

from runbook.format.expr import Expression, compile_expression
from runbook.library.runbooks import Library, load_library
from runbook.run.walk import Walk
from runbook.testing.runner import find_recordings, run_recording, run_test_file

ROOT = Path(__file__).resolve().parents[2]
VARIABLES: dict[str, Any] = {"result": {}, "cluster": [], "steps": {}, "params": {}, "node": {"name": "n1"},
                             "job": {}}


def outcome(expression: Expression, variables: dict[str, Any], sandboxed: bool) -> tuple[Any, ...]:
    """What one evaluation gives, comparable across the two paths: type and value, or the error."""
    try:
        value = (expression.evaluate_sandboxed if sandboxed else expression.evaluate)(variables)
    except Exception as exc:  # noqa: BLE001 - the error is the outcome
        return ("error", type(exc).__name__, comparable(str(exc)))
    return ("value", type(value).__name__, comparable(repr(value)))


def comparable(text: str) -> str:
    """A value's repr without addresses (two evaluations build two objects), long ones hashed."""
    text = re.sub(r" at 0x[0-9a-f]+", "", text, flags=re.IGNORECASE)  # `| upper` of an address too
    return text if len(text) <= 2000 else hashlib.sha256(text.encode()).hexdigest()


def assert_same(expression: Expression, variables: dict[str, Any]) -> None:
    compiled = outcome(expression, copy.deepcopy(variables), sandboxed=False)
    sandboxed = outcome(expression, copy.deepcopy(variables), sandboxed=True)
    assert compiled == sandboxed, f"{expression.source!r} on {variables!r:.500}"


@pytest.fixture(scope="module")
def library() -> Library:
    return load_library()


def shipped_conditions(library: Library) -> list[tuple[str, Expression]]:
    return [(f"{rid}:{step}#{i}", expression) for rid, loaded in library.by_id.items()
            if Path(loaded.path).resolve().is_relative_to(ROOT / "runbooks")
            for (step, i), expression in loaded.compiled.when.items()]


def test_every_shipped_condition_is_compiled(library: Library) -> None:
    conditions = shipped_conditions(library)
    assert len(conditions) > 100
    left_to_jinja = [name for name, expression in conditions if expression.closure is None]
    assert not left_to_jinja, f"conditions left to the sandboxed path: {left_to_jinja}"


def test_shipped_conditions_agree_on_every_test_case(library: Library,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case of runbooks/*.tests.yaml and every recording is walked; at each step every
    branch's condition (not only those the walk reached) is evaluated both ways, and every text
    template of that runbook (`with:` text, findings, fix commands) is rendered both ways."""
    seen: list[tuple[Any, Any, dict[str, Any]]] = []
    choose = Walk._choose

    def recording_choose(self: Walk, step: Any, compiled: Any, variables: dict[str, Any], *args: Any,
                         **kwargs: Any) -> Any:
        seen.append((step, compiled, copy.deepcopy(variables)))
        return choose(self, step, compiled, variables, *args, **kwargs)

    monkeypatch.setattr(Walk, "_choose", recording_choose)
    test_files = sorted((ROOT / "runbooks").glob("*.tests.yaml"))
    assert test_files
    for path in test_files:
        run_test_file(path, library)
    for recording in find_recordings(library):
        run_recording(recording, library)
    assert len(seen) > 400
    rendered: dict[int, int] = {}
    for step, compiled, variables in seen:
        for i in range(len(step.branches)):
            assert_same(compiled.when[(step.id, i)], variables)
        if rendered.get(id(compiled), 0) < 5:  # a few of each runbook's variables suffice
            rendered[id(compiled)] = rendered.get(id(compiled), 0) + 1
            for template in text_templates(compiled):
                assert template.closure is not None, template.source
                compiled_text = outcome_of(lambda t=template, v=variables: t.render(**copy.deepcopy(v)))
                assert compiled_text == outcome_of(
                    lambda t=template, v=variables: t.render_sandboxed(**copy.deepcopy(v))), template.source


def text_templates(compiled: Any) -> list[Any]:
    """Every text template of a runbook: in `with:` values, findings, fixes and their verify checks."""
    found: list[Any] = []
    stack: list[Any] = [compiled.with_, compiled.findings, compiled.fix_verify_with, compiled.fix_runs]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif hasattr(item, "render_sandboxed"):
            found.append(item)
        elif getattr(item, "template", None) is not None:
            stack.append(item.template)
    return found


def outcome_of(render: Any) -> tuple[Any, ...]:
    try:
        return ("value", render())
    except Exception as exc:  # noqa: BLE001 - the error is the outcome
        return ("error", type(exc).__name__, comparable(str(exc)))


@pytest.mark.parametrize("source", [
    "(result.oom_count or 0) > 0", "result.missing.deeper.still", "result.missing > 0", "not result.x",
    "'straggler-gpu' in steps", "result.get('pid')", "result.items()", "result.keys() | list",
    "result.lines | length", "(result.lines | join(',')) ~ '!'", "result.lines[0]", "result.lines[9]",
    "result.lines.append", "result.text.format", "result.pid * 2", "result.pid ** 2", "result.text % 3",
    "1 < result.pid < 5000", "1 < result.pid > 5000", "result.pid if result.ok else -1",
    "{'a': result.pid, 'b': [1, (2, 3)]}", "cluster | field('age_s') | median",
    "node.name in (cluster | outliers('age_s'))",
    "result.size_bytes is number", "result.name is defined", "result.nope is undefined", "-result.pid",
    "result.pid // 0", "result.pid / 7", "result.pid - 'x'", "'x' * 10 ** 9", "result.text.split('|')",
    "result.lines[1:]", "result.text[::-1]", "result.lines[:result.pid]", "result.pid[1:]",
])
def test_chosen_expressions_agree(source: str) -> None:
    variables = {**VARIABLES, "result": {"pid": 4242, "name": "python", "lines": ["a", "b"], "ok": True,
                                         "text": "step 10 | loss nan", "size_bytes": 10},
                 "cluster": [{"node": f"n{i}", "result": {"age_s": i * 7}} for i in range(4)]}
    expression = compile_expression(source)
    assert expression.closure is not None
    assert_same(expression, variables)


def test_unsupported_nodes_keep_the_sandboxed_path() -> None:
    expression = compile_expression("result.lines[1] if result.ok")
    assert expression.closure is None
    assert expression.evaluate({**VARIABLES, "result": {"lines": [1, 2, 3], "ok": True}}) == 2
