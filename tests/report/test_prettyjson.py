"""report/prettyjson.py writes what json.dumps(indent=2, ensure_ascii=False, default=str) writes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from runbook.report.prettyjson import dumps

ROOT = Path(__file__).resolve().parents[2]
RECORDED = sorted((ROOT / "runbooks" / "recordings").glob("*/incident.json"))


def reference(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, default=str)


@pytest.mark.parametrize("path", RECORDED[:12], ids=lambda p: p.parent.name)
def test_recorded_incidents_are_written_byte_for_byte_as_the_standard_library_does(path: Path) -> None:
    document = json.loads(path.read_text("utf-8"))
    assert dumps(document) == reference(document)


class Opaque:
    def __str__(self) -> str:
        return "opaque <1>"


@pytest.mark.parametrize("value", [
    {}, [], "", 0, -1, 10**30, 1.5, 1e-7, 1e22, -0.0, math.nan, math.inf, -math.inf, True, False, None,
    {"训练": "日志\u2028\t\"\\\x00", "e": [], "d": {}, "nested": [[], [{}], [[1, "a"]]]},
    {1: "int key", 2.5: "float key", False: "bool key", None: "none key"},
    {"tuple": (1, "a", None), "path": Path("/x/y"), "object": Opaque(), "strings": ["a", "b\n", "ü"]},
])
def test_every_kind_of_value_is_written_as_the_standard_library_writes_it(value: Any) -> None:
    assert dumps(value) == reference(value)


def test_what_the_standard_library_refuses_is_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        dumps(loop)
    with pytest.raises(TypeError):
        dumps({(1, 2): "tuple key"})
