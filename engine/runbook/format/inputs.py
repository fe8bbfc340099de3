"""What an expression can see of its variables, as a key: equal keys give equal results.

An expression reads its variables only through names, attributes and constant keys
(`result.patterns.oom.count`, `steps['read-log'].result`). For each variable it names we keep
the longest such path it follows from there (`inputs`); `input_key` follows those paths in a
node's variables and writes what it finds as text. Two nodes with the same key give the
expression the same values, so it evaluates to the same value, the same error or the same
evidence on both: the engine evaluates a step's conditions once per distinct key instead of
once per node (thousands of healthy nodes answer alike).

The path is followed only where the sandbox's own lookup is certain (a plain dict by a key that
is not a dict method, a list by an index); elsewhere the key holds the whole value reached so
far, which decides the rest of the path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jinja2 import nodes

Path = tuple[Any, ...]  # (variable name, key, key, ...)
_DICT_NAMES = frozenset(dir(dict))  # attributes Jinja's getattr finds before a dict's keys
_ABSENT = object()  # a variable or key that is not there: Jinja's undefined


def inputs(tree: nodes.Node) -> tuple[Path, ...]:
    """Each path an expression follows from a variable, as far as names, attributes and constant
    keys go (`x[y]` with `y` computed stops at `x`); the variable alone where it is used bare."""
    parents: dict[int, nodes.Node] = {}
    names: list[nodes.Name] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, nodes.Name):
            names.append(node)
        for child in node.iter_child_nodes():
            parents[id(child)] = node
            stack.append(child)
    paths: set[Path] = set()
    for name in names:
        keys: list[Any] = [name.name]
        here: nodes.Node = name
        while True:
            up = parents.get(id(here))
            if isinstance(up, nodes.Getattr) and up.node is here:
                keys.append(up.attr)
            elif (isinstance(up, nodes.Getitem) and up.node is here and isinstance(up.arg, nodes.Const)
                  and type(up.arg.value) in (str, int)):
                keys.append(up.arg.value)
            else:
                break
            here = up
        member = _member_of(here, parents)
        paths.add((*keys, member) if member is not None else tuple(keys))
    return tuple(sorted(paths, key=repr))


class Contains(tuple):  # type: ignore[type-arg]
    """The last part of a path tested only with `'x' in path`: what counts is the answer."""


def _member_of(here: nodes.Node, parents: dict[int, nodes.Node]) -> Contains | None:
    """`Contains((value,))` when `here` is only the right side of `CONST in here` (`'straggler-gpu'
    in steps`): the key then holds the answer, not every earlier step's whole result."""
    operand, compare = parents.get(id(here)), None
    if isinstance(operand, nodes.Operand) and operand.op in ("in", "notin"):
        compare = parents.get(id(operand))
    if (isinstance(compare, nodes.Compare) and len(compare.ops) == 1 and isinstance(compare.expr, nodes.Const)
            and type(compare.expr.value) is str):
        return Contains((compare.expr.value,))
    return None


def union(groups: Iterable[tuple[Path, ...]]) -> tuple[Path, ...]:
    """The paths of several expressions (a step's conditions), each once."""
    return tuple(sorted({path for group in groups for path in group}, key=repr))


def input_key(paths: tuple[Path, ...], variables: dict[str, Any],
              constant: frozenset[str] = frozenset()) -> tuple[Any, ...]:
    """What `paths` reach in `variables`, as hashable text. Variables named in `constant` are the
    same object for every caller sharing a memo (a step's `cluster`) and are left out."""
    key: list[Any] = []
    for path in paths:
        if path[0] in constant:
            continue
        value: Any = variables.get(path[0], _ABSENT)
        if value is _ABSENT:
            key.append((0, "\x00missing", None))
            continue
        depth = 1
        missing_in: str | None = None
        for part in path[1:]:
            if type(part) is Contains:
                if type(value) is dict:
                    value = part[0] in value  # a dict's `in` reads its keys only
                    depth += 1
                break
            if type(value) is dict and (type(part) is int or (type(part) is str and part not in _DICT_NAMES)):
                found = value.get(part, _ABSENT)
            elif type(value) is list and type(part) is int:
                found = value[part] if -len(value) <= part < len(value) else _ABSENT
            else:
                break  # the sandbox's lookup here depends on more than the key: keep the whole value
            if found is _ABSENT:
                # Undefined from here on; its message names only the type it was looked up in.
                missing_in = type(value).__name__
                break
            value, depth = found, depth + 1
        key.append((depth, "\x00missing", missing_in) if missing_in else (depth, repr(value)))
    return tuple(key)
