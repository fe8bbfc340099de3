"""triage/ranking.py: the ranking's data is plain JSON, complete, and gives the numbers it gave
as constants in verdict.py, score.py and fallback.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from runbook.triage.formula import problems
from runbook.triage.ordering import FIELDS
from runbook.triage.ranking import RANKING
from runbook.triage.score import kept_lines, specificity, strength
from runbook.triage.verdict import CAUSE, HEALTHY_ROLE, KNOCK_ON, SIMILAR, confidence

SCHEMA = Path(__file__).resolve().parents[2] / "engine" / "runbook" / "schema" / "runbook.v1.json"
# What the code gives each formula (score.py, verdict.py, fallback.py; triage.js alike).
NAMES = {
    ("signature", "weight"): {"literal", "generic"},
    ("signature", "strength"): {"weight", "count", "generic"},
    ("signature", "confidence"): {"weight", "count", "generic", "score"},
    ("similar", "confidence"): {"score", "best"},
}


def test_the_ranking_is_plain_json() -> None:
    assert json.loads(json.dumps(RANKING)) == RANKING  # what the page reads back is what Python applies


@pytest.mark.parametrize("kind, name", NAMES)
def test_every_formula_names_only_what_its_caller_gives(kind: str, name: str) -> None:
    assert problems(RANKING["evidence"][kind][name], NAMES[(kind, name)]) == []


def test_every_key_and_role_is_known() -> None:
    roles = [entry["id"] for entry in RANKING["roles"]]
    assert roles == [CAUSE, KNOCK_ON, SIMILAR, HEALTHY_ROLE]
    assert all(0 < entry["confidence"] <= 1 for entry in RANKING["roles"])
    assert {key["key"] for key in RANKING["order"]} <= set(FIELDS)
    assert set(RANKING["by_time"]["within"]) <= set(FIELDS)
    assert set(_signature_roles(json.loads(SCHEMA.read_text("utf-8")))) <= set(roles)


def _signature_roles(schema: Any) -> list[str]:
    """The `role` enum of a signature in the runbook schema, wherever it is nested."""
    if isinstance(schema, dict):
        role = schema.get("properties", {}).get("role", {})
        if "pattern" in schema.get("properties", {}) and "enum" in role:
            return list(role["enum"])
        return [r for value in schema.values() for r in _signature_roles(value)]
    if isinstance(schema, list):
        return [r for value in schema for r in _signature_roles(value)]
    return []


def test_the_numbers_are_the_ones_the_constants_gave() -> None:
    for weight in (0.06, 0.3, 1.0, 1.7, 2.5):
        specific = min(0.95, 0.45 + 0.25 * math.log2(1 + weight))
        names = {"weight": weight, "count": 1, "generic": False, "score": weight}
        assert confidence("signature", names, CAUSE) == round(specific, 2)
        assert confidence("signature", names, KNOCK_ON) == round(specific * 0.6, 2)
        assert confidence("signature", {**names, "generic": True}, KNOCK_ON) == 0.12
        for count in (1, 2, 5, 32, 33, 1000):
            assert strength(weight, count, False) == weight * (1.0 + math.log2(min(max(count, 1), 32)) / 3.0)
    assert confidence("similar", {"score": 5.0, "best": 10.0}, SIMILAR) == round(0.1 + 0.2 * 5.0 / 10.0, 2)
    literal = "Watchdog caught collective operation timeout"
    assert specificity(literal) == min(max(math.sqrt(len(literal) / 10.0), 0.3), 2.5)
    assert specificity("Traceback") == min(max(math.sqrt(9 / 10.0), 0.3), 2.5) * 0.2  # generic
    assert kept_lines() == 3
