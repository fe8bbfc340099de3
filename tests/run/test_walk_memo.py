"""Nodes that answer alike share one decision: the walk with its memos gives every node exactly
what the walk without them gives (branch, notes, evidence, conclusion, finding, fixes)."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runbook.format import expr
from runbook.library.runbooks import Library, load_library
from runbook.run import walk as walk_module
from runbook.run.walk import Walk, WalkOptions
from runbook.testing.runner import ReplayTransport
from runbook.transports import Node


def _scale_bench() -> ModuleType:
    """bench/scale.py, whose canned answers this test walks (loaded by path: bench is no package)."""
    spec = importlib.util.spec_from_file_location("bench_scale", Path(__file__).resolve().parents[2]
                                                  / "bench" / "scale.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module
    spec.loader.exec_module(module)
    return module


# training-hang's longest path, as bench/scale.py answers it, and variants that branch elsewhere.
HEALTHY: dict[str, dict[str, Any]] = copy.deepcopy(_scale_bench().CANNED)


def _variant(i: int) -> dict[str, Any]:
    answers = copy.deepcopy(HEALTHY)
    kind = i % 7
    if kind == 1:
        answers["read-log"]["age_s"] = 5  # the log moves
    elif kind == 2:
        answers["probe-gpu"]["max_util"] = 0
    elif kind == 3:
        answers["stack-dump"]["processes"] = [{"main_wait": "collective"}]
    elif kind == 4:
        del answers["read-log"]["age_s"]  # a condition fails on this node: a note
    elif kind == 5:
        answers["find-process"] = {"found": False}
    elif kind == 6:
        answers["nccl-settings"]["settings"] = {"NCCL_SOCKET_IFNAME": f"eth{i}"}
    if i % 11 == 3:  # a condition that reads the node (`node.name in outliers`) matches on these
        answers["probe-gpu"]["driver_version"] = "535.104.05"
    answers["find-process"].setdefault("pid", i)  # a value no condition reads differs per node
    return answers


def _walk(library: Library) -> dict[str, Any]:
    results = {f"n{i:03d}": _variant(i) for i in range(70)}
    outcomes = Walk(library, library.get("training-hang"), [Node(name) for name in results],
                    ReplayTransport(results), {"log": "/var/log/train.log"}, WalkOptions(forks=8)).run()
    return {o.node.name: (o.status, o.reason, o.path, o.conclusion.id if o.conclusion else None,
                          o.finding, o.fix_commands, o.fix_verifies,
                          [(e.step, e.goto, e.when, e.branch, e.notes, repr(e.decided_by))
                           for e in o.evidence])
            for o in outcomes}


@pytest.fixture(scope="module")
def library() -> Library:
    return load_library()


def test_shared_decisions_equal_each_node_decided_alone(library: Library,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    shared = _walk(library)
    monkeypatch.setattr(walk_module, "MEMO_CAP", 0)  # nothing kept: every node decided alone
    # and every condition that reads the node evaluated on it, never looked up in a shared set
    monkeypatch.setattr(expr.Expression, "members", lambda self, variables: None)
    alone = _walk(library)
    assert shared == alone
    assert len({v[3] for v in shared.values()}) > 2, "the variants should reach several conclusions"
    assert any(v[3] == "driver-version-differs" for v in shared.values()), "a by-node branch should match"


def test_equal_answer_lines_are_one_result_and_other_lines_their_own(library: Library) -> None:
    """A transport that parses the probe's answer line (`parse_answer`) keeps it: the walk tells
    equal answers apart by their lines, and an answer without one by its written form."""
    from runbook.transports import ProbeAnswer
    from runbook.transports.local import parse_answer

    lines = {"n1": b'{"result": {"exists": true, "age_s": 900}}',
             "n2": b'{"result": {"exists": true, "age_s": 900}}',
             "n3": b'{"result": {"exists": true, "age_s": 5}}'}

    class Lines:
        def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
            if node.name == "n4":  # no line: compared by its written form
                return ProbeAnswer("ok", {"exists": True, "age_s": 900})
            return parse_answer(lines[node.name], b"", 0, 0.1)

        def close(self) -> None:
            pass

    runbook = library.get("training-hang")
    walk = Walk(library, runbook, [Node(n) for n in ("n1", "n2", "n3", "n4")], Lines(),
                {"log": "/var/log/train.log"}, entry="read-log")
    first = {o.node.name: o.evidence[0].result for o in walk.run()}
    assert first["n1"] is first["n2"]
    assert first["n3"] is not first["n1"] and first["n3"]["age_s"] == 5
    assert first["n4"] == first["n1"] and first["n4"] is not first["n1"]
