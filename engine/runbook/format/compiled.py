"""`when:` expressions as plain Python closures over the sandbox's own operations.

Jinja evaluates an expression through generated code: a Context per evaluation, the
generated function, and every attribute, item, filter, test and call through the sandboxed
environment. Here the vetted tree (format/expr.py has refused what the sandbox refuses:
unknown names, `_` attributes and keys, unknown filters and tests, calls other than the
allowed methods) becomes one closure per node that does what that generated code does,
calling the very same environment methods (`getattr`, `getitem`, `call`, `call_binop`,
`bounded_concat`, the filters and tests): the sandbox's checks and the evaluation budget stay
exactly as they are, only the generated-code overhead goes.

Nodes this module does not know (slices, `*args`, an `if` without `else`, ...) make
`closure` return None, and the expression keeps the sandboxed path: behaviour never changes.
tests/format/test_expr_compiled.py compares both paths on every shipped condition and on
random expressions.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from jinja2 import nodes
from jinja2.runtime import Context
from jinja2.utils import _PassArg

Closure = Callable[["_Scope"], Any]

# Jinja writes these as the Python operator itself (Compare, and the binary operators the
# sandbox does not intercept).
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq, "ne": operator.ne, "gt": operator.gt, "gteq": operator.ge,
    "lt": operator.lt, "lteq": operator.le,
    "in": lambda a, b: a in b, "notin": lambda a, b: a not in b,
}
_PLAIN_BINOPS: dict[type[nodes.BinExpr], Callable[[Any, Any], Any]] = {
    nodes.Sub: operator.sub, nodes.Div: operator.truediv, nodes.FloorDiv: operator.floordiv,
}


class _Unsupported(Exception):
    """A node this compiler leaves to Jinja."""


class _Scope:
    """One evaluation: the variables, and a Jinja Context made only if a filter, test or call
    needs one (they are handed the same kind of Context the sandboxed path gives them)."""

    __slots__ = ("variables", "_env", "_context")

    def __init__(self, env: Any, variables: dict[str, Any]) -> None:
        self.variables, self._env, self._context = variables, env, None

    @property
    def context(self) -> Context:
        if self._context is None:
            self._context = Context(self._env, self.variables, None, {})
        return self._context


def closure(tree: nodes.Node, env: Any) -> Callable[[dict[str, Any]], Any] | None:
    """A function of the variables giving what the sandboxed evaluation of `tree` gives, or
    None when `tree` holds a node this module leaves to Jinja."""
    try:
        body = _compile(tree, env)
    except _Unsupported:
        return None

    def evaluate(variables: dict[str, Any]) -> Any:
        return body(_Scope(env, variables))

    return evaluate


def _compile(node: nodes.Node, env: Any) -> Closure:  # noqa: C901 - one branch per node type
    if isinstance(node, nodes.Const):
        value = node.value
        if isinstance(value, (list, dict, set)):
            raise _Unsupported  # Jinja writes a new one per evaluation
        return lambda scope: value
    if isinstance(node, nodes.Name):
        return _name(node.name, env)
    if isinstance(node, nodes.Getattr):
        obj, attr, getattr_ = _compile(node.node, env), node.attr, env.getattr
        if attr.startswith("_"):
            raise _Unsupported  # refused when loading; never reached
        return lambda scope: getattr_(obj(scope), attr)
    if isinstance(node, nodes.Getitem):
        if isinstance(node.arg, nodes.Slice):
            raise _Unsupported
        obj, arg, getitem = _compile(node.node, env), _compile(node.arg, env), env.getitem
        return lambda scope: getitem(obj(scope), arg(scope))
    if isinstance(node, nodes.And):
        left, right = _compile(node.left, env), _compile(node.right, env)
        return lambda scope: left(scope) and right(scope)
    if isinstance(node, nodes.Or):
        left, right = _compile(node.left, env), _compile(node.right, env)
        return lambda scope: left(scope) or right(scope)
    if isinstance(node, nodes.Not):
        inner = _compile(node.node, env)
        return lambda scope: not inner(scope)
    if isinstance(node, nodes.Neg):
        inner = _compile(node.node, env)
        return lambda scope: -inner(scope)
    if isinstance(node, nodes.Pos):
        inner = _compile(node.node, env)
        return lambda scope: +inner(scope)
    if isinstance(node, nodes.Compare):
        return _compare(node, env)
    if isinstance(node, nodes.BinExpr):
        return _binop(node, env)
    if isinstance(node, nodes.Concat):
        parts, concat = [_compile(n, env) for n in node.nodes], env.bounded_concat
        return lambda scope: concat([part(scope) for part in parts])
    if isinstance(node, nodes.CondExpr):
        if node.expr2 is None:
            raise _Unsupported  # Jinja's own "no else section" undefined
        test, yes, no = _compile(node.test, env), _compile(node.expr1, env), _compile(node.expr2, env)
        return lambda scope: yes(scope) if test(scope) else no(scope)
    if isinstance(node, (nodes.List, nodes.Tuple)):
        items = [_compile(n, env) for n in node.items]
        make = list if isinstance(node, nodes.List) else tuple
        return lambda scope: make([item(scope) for item in items])
    if isinstance(node, nodes.Dict):
        pairs = [(_compile(p.key, env), _compile(p.value, env)) for p in node.items]
        return lambda scope: {key(scope): value(scope) for key, value in pairs}
    if isinstance(node, (nodes.Filter, nodes.Test)):
        return _filter_or_test(node, env)
    if isinstance(node, nodes.Call):
        return _call(node, env)
    raise _Unsupported


def _name(name: str, env: Any) -> Closure:
    undefined = env.undefined

    def load(scope: _Scope) -> Any:
        value = scope.variables.get(name, _MISSING)
        return undefined(name=name) if value is _MISSING else value

    return load


_MISSING = object()


def _compare(node: nodes.Compare, env: Any) -> Closure:
    first = _compile(node.expr, env)
    ops = [(_COMPARE[op.op], _compile(op.expr, env)) for op in node.ops]
    if len(ops) == 1:
        (compare, right), = ops
        return lambda scope: compare(first(scope), right(scope))

    def chained(scope: _Scope) -> Any:  # Python's `a < b < c`: stops at the first false
        left, answer = first(scope), True
        for compare, right_of in ops:
            right = right_of(scope)
            answer = compare(left, right)
            if not answer:
                return answer
            left = right
        return answer

    return chained


def _binop(node: nodes.BinExpr, env: Any) -> Closure:
    left, right = _compile(node.left, env), _compile(node.right, env)
    plain = _PLAIN_BINOPS.get(type(node))
    if plain is not None and node.operator not in env.intercepted_binops:
        return lambda scope: plain(left(scope), right(scope))
    if node.operator not in env.intercepted_binops:
        raise _Unsupported
    # `*`, `**`, `+`, `%`: the sandbox sizes the result before building it.
    call_binop, name = env.call_binop, node.operator
    return lambda scope: call_binop(None, name, left(scope), right(scope))


def _arguments(node: nodes.Filter | nodes.Test | nodes.Call,
               env: Any) -> tuple[list[Closure], list[tuple[str, Closure]]]:
    if node.dyn_args is not None or node.dyn_kwargs is not None:
        raise _Unsupported
    return ([_compile(a, env) for a in node.args],
            [(kw.key, _compile(kw.value, env)) for kw in node.kwargs])


def _filter_or_test(node: nodes.Filter | nodes.Test, env: Any) -> Closure:
    if node.node is None:
        raise _Unsupported  # a filter block, not an expression
    table = env.filters if isinstance(node, nodes.Filter) else env.tests
    function = table.get(node.name)
    if function is None:
        raise _Unsupported  # refused when loading; never reached
    subject = _compile(node.node, env)
    args, kwargs = _arguments(node, env)
    passes = _PassArg.from_obj(function)
    leading: Callable[[_Scope], tuple[Any, ...]] = {
        _PassArg.context: lambda scope: (scope.context,),
        _PassArg.eval_context: lambda scope: (scope.context.eval_ctx,),
        _PassArg.environment: lambda scope: (env,),
    }.get(passes, lambda scope: ())  # type: ignore[arg-type]

    def apply(scope: _Scope) -> Any:
        return function(*leading(scope), subject(scope), *[a(scope) for a in args],
                        **{key: value(scope) for key, value in kwargs})

    return apply


def _call(node: nodes.Call, env: Any) -> Closure:
    if not isinstance(node.node, nodes.Getattr):
        raise _Unsupported  # refused when loading; never reached
    method = _compile(node.node, env)
    args, kwargs = _arguments(node, env)
    call = env.call

    def apply(scope: _Scope) -> Any:
        return call(scope.context, method(scope), *[a(scope) for a in args],
                    **{key: value(scope) for key, value in kwargs})

    return apply
