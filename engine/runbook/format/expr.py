"""`when:` conditions and templated check parameters: sandboxed Jinja2, compiled at load time.

An expression sees `result` (this node's check result), `cluster` (every node's
result at the same step: a list of `{node, result}`), `steps` (this node's
earlier results by step id), `params` and `node`. Anything else, any name or
attribute starting with `_`, and unknown filters are refused when the runbook
is loaded, so a bad expression is a lint error, never a run-time surprise.

Evaluation is bounded: an expression nests at most MAX_DEPTH levels, and what one evaluation
builds (repetition, concatenation, `%` formatting, padding filters, joins) may come to at most
EVAL_BUDGET characters or items, and an integer at most MAX_INT_BITS bits. Over a bound,
evaluation stops with a one-line ExprLimitError on that node instead of a hang or MemoryError.
"""

from __future__ import annotations

import inspect
import math
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from typing import Any

from jinja2 import nodes, pass_context, pass_environment
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import TemplateSyntaxError
from jinja2.filters import make_attrgetter
from jinja2.runtime import ChainableUndefined, Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from runbook.format import compiled as _compiled
from runbook.format import inputs as _inputs
from runbook.format import membership as _membership

NAMES = ("result", "cluster", "steps", "params", "node", "job")
# Allowed in expressions besides NAMES: literals.
_LITERAL_NAMES = {"true", "false", "none", "True", "False", "None"}


MAX_DEPTH = 64  # levels of the expression tree; the shipped runbooks use fewer than 20
EVAL_BUDGET = 4_000_000  # characters or items one evaluation may build
MAX_INT_BITS = 10_000  # about 3,000 decimal digits
_MAX_WIDTH_DIGITS = 6  # a `%` width or precision longer than this is refused before int()
_MAX_SLOW_SUM = 1_000  # items `sum` adds the quadratic way (mixed sequence types)


class ExprError(ValueError):
    """An expression that does not compile or tries to reach outside the sandbox."""


class ExprLimitError(ExprError):
    """An evaluation that would go over a size bound; `str()` is the one-line reason."""


# ---- helpers for cross-node comparison, usable as filters: `cluster | field('x') | median` ----


# Every node of a step tests its branches against the same `cluster` list: what a filter
# computes from it is kept, keyed by that very list (held, so its id is not reused), so N nodes
# cost N, not N squared. The lists handed out are not changed by anyone: filters build new ones.
_MEMO: dict[tuple[int, str, str], tuple[Any, Any]] = {}
_MEMO_MAX = 256


def _memo(kind: str, source: Any, key: str, compute: Any) -> Any:
    if not isinstance(source, list):
        return compute()
    slot = (id(source), kind, key)
    held = _MEMO.get(slot)
    if held is not None and held[0] is source:
        return held[1]
    if len(_MEMO) >= _MEMO_MAX:
        _MEMO.clear()
    value = compute()
    _MEMO[slot] = (source, value)
    return value


def _value_at(entry: Any, path: str) -> Any:
    value: Any = entry.get("result", entry) if isinstance(entry, dict) else entry
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _field(cluster: Iterable[Any], path: str) -> list[Any]:
    """The value of dotted `path` in each node's result (missing values left out)."""
    return _memo("field", cluster, path, lambda: [v for v in (_value_at(e, path) for e in cluster)
                                                  if v is not None])


def _median(values: Iterable[Any]) -> float | None:
    def compute() -> float | None:
        nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return statistics.median(nums) if nums else None

    return _memo("median", values, "", compute)


def _majority(values: Iterable[Any]) -> Any:
    counted = Counter(repr(v) for v in values)
    if not counted:
        return None
    top = counted.most_common(1)[0][0]
    return next(v for v in values if repr(v) == top) if isinstance(values, list) else top


def _outliers(cluster: Iterable[Any], path: str) -> list[str]:
    """Nodes whose `path` value differs from the majority value."""
    def compute() -> list[str]:
        entries = list(cluster)
        pairs = [(e.get("node") if isinstance(e, dict) else None, _value_at(e, path)) for e in entries]
        values = [v for _, v in pairs if v is not None]
        if not values:
            return []
        common = _majority(values)
        return [node for node, v in pairs if v is not None and v != common]

    return _memo("outliers", cluster, path, compute)


def gib(mib: Any) -> str:
    """A size in MiB as people read it: `137738.24 | gib` is "134.51 GiB" ("?" when unknown)."""
    if not isinstance(mib, (int, float)) or isinstance(mib, bool):
        return "?"
    return f"{mib / 1024:.2f} GiB" if abs(mib) >= 1024 else f"{mib:.2f} MiB"


