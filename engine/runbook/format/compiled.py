"""`when:` expressions as plain Python closures over the sandbox's own operations.

Jinja evaluates an expression through generated code: a Context per evaluation, the
generated function, and every attribute, item, filter, test and call through the sandboxed
environment. Here the vetted tree (format/expr.py has refused what the sandbox refuses:
unknown names, `_` attributes and keys, unknown filters and tests, calls other than the
allowed methods) becomes one closure per node that does what that generated code does,
calling the very same environment methods (`getattr`, `getitem`, `call`, `call_binop`,
`bounded_concat`, the filters and tests): the sandbox's checks and the evaluation budget stay
exactly as they are, only the generated-code overhead goes. Jinja folds constant parts of an
expression when it generates code (sometimes differently from evaluating them: `(0)[:0]`
folds to undefined but raises at run time); the tree is folded here by Jinja's own optimizer
first, so the closures see what the generated code sees.

Nodes this module does not know (`*args`, an `if` without `else`, ...) make
`closure` return None, and the expression keeps the sandboxed path: behaviour never changes.
tests/format/test_expr_compiled.py compares both paths on every shipped condition and on
random expressions.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable
from typing import Any

from jinja2 import nodes
from jinja2.nodes import EvalContext
from jinja2.optimizer import Optimizer
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
        body = _compile(_folded(tree, env), env)
    except Exception:  # noqa: BLE001 - _Unsupported, or folding failed: Jinja's path says how
        return None

    def evaluate(variables: dict[str, Any]) -> Any:
        return body(_Scope(env, variables))

    return evaluate


def text_closure(tree: nodes.Template, env: Any) -> Callable[[dict[str, Any]], str] | None:
    """A text template (`with:` text, a finding, a fix's command) as a closure: its text, and
    each `{{ }}` as `str(finalize(value))` the way Jinja's generated code writes it; None when it
    holds anything but text and expressions."""
    pieces: list[Callable[[_Scope], str]] = []
    finalize = env.finalize
    if finalize is not None and _PassArg.from_obj(finalize) is not None:
        return None
    try:
        for output in tree.body:
            if not isinstance(output, nodes.Output):
                return None
            for child in output.nodes:
                if isinstance(child, nodes.TemplateData):
                    text = child.data
                    pieces.append(lambda scope, text=text: text)
                    continue
                constant = _constant_text(child, env)
                if constant is not None:
                    pieces.append(lambda scope, text=constant: text)
                    continue
                try:
                    value = _compile(_folded(child, env), env)
                except _Unsupported:
                    raise
                except Exception:  # noqa: BLE001 - folding failed: Jinja's path says how
                    return None
                if finalize is None:
                    pieces.append(lambda scope, value=value: str(value(scope)))
                else:
                    pieces.append(lambda scope, value=value: str(finalize(value(scope))))
    except _Unsupported:
        return None

    def render(variables: dict[str, Any]) -> str:
        scope = _Scope(env, variables)
        return "".join([piece(scope) for piece in pieces])

    return render


def _folded(tree: nodes.Node, env: Any) -> nodes.Node:
    """`tree` with its constant parts folded as Jinja's code generator folds them (on a copy:
    the optimizer rewrites the tree it is given)."""
    return Optimizer(env).visit(copy.deepcopy(tree, {id(env): env}), EvalContext(env))


def _constant_text(child: nodes.Node, env: Any) -> str | None:
    """What Jinja writes for a constant `{{ }}` in text (it folds the whole child, and finalizes
    it, when it generates code); None when the child is evaluated at run time."""
    try:
        value = child.as_const(EvalContext(env))
        return str(env.finalize(value)) if env.finalize is not None else str(value)
    except Exception:  # noqa: BLE001 - Impossible, or an error Jinja leaves to run time
        return None


def _compile(node: nodes.Node, env: Any) -> Closure:  # noqa: C901 - one branch per node type
    if isinstance(node, nodes.Const):
        value = node.value
        if isinstance(value, (list, dict, set, tuple)):  # folded: Jinja writes a new one each time
            return lambda scope: copy.deepcopy(value)
        return lambda scope: value
    if isinstance(node, nodes.Name):
        return _name(node.name, env)
    if isinstance(node, nodes.Getattr):
        obj, attr, getattr_ = _compile(node.node, env), node.attr, env.getattr
        if attr.startswith("_"):
            raise _Unsupported  # refused when loading; never reached
        return lambda scope: getattr_(obj(scope), attr)
    if isinstance(node, nodes.Getitem):
        if isinstance(node.arg, nodes.Slice):  # Jinja writes `obj[a:b:c]`, past the environment
            return _slice(_compile(node.node, env), node.arg, env)
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


def _slice(obj: Closure, part: nodes.Slice, env: Any) -> Closure:
    bounds = [_compile(b, env) if b is not None else (lambda scope: None)
              for b in (part.start, part.stop, part.step)]
    start, stop, step = bounds
    return lambda scope: obj(scope)[slice(start(scope), stop(scope), step(scope))]


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
