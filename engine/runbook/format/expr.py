"""`when:` conditions and templated check parameters: sandboxed Jinja2, compiled at load time.

An expression sees `result` (this node's check result), `cluster` (every node's
result at the same step: a list of `{node, result}`), `steps` (this node's
earlier results by step id), `params` and `node`. Anything else, any name or
attribute starting with `_`, and unknown filters are refused when the runbook
is loaded, so a bad expression is a lint error, never a run-time surprise.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from jinja2 import nodes
from jinja2.exceptions import TemplateSyntaxError
from jinja2.runtime import ChainableUndefined
from jinja2.sandbox import SandboxedEnvironment

NAMES = ("result", "cluster", "steps", "params", "node")
# Allowed in expressions besides NAMES: literals.
_LITERAL_NAMES = {"true", "false", "none", "True", "False", "None"}


class ExprError(ValueError):
    """An expression that does not compile or tries to reach outside the sandbox."""


# ---- helpers for cross-node comparison, usable as filters: `cluster | field('x') | median` ----


def _field(cluster: Iterable[Any], path: str) -> list[Any]:
    """The value of dotted `path` in each node's result (missing values left out)."""
    out = []
    for entry in cluster:
        value: Any = entry.get("result", entry) if isinstance(entry, dict) else entry
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None:
            out.append(value)
    return out


def _median(values: Iterable[Any]) -> float | None:
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(nums) if nums else None


def _majority(values: Iterable[Any]) -> Any:
    counted = Counter(repr(v) for v in values)
    if not counted:
        return None
    top = counted.most_common(1)[0][0]
    return next(v for v in values if repr(v) == top) if isinstance(values, list) else top


def _outliers(cluster: Iterable[Any], path: str) -> list[str]:
    """Nodes whose `path` value differs from the majority value."""
    entries = list(cluster)
    values = _field(entries, path)
    if not values:
        return []
    common = _majority(values)
    return [e["node"] for e in entries if _field([e], path) and _field([e], path)[0] != common]


def _make_env() -> SandboxedEnvironment:
    env = SandboxedEnvironment(undefined=ChainableUndefined, autoescape=False)
    # `attr` reaches attributes by computed name; nothing a runbook needs.
    del env.filters["attr"]
    env.filters.update({
        "field": _field, "median": _median, "majority": _majority, "outliers": _outliers,
    })
    return env


@lru_cache(maxsize=1)
def environment() -> SandboxedEnvironment:
    return _make_env()


@dataclass
class Expression:
    """A compiled, checked expression and the variable paths it reads (for evidence)."""

    source: str
    reads: list[str] = field(default_factory=list)
    _compiled: Any = None

    def evaluate(self, variables: dict[str, Any]) -> Any:
        if self._compiled is None:  # code generation waits for first use: loading stays fast
            self._compiled = environment().compile_expression(self.source, undefined_to_none=False)
        return self._compiled(**variables)


@lru_cache(maxsize=4096)
def compile_expression(source: str) -> Expression:
    """Compile and vet one expression; raise ExprError with a one-line reason."""
    env = environment()
    try:
        tree = env.parse("{{ " + source + " }}")
    except TemplateSyntaxError as exc:
        # The parser saw our closing braces: say it the way the author wrote it.
        message = (exc.message or "").replace("unexpected '}'", "unexpected end of expression")
        raise ExprError(f"does not compile: {message}") from None
    body = tree.body
    if len(body) != 1 or not isinstance(body[0], nodes.Output) or len(body[0].nodes) != 1:
        raise ExprError("must be a single expression, not template text")
    expr_node = body[0].nodes[0]
    _vet(expr_node, env)
    return Expression(source, _reads(expr_node))


def _vet(tree: nodes.Node, env: SandboxedEnvironment) -> None:
    kinds = (nodes.Name, nodes.Getattr, nodes.Getitem, nodes.Filter, nodes.Test, nodes.Call,
             nodes.Const)
    for node in [tree, *tree.find_all(kinds)]:
        if isinstance(node, nodes.Const) and isinstance(node.value, str) and "__" in node.value:
            raise ExprError(f"string {node.value!r} is not allowed (dunder names)")
        if isinstance(node, nodes.Name) and node.name not in NAMES + tuple(_LITERAL_NAMES):
            raise ExprError(f"unknown name {node.name!r} (use one of: {', '.join(NAMES)})")
        if isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
            raise ExprError(f"attribute {node.attr!r} is not allowed (names starting with '_')")
        if (isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const)
                and isinstance(node.arg.value, str) and node.arg.value.startswith("_")):
            raise ExprError(f"key {node.arg.value!r} is not allowed (names starting with '_')")
        if isinstance(node, nodes.Filter) and node.name not in env.filters:
            raise ExprError(f"unknown filter {node.name!r}")
        if isinstance(node, nodes.Test) and node.name not in env.tests:
            raise ExprError(f"unknown test {node.name!r}")
        if isinstance(node, nodes.Call) and not isinstance(node.node, nodes.Getattr):
            raise ExprError("only method calls such as result.get('x') are allowed")
        if (isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr)
                and node.node.attr not in ("get", "keys", "values", "items", "startswith",
                                            "endswith", "lower", "upper", "split", "strip")):
            raise ExprError(f"method {node.node.attr!r} is not allowed")