# ---- bounds: what one evaluation may build ----

# Units left to the evaluation under way (a list, so charges made in filters see one budget).
_BUDGET: ContextVar[list[int] | None] = ContextVar("runbook_expr_budget", default=None)


@contextmanager
def _bounded() -> Iterator[None]:
    token = _BUDGET.set([EVAL_BUDGET])
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _left() -> int:
    budget = _BUDGET.get()
    return EVAL_BUDGET if budget is None else budget[0]


def _charge(units: int, what: str) -> None:
    """Count `units` against this evaluation's budget, or refuse before anything is built."""
    left = _left()
    if units > left:
        raise ExprLimitError(f"{what} would build {units:,} characters or items; one evaluation "
                             f"may build at most {EVAL_BUDGET:,}")
    budget = _BUDGET.get()
    if budget is not None:
        budget[0] = left - units


def _weight(value: Any, cap: int) -> int:
    """Characters and items in `value`, counted deep (a list repeating one big item counts it
    every time), stopping once over `cap` so counting costs no more than the bound."""
    total, stack = 0, [value]
    while stack and total <= cap:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            total += item.bit_length() // 3 + 1  # about its decimal digits
        elif isinstance(item, (list, tuple, set, frozenset, dict)):
            total += len(item) + 1
            if total <= cap:
                stack.extend(chain(item.keys(), item.values()) if isinstance(item, dict) else item)
        else:
            total += 1
    return total


