"""Walk a recorded incident again with today's runbooks, answering every check from the recording.

The n-th time a node's walk asks a step, it gets the n-th answer recorded for that step on that
node. A step the recording lacks (or asks once more than recorded) makes that node INCOMPLETE:
the runbook changed in a way the recorded incident cannot answer. Otherwise each node either
ends at the same conclusion as when it was recorded, or CHANGED.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from runbook.format.model import Runbook
from runbook.library.runbooks import Library
from runbook.run.recording import Recording, expected_outcome, json_ready, write_recording
from runbook.run.redact import Redactor
from runbook.run.walk import NodeOutcome, Walk, WalkOptions
from runbook.transports import Node, ProbeAnswer

SAME, CHANGED, INCOMPLETE = "same", "changed", "incomplete"


class RecordedTransport:
    """Answers each step check from a recording, in the order the answers were recorded."""

    def __init__(self, recording: Recording) -> None:
        self.results = {n.name: n.results for n in recording.nodes}
        self.asked: dict[tuple[str, str], int] = {}
        self.missing: dict[str, str] = {}  # node -> the step the recording lacks
        self.changed_with: dict[str, list[str]] = {}  # node -> steps whose parameters changed
        self._lock = threading.Lock()
        self._redactor = Redactor()  # recorded `with` values were redacted: compare like with like

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        step = str(request.get("step"))
        answers = self.results.get(node.name, {}).get(step, [])
        with self._lock:
            n = self.asked.get((node.name, step), 0)
            self.asked[(node.name, step)] = n + 1
            if n >= len(answers) or answers[n].get("check") not in (None, request.get("check")):
                self.missing.setdefault(node.name, step)
                return ProbeAnswer("error", error=f"the recording has no answer for step {step!r}")
            if self._redactor.data(json_ready(request.get("with") or {})) != answers[n].get("with", {}):
                self.changed_with.setdefault(node.name, []).append(step)
        recorded = answers[n]
        if recorded["status"] != "ok":
            return ProbeAnswer(recorded["status"], error=recorded.get("error"),
                               duration_s=float(recorded.get("duration_s") or 0))
        return ProbeAnswer("ok", dict(recorded.get("result") or {}),
                           duration_s=float(recorded.get("duration_s") or 0))

    def close(self) -> None:
        pass


@dataclass
class NodeVerdict:
    node: str
    kind: str  # same | changed | incomplete
    was: str  # the recorded conclusion (`rid:id` when another runbook's) or status
    now: str
    path: list[str]
    missing: str | None = None  # the step the recording lacks (incomplete)
    changed_with: list[str] = field(default_factory=list)  # steps asked with other parameters


@dataclass
class Replay:
    recording: Recording
    runbook: Runbook  # today's version, which the replay walked
    outcomes: list[NodeOutcome]
    verdicts: list[NodeVerdict]

    @property
    def ok(self) -> bool:
        return all(v.kind == SAME for v in self.verdicts)


def replay(library: Library, recording: Recording) -> Replay:
    """Walk the recording's runbook again (KeyError when it is not in `library`)."""
    runbook = library.get(recording.runbook_id)
    if runbook is None:
        raise KeyError(recording.runbook_id)
    transport = RecordedTransport(recording)
    nodes = [Node(n.name, "replay", dict(n.vars)) for n in recording.nodes]
    outcomes = Walk(library, runbook, nodes, transport, recording.params,
                    WalkOptions(forks=8, deadline_s=60)).run()
    by_name = {o.node.name: o for o in outcomes}
    verdicts = [_verdict(recording.runbook_id, n.name, n.expected, by_name[n.name], transport)
                for n in recording.nodes]
    return Replay(recording, runbook, outcomes, verdicts)


def state(root: str, status: str, conclusion: dict[str, Any] | None) -> str:
    """A node's end: its conclusion (`rid:id` when not the root runbook's), else its status."""
    if not conclusion:
        return status
    owner = conclusion.get("runbook") or root
    return conclusion["id"] if owner == root else f"{owner}:{conclusion['id']}"


def _verdict(root: str, node: str, expected: dict[str, Any], outcome: NodeOutcome,
             transport: RecordedTransport) -> NodeVerdict:
    now_expected = expected_outcome(outcome)
    was = state(root, str(expected.get("status")), expected.get("conclusion"))
    now = state(root, now_expected["status"], now_expected["conclusion"])
    missing = transport.missing.get(node)
    kind = INCOMPLETE if missing else SAME if was == now else CHANGED
    return NodeVerdict(node, kind, was, now, list(outcome.path), missing,
                       transport.changed_with.get(node, []))


def accept(result: Replay, now: datetime | None = None) -> list[str]:
    """Make the recording expect what the replay found; returns the nodes that could not be
    accepted (INCOMPLETE: the recording cannot answer the runbook any more)."""
    refused = [v.node for v in result.verdicts if v.kind == INCOMPLETE]
    if refused:
        return refused
    recording, by_name = result.recording, {o.node.name: o for o in result.outcomes}
    for node in recording.doc["nodes"]:
        node.update(expected_outcome(by_name[node["node"]], Redactor()))
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    # Which runbook the expectations now come from; `runbook` still names the recorded one.
    recording.doc["accepted"] = {"at": stamp, "version": result.runbook.version,
                                 "digest": result.runbook.digest}
    write_recording(recording.path.parent, recording.doc)
    return []
