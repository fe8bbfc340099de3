"""Conditions: compiled at load time, sandboxed, with cross-node helpers."""

from __future__ import annotations

import time

import pytest
from jinja2 import Undefined

from runbook.format.expr import (
    MAX_DEPTH,
    ExprError,
    ExprLimitError,
    compile_command,
    compile_expression,
    compile_value,
    truthy,
)

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


@pytest.mark.parametrize("source", [
    "cycler", "joiner", "namespace", "self", "lipsum.__globals__", "result.__class__.__mro__",
    "result.mro()", "result.__class__.__subclasses__()", "'{0.__class__}'.format(result)",
    "'{0.x}'.format(result)", "result.x.format_map(result)", "result.__init__.__globals__['os']",
    "result | map(attribute='__class__') | list", "loop", "self.__init__",
])
def test_classic_sandbox_escapes_are_refused_when_loading(source: str) -> None:
    with pytest.raises(ExprError) as caught:
        compile_expression(source)
    assert "\n" not in str(caught.value)


def test_a_dunder_built_at_run_time_reaches_nothing() -> None:
    """No constant holds `__`, so the load-time check passes; the sandbox refuses the attribute."""
    expression = compile_expression("result.items | map(attribute='_' ~ '_cla' ~ 'ss_' ~ '_') | list")
    try:
        value = expression.evaluate({"result": {"items": [1, "a"]}})
    except Exception as exc:  # the sandbox may refuse outright
        assert "class" not in type(exc).__name__.lower()
        return
    assert not any(isinstance(v, type) for v in value)


@pytest.mark.parametrize("source", [
    "'a' * 10**9", "[1] * 10**9", "result.x * 10**9", "10 ** 10 ** 10 ** 10 ** 10", "2 ** 100000000",
    "(10 ** 3000) * (10 ** 3000) * (10 ** 3000) * (10 ** 3000)", "'%0999999999d' % 1",
    "'%*d' % (999999999, 1)", "'%0999999999d' | format(1)", "'a' | center(10**9)",
    "'a\\nb\\nc' | indent(10**8)", "[1] | batch(10**9, 0) | list", "[1] | slice(10**8) | list",
    "1.5 | round(-10**9)", "5 | round(10**9, 'ceil')", "[[1]] | tojson(indent=10**8)",
    "('ab' * 1000000) | list | join('x' * 1000)", "('a' * 3000000) ~ ('a' * 3000000)",
    "'aaaa' | replace('a', 'aaaaaaaaaa') | replace('a', 'aaaaaaaaaa') | replace('a', 'aaaaaaaaaa')"
    " | replace('a', 'aaaaaaaaaa') | replace('a', 'aaaaaaaaaa') | replace('a', 'aaaaaaaaaa')",
    "'ab' | list | string | list | string | list | string | list | string | list | string | list"
    " | string | list | string | list | string | list | string",
    "['a' * 1000000] * 5", "(['x'] * 3000000) | sum(start=[]) | sum(start=[])",
])
def test_unbounded_growth_is_a_one_line_error_not_a_hang(source: str) -> None:
    """Each of these would take minutes or gigabytes; bounded, it fails fast on this node."""
    begin = time.monotonic()
    with pytest.raises(ExprLimitError) as caught:
        compile_expression(source).evaluate({"result": {"x": "ab"}})
    assert time.monotonic() - begin < 5
    message = str(caught.value)
    assert message and "\n" not in message


def test_the_budget_is_per_evaluation_and_constant_calls_are_not_folded_at_load() -> None:
    """Two parts each under the bound, together over it: refused at run time, not precomputed."""
    template = compile_value("{{ 'a' | center(3000000) }}{{ 'a' | center(3000000) }}")
    with pytest.raises(ExprLimitError):
        template.render({})
    once = compile_expression("('a' | center(3000000)) | length")
    assert once.evaluate({}) == 3_000_000
    assert once.evaluate({}) == 3_000_000  # a fresh budget for the next evaluation


def test_too_deep_is_refused_when_loading() -> None:
    with pytest.raises(ExprError, match="nested too deeply"):
        compile_expression("(" * 500 + "1" + ")" * 500)
    with pytest.raises(ExprError, match="nested too deeply"):
        compile_expression(" or ".join(["result.a"] * (MAX_DEPTH + 5)))
    with pytest.raises(ExprError, match="nested too deeply"):
        compile_value("x {{ " + "-" * 2000 + "1 }}")
    deep = " or ".join(["result.a"] * (MAX_DEPTH - 5))
    assert compile_expression(deep).evaluate({"result": {"a": 0}}) == 0