def _dotted(node: nodes.Node) -> str | None:
    """Source-like text of a variable path or a filter chain over one, else None."""
    if isinstance(node, nodes.Name) and node.name in NAMES:
        return node.name
    if isinstance(node, nodes.Getattr):
        base = _dotted(node.node)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        base = _dotted(node.node)
        return f"{base}[{node.arg.value!r}]" if base else None
    if isinstance(node, nodes.Filter) and node.node is not None and not node.kwargs:
        base = _dotted(node.node)
        if base is None or not all(isinstance(a, nodes.Const) for a in node.args):
            return None
        args = ", ".join(repr(a.value) for a in node.args)  # type: ignore[attr-defined]
        return f"{base} | {node.name}" + (f"({args})" if args else "")
    return None


def _reads(tree: nodes.Node) -> list[str]:
    """The outermost variable paths and filter chains an expression reads: evidence."""
    found: list[str] = []
    for node in [tree, *tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Name, nodes.Filter))]:
        path = _dotted(node)
        if path and path not in found:
            found.append(path)
    return [p for p in found if not any(o != p and o.startswith(p) for o in found)]


# ---- templated check parameters: `with: {path: "{{ params.log }}"}` ----


@dataclass
class Template:
    """A `with:` value: a literal, a whole `{{ expr }}` (keeps its type) or a text template."""

    source: Any
    expression: Expression | None = None
    template: Any = None

    def render(self, variables: dict[str, Any]) -> Any:
        if self.expression is not None:
            value = self.expression.evaluate(variables)
            return None if isinstance(value, ChainableUndefined) else value
        if self.template is not None:
            return self.template.render(**variables)
        return self.source


def compile_value(value: Any, shell_keys: tuple[str, ...] = ()) -> Any:
    """Compile every string holding `{{ }}` inside a `with:` value (raises ExprError).

    Top-level keys in `shell_keys` are shell command lines: values substituted into them
    are shell-quoted, as in a fix's `run:`.
    """
    if isinstance(value, dict):
        return {k: _ShellTemplate(compile_command(v)) if k in shell_keys and isinstance(v, str)
                and ("{{" in v) else compile_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compile_value(v) for v in value]
    if not isinstance(value, str) or "{{" not in value and "{%" not in value:
        return Template(value)
    stripped = value.strip()
    inner = stripped[2:-2]
    if stripped.startswith("{{") and stripped.endswith("}}") and "{{" not in inner:
        return Template(value, expression=compile_expression(inner.strip()))
    if "{%" in value:
        raise ExprError("statements ({% %}) are not allowed in check parameters")
    env = environment()
    try:
        tree = env.parse(value)
    except TemplateSyntaxError as exc:
        raise ExprError(f"does not compile: {exc.message}") from None
    for output in tree.find_all(nodes.Output):
        for part in output.nodes:
            if not isinstance(part, nodes.TemplateData):
                _vet(part, env)
    return Template(value, template=_LazyTemplate(env, value))


@lru_cache(maxsize=1)
def _command_environment() -> SandboxedEnvironment:
    env = _make_env()
    env.finalize = _shell_word
    return env


UNSET_WORD = "'<unset>'"  # what a missing value becomes in a command line


def _shell_word(value: Any) -> str:
    """Every value put into a command is one shell word; a missing one is shown as such."""
    import shlex

    if value is None or isinstance(value, ChainableUndefined):
        return UNSET_WORD  # quoted: never read by the shell as a redirection
    return shlex.quote(str(value))


def compile_command(source: str) -> Any:
    """A fix's `run:` command; values substituted into it are shell-quoted (raises ExprError)."""
    env = _command_environment()
    if "{%" in source:
        raise ExprError("statements ({% %}) are not allowed in commands")
    try:
        tree = env.parse(source)
    except TemplateSyntaxError as exc:
        raise ExprError(f"does not compile: {exc.message}") from None
    for output in tree.find_all(nodes.Output):
        for part in output.nodes:
            if not isinstance(part, nodes.TemplateData):
                _vet(part, env)
    return _LazyTemplate(env, source)


class _LazyTemplate:
    """A checked template whose code is generated on first render (most are never rendered)."""

    def __init__(self, env: SandboxedEnvironment, source: str) -> None:
        self.env, self.source = env, source
        self._template: Any = None

    def render(self, **variables: Any) -> str:
        if self._template is None:
            self._template = self.env.from_string(self.source)
        return str(self._template.render(**variables))


class _ShellTemplate:
    """A command-line parameter compiled with shell quoting; renders like a Template."""

    def __init__(self, template: Any) -> None:
        self.template = template

    def render(self, variables: dict[str, Any]) -> str:
        return str(self.template.render(**variables))


def render_value(compiled: Any, variables: dict[str, Any]) -> Any:
    if isinstance(compiled, dict):
        return {k: render_value(v, variables) for k, v in compiled.items()}
    if isinstance(compiled, list):
        return [render_value(v, variables) for v in compiled]
    return compiled.render(variables)


def truthy(value: Any) -> bool:
    return bool(value) and not isinstance(value, ChainableUndefined)
