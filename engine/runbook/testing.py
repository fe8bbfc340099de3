"""`runbook test`: replay canned check results through a runbook's tree, no cluster needed.

A test file `<id>.tests.yaml` sits beside `<id>.yaml`:

    runbook: training-hang
    cases:
      - name: loader still tokenising
        params: {log: /tmp/train.log}
        results:                          # one node; or `nodes: {n1: {step: result}}`
          find-process: {found: true, cpu_percent: 99.5}
          read-log: {exists: true, age_s: 2}
        expect: {conclusion: dataloader-accumulating, path: [find-process, read-log]}

A step of another runbook is keyed `other-runbook:step`. A result `{_answer: unreachable}`
or `{_answer: error, _error: "..."}` stands for a node that could not be reached or
whose check failed. With several nodes, `expect` maps node -> expectation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runbook.library import TEST_SUFFIX, Library
from runbook.transports import Node, ProbeAnswer
from runbook.walk import CONCLUDED, NodeOutcome, Walk, WalkOptions

SINGLE_NODE = "node"


class ReplayTransport:
    """Answers each check from canned results keyed by node and (qualified) step."""

    def __init__(self, results: dict[str, dict[str, Any]]) -> None:
        self.results = results

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        step = request["step"]
        canned = self.results.get(node.name, {}).get(step)
        if canned is None:
            return ProbeAnswer("error", error=f"no canned result for step {step!r}")
        answer = canned.get("_answer", "ok")
        if answer != "ok":
            return ProbeAnswer(answer, error=str(canned.get("_error", answer)))
        return ProbeAnswer("ok", {"timed_out": False, **canned})

    def close(self) -> None:
        pass


@dataclass
class CaseResult:
    file: str
    name: str
    failures: list[str] = field(default_factory=list)
    reached: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.failures


def tests_file_for(runbook_path: str) -> Path:
    path = Path(runbook_path)
    return path.with_name(path.name[: -len(".yaml")] + TEST_SUFFIX)


def run_test_file(path: Path, library: Library) -> tuple[str | None, list[CaseResult]]:
    """Run every case of one test file; returns (runbook id, results)."""
    try:
        doc = yaml.safe_load(path.read_text("utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        return None, [CaseResult(str(path), "(file)", [f"cannot read test file: {exc}"])]
    rid = doc.get("runbook")
    loaded = library.by_id.get(rid) if isinstance(rid, str) else None
    if loaded is None or loaded.runbook is None:
        return rid, [CaseResult(str(path), "(file)", [f"runbook {rid!r} is not loaded"])]
    cases = doc.get("cases") or []
    if not cases:
        return rid, [CaseResult(str(path), "(file)", ["no test cases"])]
    return rid, [_run_case(path, library, rid, i, case) for i, case in enumerate(cases)]


def _run_case(path: Path, library: Library, rid: str, index: int,
              case: dict[str, Any]) -> CaseResult:
    name = str(case.get("name") or f"case {index + 1}")
    result = CaseResult(str(path), name)
    by_node = case.get("nodes") or {SINGLE_NODE: case.get("results") or {}}
    runbook = library.get(rid)
    assert runbook is not None
    nodes = [Node(n, "replay", dict(case.get("node_vars", {}).get(n, {}))) for n in by_node]
    walk = Walk(library, runbook, nodes, ReplayTransport(by_node), case.get("params") or {},
                WalkOptions(forks=8, deadline_s=30), entry=case.get("entry"))
    outcomes = {o.node.name: o for o in walk.run()}
    expect = case.get("expect") or {}
    expectations = ({SINGLE_NODE: expect} if "nodes" not in case else expect)
    for node_name, wanted in expectations.items():
        outcome = outcomes.get(node_name)
        if outcome is None:
            result.failures.append(f"expect names node {node_name!r}, which the case lacks")
            continue
        result.failures.extend(_compare(node_name, outcome, wanted))
    for outcome in outcomes.values():
        if outcome.conclusion and outcome.conclusion_runbook:
            result.reached.add(f"{outcome.conclusion_runbook.id}:{outcome.conclusion.id}")
    return result


def _compare(node: str, outcome: NodeOutcome, wanted: dict[str, Any]) -> list[str]:
    got_conclusion = outcome.conclusion.id if outcome.conclusion else None
    where = "" if node == SINGLE_NODE else f"{node}: "
    failures = []
    status = wanted.get("status", CONCLUDED)
    if outcome.status != status:
        failures.append(f"{where}status {outcome.status!r}, expected {status!r}"
                        f"{f' ({outcome.reason})' if outcome.reason else ''}")
    if "conclusion" in wanted and got_conclusion != wanted["conclusion"]:
        failures.append(f"{where}conclusion {got_conclusion!r}, expected "
                        f"{wanted['conclusion']!r} (path: {' → '.join(outcome.path)})")
    if "path" in wanted and outcome.path != list(wanted["path"]):
        failures.append(f"{where}path {outcome.path}, expected {list(wanted['path'])}")
    if "taxonomy" in wanted:
        got = outcome.conclusion.taxonomy if outcome.conclusion else []
        if sorted(got) != sorted(wanted["taxonomy"]):
            failures.append(f"{where}taxonomy {got}, expected {wanted['taxonomy']}")
    return failures
