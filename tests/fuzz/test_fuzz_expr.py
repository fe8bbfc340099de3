"""`when:` expressions and templated parameters: random and hostile sources never escape the sandbox,
and every evaluation ends, quickly, in a value or one exception (never a hang or MemoryError)."""

from __future__ import annotations

import copy
import types
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import Environment
from jinja2.runtime import Context

from runbook.format.expr import (
    MAX_DEPTH,
    ExprError,
    ExprLimitError,
    compile_command,
    compile_expression,
    compile_value,
    environment,
)

# Python warns when it compiles the code Jinja generates for `true[1]`: not our concern here.
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")

VARIABLES: dict[str, Any] = {
    "result": {"pid": 4242, "name": "python", "cpu_percent": 99.5, "lines": ["a", "b" * 50],
               "gpus": [{"index": 0, "util": 0, "processes": [{"pid": 1}]}], "ok": True,
               "nested": {"a": {"b": {"c": None}}}, "text": "step 10 | loss nan"},
    "cluster": [{"node": f"n{i}", "result": {"age_s": i * 7, "torch": "2.4"}} for i in range(4)],
    "steps": {"find": {"result": {"pid": 4242}}}, "params": {"log": "/var/log/train.log", "n": 3},
    "node": {"name": "gpu001", "vars": {}},
}

HOSTILE_NAMES = ["cycler", "joiner", "namespace", "self", "lipsum", "range", "dict", "config",
                 "request", "loop", "caller", "varargs", "kwargs", "super", "__builtins__", "os",
                 "g", "environment", "context", "undefined"]
ATTRS = ["__class__", "__globals__", "__init__", "__subclasses__", "__mro__", "mro", "__base__",
         "__bases__", "__dict__", "__code__", "__self__", "__func__", "__module__", "__getitem__",
         "__import__", "__reduce__", "__reduce_ex__", "func_globals", "gi_frame", "gi_code", "f_globals",
         "f_back", "cr_frame", "im_func", "format", "format_map", "get", "keys", "items", "values",
         "split", "lower", "upper", "strip", "startswith", "update", "pop", "setdefault", "clear",
         "append", "x", "pid", "lines", "gpus", "result", "_private", "count", "index"]
FILTERS = sorted(set(environment().filters) | {"attr", "map", "nope"})
TESTS = sorted(set(environment().tests) | {"nope"})
STRINGS = ["'{0.__class__}'", "'{0.__init__.__globals__}'", "'{0.__class__.__mro__[1]}'", "'%s'",
           "'%(a)s'", "'%999999999d'", "'%*d'", "'__class__'", "'_x'", "'mro'", "'format'", "''",
           "'a'", "'pid'", "'x' ~ '_' ~ '_class__'", "'\\n'", "'" + "long " * 200 + "'"]
NUMBERS = ["0", "1", "-1", "2", "10", "10**9", "10 ** 10 ** 10", "9" * 60, "1e308", "0.5",
           "99999999999", "-10**9"]
OPERATORS = ["*", "**", "+", "-", "/", "//", "%", "~", "and", "or", "==", "!=", "<", ">=", "in",
             "not in"]


def _atoms() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(["result", "cluster", "steps", "params", "node"]),
                     st.sampled_from(HOSTILE_NAMES), st.sampled_from(STRINGS), st.sampled_from(NUMBERS),
                     st.sampled_from(["true", "none", "[]", "{}", "()", "[1, 2, 3]"]))


def _grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    args = st.lists(inner, max_size=3).map(", ".join)
    return st.one_of(
        st.tuples(inner, st.sampled_from(ATTRS)).map(lambda t: f"({t[0]}).{t[1]}"),
        st.tuples(inner, st.sampled_from(ATTRS), args).map(lambda t: f"({t[0]}).{t[1]}({t[2]})"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]})[{t[1]}]"),
        st.tuples(inner, st.sampled_from(FILTERS), args).map(lambda t: f"({t[0]}) | {t[1]}({t[2]})"),
        st.tuples(inner, st.sampled_from(FILTERS)).map(lambda t: f"({t[0]}) | {t[1]}"),
        st.tuples(inner, st.sampled_from(OPERATORS), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(inner, st.sampled_from(TESTS)).map(lambda t: f"({t[0]}) is {t[1]}"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]}) if ({t[1]}) else ({t[2]})"),
        inner.map(lambda a: f"not ({a})"), inner.map(lambda a: f"-({a})"),
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.tuples(inner, inner).map(lambda t: f"{{{t[0]}: {t[1]}}}"),
        st.tuples(inner, st.sampled_from(["'x'", "3"])).map(lambda t: f"({t[0]}).get({t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]})[:{t[1]}]"),
        st.tuples(inner, st.sampled_from(["map(attribute=", "selectattr(", "sort(attribute=",
                                          "sum(attribute="]),
                  st.sampled_from(STRINGS)).map(lambda t: f"({t[0]}) | {t[1]}{t[2]})"),
    )


EXPRESSIONS = st.recursive(_atoms(), _grow, max_leaves=12)

# A generator is fine: `map` and `select` give lazy ones, and their frames are out of reach.
_DANGEROUS = (type, types.ModuleType, types.FunctionType, types.CodeType, types.FrameType,
              types.TracebackType, Environment, Context)