def test_filters_leave_the_data_they_read_unchanged() -> None:
    """Jinja's `indent` does `s += "\\n"`: given a list, it would extend the node's result."""
    result = {"lines": ["a", "b"]}
    compile_expression("result.lines | indent(2)").evaluate({"result": result})
    assert result == {"lines": ["a", "b"]}


def test_ordinary_uses_of_the_bounded_operators_still_work() -> None:
    variables = {"result": {"lines": ["a", "b"], "gpus": [{"p": [1, 2]}, {"p": [3]}], "x": 2.345}}
    cases = {
        "result.gpus | map(attribute='p') | sum(start=[])": [1, 2, 3],
        "'%.1f' % result.x": "2.3", "'%s-%s' | format(1, 2)": "1-2", "result.lines | join(',')": "a,b",
        "'ab' * 3": "ababab", "[0] * 3": [0, 0, 0], "2 ** 10": 1024, "'a' ~ 1 ~ none": "a1None",
        "result.lines + ['c']": ["a", "b", "c"], "'x' | center(5)": "  x  ", "3.14159 | round(2)": 3.14,
        "[1, 2, 3] | batch(2, 0) | list": [[1, 2], [3, 0]], "result.lines | tojson": '["a", "b"]',
    }
    for source, expected in cases.items():
        assert compile_expression(source).evaluate(variables) == expected, source


@pytest.mark.parametrize("source", ["result.x.format", "result.x['format']", "(result.x ~ '')['for' ~ 'mat']",
                                    "result.x.format_map"])
def test_str_format_is_not_even_handed_out(source: str) -> None:
    """Jinja would hand back its sandboxed `str.format` as a function: nothing a runbook needs."""
    value = compile_expression(source).evaluate({"result": {"x": "{0.__class__}"}})
    assert isinstance(value, Undefined) and not truthy(value)


def test_cluster_filters_read_each_node_once_per_step_not_once_per_node(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Every node tests its branches on the same `cluster`: N nodes must cost N reads, not N*N."""
    from runbook.format import expr as expr_module

    reads = []
    real = expr_module._value_at
    monkeypatch.setattr(expr_module, "_value_at", lambda entry, path: reads.append(path) or real(entry, path))
    cluster = [{"node": f"n{i}", "result": {"age_s": i, "driver": "550" if i else "535"}} for i in range(300)]
    median = expr_module.compile_expression("(cluster | field('age_s') | median) > 100")
    odd = expr_module.compile_expression("node.name in (cluster | outliers('driver'))")
    answers = [(median.evaluate({"cluster": cluster}),
                odd.evaluate({"cluster": cluster, "node": {"name": e["node"]}})) for e in cluster]
    assert answers[0] == (True, True) and answers[1] == (True, False)
    assert reads.count("age_s") == 300 and reads.count("driver") == 300


@pytest.mark.parametrize("source", [
    "result.gpu.util > 1", "result['gpu']['util'] > 1", "result.ranks[1] == 3", "result.ranks[-1] == 3",
    "result.ranks[9] == 3", "result.missing.deeper == 1", "result.items == 1", "result['keys'] == 1",
    "result.name.upper == 1", "steps.a.result.ok", "result.gpu | length > 0",
])
def test_reading_a_path_for_evidence_gives_what_jinja_gives(source: str) -> None:
    """`read` follows plain paths without Jinja; it must agree with Jinja's own evaluation."""
    variables = {"result": {"gpu": {"util": 7}, "ranks": [1, 2, 3], "keys": "k", "name": "x"},
                 "steps": {"a": {"result": {"ok": True}}}}
    expression = compile_expression(source)
    assert expression.reads
    for path in expression.reads:
        fast, slow = expression.read(path, variables), compile_expression(path).evaluate(variables)
        assert truthy(fast) == truthy(slow)
        if truthy(slow) and not callable(slow):
            assert fast == slow
    assert "result.ranks[1]" in compile_expression("result.ranks[1] == 3").plain_paths


def test_the_gib_filter_says_sizes_as_people_read_them() -> None:
    size = lambda mib: compile_expression("result.x | gib").evaluate({"result": {"x": mib}})  # noqa: E731
    assert size(137738.24) == "134.51 GiB" and size(572) == "572.00 MiB" and size(None) == "?"
