"""xid: the NVIDIA driver's Xid events, on verbatim kernel-log lines from public threads (data/xid.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from runbook.checks.facts import xid

CASES = yaml.safe_load((Path(__file__).parent / "data" / "xid.yaml").read_text(encoding="utf-8"))
FIELDS = {"count", "events", "xids", "pcis", "pids", "categories"}


def lines_of(case_id: str) -> list[str]:
    return next(c for c in CASES if c["id"] == case_id)["lines"].splitlines()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_verbatim_lines_give_exact_facts(case: dict[str, Any]) -> None:
    facts = xid.parse(case["lines"].splitlines())
    assert facts is not None
    assert set(facts) == FIELDS
    assert {k: facts[k] for k in case["expected"]} == case["expected"]


def test_no_xid_gives_none() -> None:
    assert xid.parse([]) is None
    assert xid.parse(lines_of("mmu-fault-with-pid-and-name")[:2]) is None  # NVRM lines, no Xid


def test_a_real_xid_79_replaces_the_inferred_one_for_the_same_gpu() -> None:
    # Constructed: the verbatim multi-line message, then an Xid 79 line for the same bus id.
    real = ("[ 1843.308150] NVRM: Xid (PCI:0000:b3:00): 79, pid='<unknown>', name=<unknown>, "
            "GPU has fallen off the bus.")
    fallen = lines_of("fallen-off-the-bus-without-xid")
    for lines in (fallen + [real], [real] + fallen):
        facts = xid.parse(lines)
        assert facts is not None
        assert facts["count"] == 1
        assert facts["events"] == [{"pci": "0000:b3:00", "xid": 79, "pid": None, "name": None,
                                    "text": "GPU has fallen off the bus.", "inferred": False}]


def test_events_are_capped_and_counted() -> None:
    lines = lines_of("unknown-pid-graphics-exception") * 30
    facts = xid.parse(lines)
    assert facts is not None
    assert (facts["count"], len(facts["events"])) == (90, 20)