def _as_int(value: Any) -> int:
    """A width or count as the filter will read it; 0 when it is not a number (the filter fails)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return int(str(value)) if len(str(value)) <= _MAX_WIDTH_DIGITS else EVAL_BUDGET + 1
    except ValueError:
        return 0


def _check_int(value: int, what: str) -> None:
    if value > MAX_INT_BITS:
        raise ExprLimitError(f"{what} would be a number of about {value:,} bits; "
                             f"at most {MAX_INT_BITS:,} are allowed")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_power(base: Any, exponent: Any) -> None:
    if _is_int(base) and _is_int(exponent) and exponent > 0 and abs(base) > 1:
        _check_int(math.ceil(exponent * math.log2(abs(base))), "'**'")


def _check_multiply(left: Any, right: Any) -> None:
    if _is_int(left) and _is_int(right):
        _check_int(left.bit_length() + right.bit_length(), "'*'")
        return
    seq, times = (left, right) if _is_int(right) else (right, left)
    if _is_int(times) and isinstance(seq, (str, bytes, list, tuple)) and times > 0:
        each = _weight(seq, _left() // times + 1)
        _charge(each * times, "'*'")


def _check_add(left: Any, right: Any) -> None:
    sizes = [len(v) for v in (left, right) if isinstance(v, (str, bytes, list, tuple))]
    if len(sizes) == 2:
        _charge(sum(sizes), "'+'")


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?[A-Za-z%]?")


def _percent_size(fmt: str, args: Any) -> int:
    """An upper bound of `fmt % args`: refuses `*` widths and widths too long to read."""
    size = len(fmt) + 4 * _weight(args, _left())
    for match in _PERCENT_SPEC.finditer(fmt):
        for number in match.groups():
            if number == "*":
                raise ExprLimitError("'%' formatting: '*' widths are not allowed")
            if number and len(number) > _MAX_WIDTH_DIGITS:
                raise ExprLimitError(f"'%' formatting: width {number[:12]}... is too big")
            size += int(number or 0)
    return size


def _percent(fmt: str, args: Any) -> str:
    _charge(_percent_size(fmt, args), "'%' formatting")
    return fmt % args


class _BoundedCodeGenerator(CodeGenerator):
    """`a ~ b` joins through the environment, so its length is counted like other operators."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:  # noqa: N802 (Jinja's name)
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """The sandbox (no method that changes a list or dict) with `*`, `**`, `+`, `%` and `~`
    checked before they build their result, and what method calls build counted."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _BoundedCodeGenerator

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            _check_power(left, right)
        elif operator == "*":
            _check_multiply(left, right)
        elif operator == "+":
            _check_add(left, right)
        elif operator == "%" and isinstance(left, str):
            return _percent(left, right)
        return self.binop_table[operator](left, right)

    def wrap_str_format(self, value: Any) -> None:
        """No `str.format` at all, not even Jinja's sandboxed one: calling it is refused when
        loading, and handed back as a value it would be a function out of the sandbox."""
        return None

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return attr not in ("format", "format_map") and super().is_safe_attribute(obj, attr, value)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        """A method call: what `split`, `strip`, `lower` or `upper` build is counted too (`get`
        and the views of a dict hand back what is already there)."""
        result = super().call(__context, __obj, *args, **kwargs)
        if getattr(__obj, "__name__", "") in _BUILDING_METHODS:
            _charge(_size_of(result), f"method {__obj.__name__!r}")
        return result

    def bounded_concat(self, parts: Iterable[Any]) -> str:
        texts = [str(part) for part in parts]
        _charge(sum(len(t) for t in texts), "'~'")
        return "".join(texts)


# ---- filters that can build more than they are given: checked before they run ----


def _text_size(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(str(value))


def _center_size(a: dict[str, Any]) -> int:
    return max(_text_size(a["value"]), _as_int(a["width"]))


def _indent_size(a: dict[str, Any]) -> int:
    text, width = str(a["s"]), a["width"]
    pad = len(width) if isinstance(width, str) else _as_int(width)
    return len(text) + (text.count("\n") + 1) * max(pad, 0)


def _wordwrap_size(a: dict[str, Any]) -> int:
    text, wrap = str(a["s"]), a["wrapstring"]
    lines = len(text) // max(_as_int(a["width"]), 1) + text.count("\n") + 1
    return len(text) + lines * len(str(wrap) if wrap is not None else "\n")


def _replace_size(a: dict[str, Any]) -> int:
    text, old, new = str(a["s"]), str(a["old"]), str(a["new"])
    times = text.count(old) if old else len(text) + 1
    if a["count"] is not None and _as_int(a["count"]) >= 0:
        times = min(times, _as_int(a["count"]))
    return len(text) + times * max(len(new) - len(old), 0)


def _join_size(a: dict[str, Any]) -> int:
    items, cap = a["value"], _left()
    total = max(len(items) - 1, 0) * _text_size(a["d"])
    for item in items:
        if total > cap:
            break
        total += _text_size(item)
    return total


def _urlize_size(a: dict[str, Any]) -> int:
    text = str(a["value"])
    extra = _text_size(a["target"] or "") + _text_size(a["rel"] or "") + 60
    return 2 * len(text) + (text.count(".") + text.count("@") + text.count(":") + 1) * extra


def _tojson_size(a: dict[str, Any]) -> int:
    indent = a["indent"]
    if indent is None:
        return 0  # plain JSON is no bigger than a constant times what it is given
    pad = len(indent) if isinstance(indent, str) else max(_as_int(indent), 0)
    return _weight(a["value"], _left()) * (pad + 1)


_SIZES: dict[str, Callable[[dict[str, Any]], int]] = {
    "center": _center_size, "indent": _indent_size, "wordwrap": _wordwrap_size,
    "replace": _replace_size, "join": _join_size, "urlize": _urlize_size, "tojson": _tojson_size,
    "format": lambda a: _percent_size(str(a["value"]), a["kwargs"] or a["args"]),
    "batch": lambda a: _as_int(a["linecount"]) if a["fill_with"] is not None else 0,
    "slice": lambda a: max(_as_int(a["slices"]), 0),
    "round": lambda a: abs(_as_int(a["precision"])),  # 10 ** precision is computed
}
# The first data argument of these is read twice (to size, then to run): made a list first.
_MATERIALIZE = {"join": "value", "slice": "value"}
# Filters that hand back one of the items they were given, building nothing.
_PICKING = {"first", "last", "max", "min", "random"}
_BUILDING_METHODS = {"split", "strip", "lower", "upper"}


def _size_of(value: Any) -> int:
    """What a filter or method built, counted shallow (what it holds was counted when built)."""
    return len(value) if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)) else 0


def _prepare(name: str, arguments: dict[str, Any]) -> None:
    key = _MATERIALIZE.get(name)
    if key and not isinstance(arguments[key], (list, tuple, str)):
        arguments[key] = list(arguments[key])
    if name == "indent" and not isinstance(arguments["s"], str):
        arguments["s"] = str(arguments["s"])  # Jinja's `s += "\n"` would extend a list in place


def _passed(original: Callable[..., Any], context: Context) -> tuple[Any, ...]:
    """The leading argument Jinja gives `original` (its pass_context/eval_context/environment)."""
    passes = getattr(getattr(original, "jinja_pass_arg", None), "name", None)
    return {"context": (context,), "eval_context": (context.eval_ctx,),
            "environment": (context.environment,)}.get(passes or "", ())


def _guarded(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """`original`, refused when what it builds would go over the evaluation's budget: sized before
    it runs where it can multiply its input, counted after for every filter (each one grows its
    input by a constant factor at most, so a chain of them cannot grow without bound)."""
    parameters = list(inspect.signature(original).parameters.values())
    takes_passed = getattr(original, "jinja_pass_arg", None) is not None
    signature = inspect.Signature(parameters[1:] if takes_passed else parameters)
    size = _SIZES.get(name)

    passed_name = getattr(getattr(original, "jinja_pass_arg", None), "name", None)
    if size is None and name not in _MATERIALIZE and name != "indent":
        # Nothing to size or prepare before it runs: skip binding the arguments (the common case,
        # run for every node at every step), and count only what it built.
        @pass_context
        def counted(context: Context, *args: Any, **kwargs: Any) -> Any:
            passed = _passed(original, context) if passed_name else ()
            result = original(*passed, *args, **kwargs)
            if name not in _PICKING and all(result is not a for a in chain(args, kwargs.values())):
                _charge(_size_of(result), f"filter {name!r}")
            return result

        return counted

    @pass_context  # never run at compile time: Jinja folds constant filter calls, except these
    def guarded(context: Context, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        _prepare(name, bound.arguments)
        if size is not None:
            _charge(size(bound.arguments), f"filter {name!r}")
        result = original(*_passed(original, context), *bound.args, **bound.kwargs)
        if size is None and name not in _PICKING and all(result is not a for a in bound.arguments.values()):
            _charge(_size_of(result), f"filter {name!r}")
        return result

    return guarded


@pass_environment
def _sum(environment: Any, iterable: Iterable[Any], attribute: Any = None, start: Any = 0) -> Any:
    """Jinja's `sum`, adding lists or tuples in linear time (`sum(start=[])` flattens)."""
    if attribute is not None:
        iterable = map(make_attrgetter(environment, attribute), iterable)
    items = list(iterable)
    if isinstance(start, (list, tuple)) and all(type(item) is type(start) for item in items):
        _charge(len(start) + sum(len(item) for item in items), "filter 'sum'")
        return type(start)(chain(start, *items))
    if not isinstance(start, (int, float)) and len(items) > _MAX_SLOW_SUM:
        raise ExprLimitError(f"filter 'sum': adding {len(items):,} sequences of mixed types "
                             f"(at most {_MAX_SLOW_SUM:,})")
    return sum(items, start)


