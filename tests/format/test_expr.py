"""Conditions: compiled at load time, sandboxed, with cross-node helpers."""

from __future__ import annotations

import pytest

from runbook.format.expr import ExprError, compile_command, compile_expression, compile_value, truthy

CLUSTER = [{"node": f"n{i}", "result": {"age_s": age, "torch": v}}
           for i, (age, v) in enumerate([(5, "2.4"), (7, "2.4"), (2400, "2.4"), (6, "2.3")])]


@pytest.mark.parametrize("source", [
    "result.__class__", "result['__class__']", "result.x.__init__.__globals__",
    "lipsum", "config", "range(10)", "result | attr('x')", "cycler", "namespace()",
    "result.update({})", "result | map(attribute='__class__') | list", "1 }}{{ 2",
])
def test_escapes_are_refused_at_compile_time(source: str) -> None:
    with pytest.raises(ExprError):
        compile_expression(source)


def test_reads_and_values() -> None:
    expression = compile_expression("result.cpu_percent > 90 and result.gpu.util == 0")
    assert expression.reads == ["result.cpu_percent", "result.gpu.util"]
    assert expression.evaluate({"result": {"cpu_percent": 95, "gpu": {"util": 0}}}) is True
    assert expression.evaluate({"result": {"cpu_percent": 5, "gpu": {"util": 0}}}) is False


def test_missing_fields_are_falsy_not_crashes() -> None:
    assert not truthy(compile_expression("result.nope").evaluate({"result": {}}))
    assert not truthy(compile_expression("result.a.b.c").evaluate({"result": {}}))


def test_cluster_helpers() -> None:
    variables = {"cluster": CLUSTER}
    assert compile_expression("cluster | field('age_s') | median").evaluate(variables) == 6.5
    assert compile_expression("cluster | field('torch') | majority").evaluate(variables) == "2.4"
    assert compile_expression("cluster | outliers('torch')").evaluate(variables) == ["n3"]
    assert compile_expression("cluster | field('age_s') | max").evaluate(variables) == 2400


def test_templated_values_keep_their_type() -> None:
    compiled = compile_value({"pid": "{{ params.pid }}", "path": "{{ params.dir }}/train.log",
                              "n": 3})
    rendered = {k: v.render({"params": {"pid": 42, "dir": "/x"}}) for k, v in compiled.items()}
    assert rendered == {"pid": 42, "path": "/x/train.log", "n": 3}
    assert compile_value("{{ params.nope }}").render({"params": {}}) is None


def test_commands_quote_every_substituted_value() -> None:
    command = compile_command("tail -f {{ params.log }}")
    assert command.render(params={"log": "a b; rm -rf /"}) == "tail -f 'a b; rm -rf /'"
    assert command.render(params={}) == "tail -f '<unset>'"
    with pytest.raises(ExprError):
        compile_command("echo {{ result.__class__ }}")
