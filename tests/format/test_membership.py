"""`A and node.name in X` split so the walk looks each node up in one set (format/membership.py):
for every node, the set says what evaluating the whole condition on that node says."""

from __future__ import annotations

import random
from typing import Any

import pytest

from runbook.format.expr import compile_expression, truthy
from runbook.library.runbooks import load_library

SPLIT = [
    "node.name in (cluster | outliers('driver_version'))",
    "result.available and result.driver_version and node.name in (cluster | outliers('driver_version'))",
    "(cluster | length) > 1 and result.distinct_ops and node.name in (cluster | outliers('distinct_ops'))",
    "result.suspects and node.name in result.suspects",
]
NOT_SPLIT = [
    "node.name in result.suspects and result.available",  # the node's test is not the last
    "result.available or node.name in result.suspects",  # not a conjunction
    "node.name == 'gpu01'",
    "result.available and node.rack in result.racks",  # another attribute than the name
    "node.name in result.suspects and node.name != 'gpu01'",
    "result.available and node.name in (result.hosts | reject('equalto', node.name) | list)",
]


@pytest.mark.parametrize("source", SPLIT)
def test_conditions_of_that_shape_are_split(source: str) -> None:
    assert compile_expression(source).membership is not None


@pytest.mark.parametrize("source", NOT_SPLIT)
def test_other_shapes_are_evaluated_node_by_node(source: str) -> None:
    expression = compile_expression(source)
    assert expression.membership is None
    assert expression.members({"result": {}, "cluster": [], "node": {"name": "gpu01"}}) is None


def _shipped_membership_conditions() -> list[str]:
    library = load_library()
    found = set()
    for loaded in library.by_id.values():
        for expression in loaded.compiled.when.values():
            if expression.membership is not None:
                found.add(expression.source)
    return sorted(found)


def _variables(rng: random.Random, name: str, names: list[str]) -> dict[str, Any]:
    def result() -> dict[str, Any]:
        return {"available": rng.random() < 0.8, "driver_version": rng.choice(["535", "550", None]),
                "distinct_ops": rng.choice([["allreduce"], ["broadcast"], [], None]),
                "nccl_version": rng.choice(["2.18", "2.21"]),
                "nccl_versions": rng.choice([["2.18"], ["2.21"]]),
                "suspects": rng.sample(names, rng.randint(0, 3))}

    cluster = [{"node": other, "result": result()} for other in names]
    return {"result": result(), "cluster": cluster, "node": {"name": name}, "steps": {}, "params": {},
            "job": {}}


def test_every_shipped_membership_condition_agrees_with_its_evaluation() -> None:
    sources = _shipped_membership_conditions() + SPLIT
    assert len(sources) > len(SPLIT), "the shipped runbooks hold conditions of this shape"
    rng = random.Random(7)
    names = [f"gpu{i:02d}" for i in range(6)]
    checked = 0
    for source in sources:
        expression = compile_expression(source)
        for _ in range(60):
            variables = _variables(rng, names[0], names)
            found = expression.members(variables)
            for name in names:  # every node that sees the same variables but for its own name
                own = {**variables, "node": {"name": name}}
                try:
                    expected = truthy(expression.evaluate(own))
                except Exception:  # noqa: BLE001 - an error: the walk must evaluate node by node
                    assert found is None
                    continue
                if found is not None:
                    assert (found is not False and name in found) == expected, (source, variables)
                    checked += 1
    assert checked > 500


def test_a_text_or_an_error_is_left_to_node_by_node_evaluation() -> None:
    expression = compile_expression("result.available and node.name in result.suspects")
    # `'gpu' in 'gpu01'` is a substring test on text: no set says the same
    assert expression.members({"result": {"available": True, "suspects": "gpu01"}}) is None
    assert expression.members({"result": {"available": True, "suspects": [1, "gpu01"]}}) is None
    assert expression.members({"result": {"available": True}}) is None  # undefined: an error
    assert expression.members({"result": {"available": False}}) is False
    assert expression.members({"result": {"available": True, "suspects": {"gpu01": 1}}}) == {"gpu01"}