def _bound_filters(env: SandboxedEnvironment) -> None:
    env.filters["sum"] = _sum
    for name, original in list(env.filters.items()):
        # Jinja's async variants (join, slice, ...) add an argument: wrap the plain function.
        env.filters[name] = _guarded(name, inspect.unwrap(original))


def _make_env() -> SandboxedEnvironment:
    env = _BoundedSandbox(undefined=ChainableUndefined, autoescape=False)
    # `attr` reaches attributes by computed name; nothing a runbook needs.
    del env.filters["attr"]
    env.filters.update({
        "field": _field, "median": _median, "majority": _majority, "outliers": _outliers, "gib": gib,
    })
    _bound_filters(env)
    return env


_NO_BLOCKS: dict[str, Any] = {}


@lru_cache(maxsize=1)
def environment() -> SandboxedEnvironment:
    return _make_env()


@dataclass
class Expression:
    """A compiled, checked expression and the variable paths it reads (for evidence)."""

    source: str
    reads: list[str] = field(default_factory=list)
    _compiled: Any = None
    # For each read that is a plain path (names, attributes, constant keys; no filter): its keys,
    # so `read` can follow it without a Jinja evaluation.
    plain_paths: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    # What it can see of its variables (format/inputs.py): equal input keys, equal results.
    inputs: tuple[tuple[Any, ...], ...] = ()
    # The same evaluation as plain Python closures (format/compiled.py); None: Jinja's code.
    closure: Callable[[dict[str, Any]], Any] | None = field(default=None, repr=False, compare=False)
    # `A and node.name in X` split for the walk (format/membership.py); None: another shape.
    membership: _membership.Membership | None = field(default=None, repr=False, compare=False)

    def read(self, path: str, variables: dict[str, Any]) -> Any:
        """The value of one of `reads` (ChainableUndefined when missing): evidence of a decision."""
        keys = self.plain_paths.get(path)
        if keys is not None:
            value = _follow(variables, keys)
            if value is not _UNSURE:
                return value
        return compile_expression(path).evaluate(variables)

    def evaluate(self, variables: dict[str, Any]) -> Any:
        if self.closure is not None:
            token = _BUDGET.set([EVAL_BUDGET])
            try:
                return self.closure(variables)
            finally:
                _BUDGET.reset(token)
        return self.evaluate_sandboxed(variables)

    def members(self, variables: dict[str, Any]) -> frozenset[str] | bool | None:
        """For a `membership` condition, what decides it for every node that sees `variables` but
        for its own: False when `A` is false (false for all of them), else the names in `X` (it
        holds for a node whose name is one of them). None when it must be evaluated node by
        node: another shape, an error, or an `X` that is not a collection of text. One budget for
        both parts, as for the whole condition."""
        split = self.membership
        if split is None:
            return None
        token = _BUDGET.set([EVAL_BUDGET])
        try:
            if split.rest is not None and not truthy(split.rest(variables)):
                return False
            found = split.members(variables)
        except Exception:  # noqa: BLE001 - evaluated node by node, the error is noted there
            return None
        finally:
            _BUDGET.reset(token)
        # `name in X` on a list tests equality, on a dict its keys: a set of text says the same.
        if type(found) in (list, tuple, set, frozenset, dict) and all(type(item) is str for item in found):
            return frozenset(found)
        return None

    def evaluate_sandboxed(self, variables: dict[str, Any]) -> Any:
        """Through Jinja's generated code: the reference the closure is tested against."""
        if self._compiled is None:  # code generation waits for first use: loading stays fast
            # Jinja's expression object wraps a template whose code stores the value as `result`.
            self._compiled = environment().compile_expression(self.source)._template.root_render_func
        # A bare Context over `variables` itself: Jinja's own call copies its globals into a new
        # dict on every evaluation, and `_vet` lets an expression name nothing but NAMES anyway.
        context = Context(environment(), variables, None, _NO_BLOCKS)
        token = _BUDGET.set([EVAL_BUDGET])
        try:
            for _ in self._compiled(context):
                pass
        finally:
            _BUDGET.reset(token)
        return context.vars["result"]