def _assert_harmless(value: Any) -> None:
    """No class, module, function, code, frame or Jinja internals reached, however deep."""
    stack, seen = [value], 0
    while stack and seen < 10_000:
        item = stack.pop()
        seen += 1
        assert not isinstance(item, _DANGEROUS), f"reached {type(item).__name__}: {item!r:.200}"
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)


def _evaluate(source: str, time_limit: Any) -> None:
    """Compile, evaluate; the outcome must be a refusal, a harmless value or one exception."""
    try:
        expression = compile_expression(source)
    except ExprError as exc:
        assert "\n" not in str(exc), f"a refusal is one line: {exc!r}"
        return
    variables = copy.deepcopy(VARIABLES)
    with time_limit(10, f"evaluating {source!r:.300}"):
        try:
            value = expression.evaluate(variables)
        except (MemoryError, RecursionError, SyntaxError) as exc:
            raise AssertionError(f"{source!r}: unbounded evaluation: {type(exc).__name__}") from exc
        except ExprLimitError as exc:
            assert "\n" not in str(exc)
            value = None
        except Exception:  # noqa: BLE001 - a TypeError on this node's data is an evaluation error
            value = None
    _assert_harmless(value)
    assert variables == VARIABLES, f"{source!r} changed the data it read"


@settings(max_examples=settings.default.max_examples * 20)
@given(source=EXPRESSIONS)
def test_random_expressions_stay_in_the_sandbox_and_end(source: str, time_limit: Any) -> None:
    _evaluate(source, time_limit)


@settings(max_examples=settings.default.max_examples * 4)
@given(source=st.text(max_size=200))
def test_arbitrary_text_as_an_expression(source: str, time_limit: Any) -> None:
    _evaluate(source, time_limit)


@settings(max_examples=settings.default.max_examples * 4)
@given(parts=st.lists(st.one_of(st.text(alphabet=st.characters(blacklist_characters="{}%#"), max_size=20),
                                EXPRESSIONS.map(lambda s: "{{ " + s + " }}")), min_size=1, max_size=4))
def test_random_parameter_templates_and_commands(parts: list[str], time_limit: Any) -> None:
    """`with:` values and fix commands: the same sandbox and bounds as conditions."""
    source = "".join(parts)
    for compile_ in (compile_value, compile_command):
        try:
            compiled = compile_(source)
        except ExprError as exc:
            assert "\n" not in str(exc)
            continue
        variables = copy.deepcopy(VARIABLES)
        with time_limit(10, f"rendering {source!r:.300}"):
            try:
                value = (compiled.render(variables) if compile_ is compile_value
                         else compiled.render(**variables))
            except (MemoryError, RecursionError, SyntaxError) as exc:
                raise AssertionError(f"{source!r}: {type(exc).__name__}") from exc
            except Exception:  # noqa: BLE001
                value = None
        _assert_harmless(value)
        assert variables == VARIABLES


_WRAPPERS = ["-({})", "not ({})", "({})", "[{}]", "({}).a", "({}) | length", "({}) or 1", "({}) + 1",
             "({}) ~ 'x'", "{{'k': {}}}", "({}) * 2", "({}) | default(1)", "({}) if true else 0"]


@settings(max_examples=settings.default.max_examples * 4)
@given(wrappers=st.lists(st.sampled_from(_WRAPPERS), min_size=1, max_size=MAX_DEPTH + 40))
def test_deep_nesting_is_refused_when_loading_or_evaluates(wrappers: list[str], time_limit: Any) -> None:
    """An expression the loader accepts never fails later in code generation (too many nested
    parentheses, recursion); one too deep is a one-line load error."""
    source = "result.pid"
    for wrapper in wrappers:
        source = wrapper.replace("{}", source, 1) if wrapper.count("{}") == 1 else wrapper.format(source)
    try:
        expression = compile_expression(source)
    except ExprError as exc:
        assert "nested too deeply" in str(exc) or "does not compile" in str(exc), exc
        return
    with time_limit(10, "evaluating a deep expression"):
        try:
            expression.evaluate(copy.deepcopy(VARIABLES))
        except (RecursionError, SyntaxError, MemoryError) as exc:
            raise AssertionError(f"accepted at load time, then {type(exc).__name__}") from exc
        except Exception:  # noqa: BLE001 - e.g. -'text': an evaluation error on this node
            pass


@settings(max_examples=settings.default.max_examples * 4)
@given(base=st.sampled_from(["'ab'", "[1, 2]", "result.lines", "result.text", "(1, 2)", "10", "7"]),
       operations=st.lists(st.sampled_from(["* 1000", "* 99999", "** 99", "** 9999", "+ ({0})", "~ ({0})",
                                            "| list", "| join(({0}) | string)", "| center(9999999)",
                                            "| replace('a', ({0}) | string)", "| batch(999999, 0) | list",
                                            "| indent(99999)", "| tojson(indent=9999)", "| sum(start=[])"]),
                           min_size=1, max_size=8))
def test_growth_is_bounded(base: str, operations: list[str], time_limit: Any) -> None:
    """Operators and filters that multiply what they are given, chained: bounded or refused."""
    source = base
    for operation in operations:
        source = f"({source}) {operation.format(source)}"
    _evaluate(source, time_limit)
