"""Conditions that ask whether the node is in a list all nodes share: `A and node.name in X`.

`node.name in (cluster | outliers('driver_version'))` reads the node itself, so no two nodes
share its value, and evaluated node by node it costs an evaluation per node. But where neither
`A` nor `X` reads the node, both are the same for every node with the same history and answer:
the walk evaluates them once, keeps `X` as a set, and each node's answer is then one lookup
(format/expr.py's `Expression.members`, run/walk.py). Anything else is evaluated node by node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jinja2 import nodes

from runbook.format import compiled as _compiled


@dataclass(frozen=True)
class Membership:
    """`rest and node.name in members`, as closures of the variables (`rest` None: the condition
    is the membership test alone)."""

    rest: Callable[[dict[str, Any]], Any] | None
    members: Callable[[dict[str, Any]], Any]


def membership(tree: nodes.Node, env: Any) -> Membership | None:
    """The condition `tree` split as above, or None when it has another shape, reads the node
    anywhere else, or holds something format/compiled.py leaves to Jinja."""
    conjuncts = _conjuncts(tree)
    *rest, test = conjuncts
    if any(_reads_node(part) for part in rest):
        return None
    if not (isinstance(test, nodes.Compare) and len(test.ops) == 1 and test.ops[0].op == "in"):
        return None
    subject, collection = test.expr, test.ops[0].expr
    if not (isinstance(subject, nodes.Getattr) and isinstance(subject.node, nodes.Name)
            and subject.node.name == "node" and subject.attr == "name"):
        return None
    if _reads_node(collection):
        return None
    members = _compiled.closure(collection, env)
    before = _joined(rest)
    rest_closure = _compiled.closure(before, env) if before is not None else None
    if members is None or (before is not None and rest_closure is None):
        return None
    return Membership(rest_closure, members)


def _conjuncts(tree: nodes.Node) -> list[nodes.Node]:
    """`a and b and c` (Jinja nests it as `(a and b) and c`) as [a, b, c], in order."""
    if isinstance(tree, nodes.And):
        return _conjuncts(tree.left) + _conjuncts(tree.right)
    return [tree]


def _joined(parts: list[nodes.Node]) -> nodes.Node | None:
    if not parts:
        return None
    tree = parts[0]
    for part in parts[1:]:
        tree = nodes.And(tree, part, lineno=part.lineno)
    return tree


def _reads_node(tree: nodes.Node) -> bool:
    return any(name.name == "node" for name in tree.find_all(nodes.Name)) or (
        isinstance(tree, nodes.Name) and tree.name == "node")