@lru_cache(maxsize=4096)
def compile_expression(source: str) -> Expression:
    """Compile and vet one expression; raise ExprError with a one-line reason."""
    env = environment()
    # The parser saw our closing braces: say it the way the author wrote it.
    tree = _parse(env, "{{ " + source + " }}", ("unexpected '}'", "unexpected end of expression"))
    body = tree.body
    if len(body) != 1 or not isinstance(body[0], nodes.Output) or len(body[0].nodes) != 1:
        raise ExprError("must be a single expression, not template text")
    expr_node = body[0].nodes[0]
    _check_depth(expr_node)
    _vet(expr_node, env)
    reads = _reads(expr_node)
    plain = {path: keys for path, keys in _plain_paths(expr_node).items() if path in reads}
    return Expression(source, reads, plain_paths=plain, inputs=_inputs.inputs(expr_node),
                      closure=_compiled.closure(expr_node, env),
                      membership=_membership.membership(expr_node, env))


def _parse(env: SandboxedEnvironment, source: str, reword: tuple[str, str] = ("", "")) -> nodes.Template:
    """The template tree of `source`; ExprError with a one-line reason when it does not parse."""
    try:
        return env.parse(source)
    except TemplateSyntaxError as exc:
        message = exc.message or ""
        raise ExprError(f"does not compile: {message.replace(*reword) if reword[0] else message}") from None
    except RecursionError:  # Jinja's parser recurses once per bracket or prefix operator
        raise ExprError(f"nested too deeply (at most {MAX_DEPTH} levels)") from None


def _check_depth(tree: nodes.Node) -> None:
    """Refuse a tree deeper than MAX_DEPTH: code generation and Python's compiler recurse on it."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExprError(f"nested too deeply (more than {MAX_DEPTH} levels)")
        stack.extend((child, depth + 1) for child in node.iter_child_nodes())


def _vet_template(tree: nodes.Template, env: SandboxedEnvironment) -> None:
    """Vet every `{{ }}` of a text template."""
    for output in tree.find_all(nodes.Output):
        for part in output.nodes:
            if not isinstance(part, nodes.TemplateData):
                _check_depth(part)
                _vet(part, env)


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


def _plain_paths(tree: nodes.Node) -> dict[str, tuple[Any, ...]]:
    """Every plain variable path in `tree` (as `_dotted` writes it) with the keys it follows."""
    found: dict[str, tuple[Any, ...]] = {}
    for node in [tree, *tree.find_all((nodes.Getattr, nodes.Getitem))]:
        keys: list[Any] = []
        part = node
        while isinstance(part, (nodes.Getattr, nodes.Getitem)):
            if isinstance(part, nodes.Getattr):
                keys.append(part.attr)
            elif isinstance(part.arg, nodes.Const) and isinstance(part.arg.value, (str, int)):
                keys.append(part.arg.value)
            else:
                break
            part = part.node
        else:
            path = _dotted(node)
            if isinstance(part, nodes.Name) and path:
                found[path] = (part.name, *reversed(keys))
    return found


_UNSURE = object()  # `_follow` met a value whose lookup only Jinja can answer exactly
_MISSING = ChainableUndefined()


def _follow(variables: dict[str, Any], keys: tuple[Any, ...]) -> Any:
    """What Jinja's sandbox gives for a path through dicts (by string keys that are not dict
    methods) and lists (by index); _UNSURE for anything else, so the caller asks Jinja."""
    value: Any = variables
    for key in keys:
        if isinstance(value, dict) and isinstance(key, str) and not hasattr(dict, key):
            value = value.get(key, _MISSING)
        elif isinstance(value, list) and isinstance(key, int) and not isinstance(key, bool):
            value = value[key] if -len(value) <= key < len(value) else _MISSING
        elif value is _MISSING:
            return _MISSING
        else:
            return _UNSURE
    return value


# ---- templated check parameters: `with: {path: "{{ params.log }}"}` ----


@dataclass
class Template:
    """A `with:` value: a literal, a whole `{{ expr }}` (keeps its type) or a text template."""

    source: Any
    expression: Expression | None = None
    template: Any = None

    @property
    def inputs(self) -> tuple[tuple[Any, ...], ...]:
        if self.expression is not None:
            return self.expression.inputs
        return self.template.inputs if self.template is not None else ()

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
    tree = _parse(env, value)
    _vet_template(tree, env)
    return Template(value, template=_LazyTemplate(env, value, tree))


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
    tree = _parse(env, source)
    _vet_template(tree, env)
    return _LazyTemplate(env, source, tree)


class _LazyTemplate:
    """A checked template whose code is generated on first render (most are never rendered)."""

    def __init__(self, env: SandboxedEnvironment, source: str, tree: nodes.Template) -> None:
        self.env, self.source, self.inputs = env, source, _inputs.inputs(tree)
        self._template: Any = None
        # The same rendering as closures (format/compiled.py); None: Jinja's code.
        self.closure = _compiled.text_closure(tree, env)

    def render(self, **variables: Any) -> str:
        if self.closure is not None:
            with _bounded():
                return self.closure(variables)
        return self.render_sandboxed(**variables)

    def render_sandboxed(self, **variables: Any) -> str:
        """Through Jinja's generated code: the reference the closure is tested against."""
        if self._template is None:
            self._template = self.env.from_string(self.source)
        # As in Expression.evaluate: a bare Context over the variables, not Jinja's copy of them.
        context = Context(self.env, variables, None, _NO_BLOCKS)
        with _bounded():
            return str(self.env.concat(self._template.root_render_func(context)))


class _ShellTemplate:
    """A command-line parameter compiled with shell quoting; renders like a Template."""

    def __init__(self, template: Any) -> None:
        self.template = template
        self.inputs = template.inputs

    def render(self, variables: dict[str, Any]) -> str:
        return str(self.template.render(**variables))


def render_value(compiled: Any, variables: dict[str, Any]) -> Any:
    if isinstance(compiled, dict):
        return {k: render_value(v, variables) for k, v in compiled.items()}
    if isinstance(compiled, list):
        return [render_value(v, variables) for v in compiled]
    return compiled.render(variables)


def value_inputs(compiled: Any) -> tuple[tuple[Any, ...], ...]:
    """The variable paths every template in a compiled `with:` value reads (format/inputs.py)."""
    if isinstance(compiled, dict):
        return _inputs.union(value_inputs(v) for v in compiled.values())
    if isinstance(compiled, list):
        return _inputs.union(value_inputs(v) for v in compiled)
    return tuple(compiled.inputs)


def truthy(value: Any) -> bool:
    return bool(value) and not isinstance(value, ChainableUndefined)
