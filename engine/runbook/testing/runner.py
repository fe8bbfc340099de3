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

A case may instead replay a recorded incident (`runbook run ... --record DIR`):

      - name: the loader incident of March
        recording: recordings/loader-march     # relative to the test file
        expect: {conclusion: dataloader-accumulating}   # default: what was recorded

and every recording under a `recordings/` directory beside the runbook files is replayed as a
case `(recording NAME)` expecting its recorded outcome, unless a test file already names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runbook.format import safeyaml
from runbook.library.runbooks import TEST_SUFFIX, Library
from runbook.run.recording import FILE as RECORDING_FILE
from runbook.run.recording import Recording, RecordingError, load_recording, recording_file
from runbook.run.replay import replay
from runbook.run.walk import CONCLUDED, NodeOutcome, Walk, WalkOptions
from runbook.testing.coverage import Reached, reached_by
from runbook.transports import Node, ProbeAnswer

SINGLE_NODE = "node"
RECORDINGS_DIR = "recordings"


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
    reach: Reached = field(default_factory=Reached)  # steps, branches, conclusions walked through
    runbook: str = ""  # the runbook the case walks (its test file's, or its recording's)
    recording: Path | None = None  # the incident.json a case replays (resolved)

    @property
    def ok(self) -> bool:
        return not self.failures


def tests_file_for(runbook_path: str) -> Path:
    path = Path(runbook_path)
    return path.with_name(path.name[: -len(".yaml")] + TEST_SUFFIX)


def run_test_file(path: Path, library: Library) -> tuple[str | None, list[CaseResult]]:
    """Run every case of one test file; returns (runbook id, results)."""
    try:
        doc = safeyaml.load(safeyaml.read_text(path)[0]) or {}
    except (OSError, yaml.YAMLError) as exc:  # LimitError among them
        return None, [CaseResult(str(path), "(file)", [f"cannot read test file: {exc}"])]
    rid = doc.get("runbook")
    loaded = library.by_id.get(rid) if isinstance(rid, str) else None
    if loaded is None or loaded.runbook is None:
        return rid, [CaseResult(str(path), "(file)", [f"runbook {rid!r} is not loaded"])]
    rid = loaded.runbook.id
    cases = doc.get("cases") or []
    if not cases:
        return rid, [CaseResult(str(path), "(file)", ["no test cases"], runbook=rid)]
    return rid, [_run_case(path, library, rid, i, case) for i, case in enumerate(cases)]


def find_recordings(library: Library) -> list[Path]:
    """incident.json files under a `recordings/` directory beside the library's runbook files."""
    dirs = sorted({Path(r.path).parent / RECORDINGS_DIR for r in library.by_id.values()})
    return [f for d in dirs if d.is_dir() for f in sorted(d.glob(f"*/{RECORDING_FILE}"))]


def run_recording(file: Path, library: Library) -> CaseResult | None:
    """Replay one recording found beside the runbooks, expecting what it recorded; None when
    its runbook is not among those under test."""
    name = f"(recording {file.parent.name})"
    try:
        recording = load_recording(file)
    except RecordingError as exc:
        return CaseResult(str(file), name, [str(exc)])
    if library.get(recording.runbook_id) is None:
        return None
    return _replay_case(str(file), name, library, recording, None)


def _recording_path(test_file: Path, relative: str) -> Path:
    return test_file.parent / relative


def _run_case(path: Path, library: Library, rid: str, index: int,
              case: dict[str, Any]) -> CaseResult:
    name = str(case.get("name") or f"case {index + 1}")
    if case.get("recording"):
        return _recording_case(path, library, rid, name, case)
    result = CaseResult(str(path), name, runbook=rid)
    by_node = case.get("nodes") or {SINGLE_NODE: case.get("results") or {}}
    runbook = library.get(rid)
    assert runbook is not None
    nodes = [Node(n, "replay", dict(case.get("node_vars", {}).get(n, {}))) for n in by_node]
    walk = Walk(library, runbook, nodes, ReplayTransport(by_node), case.get("params") or {},
                WalkOptions(forks=8, deadline_s=30), entry=case.get("entry"))
    outcomes = {o.node.name: o for o in walk.run()}
    expect = case.get("expect") or {}
    expectations = ({SINGLE_NODE: expect} if "nodes" not in case else expect)
    result.failures.extend(_check_expectations(outcomes, expectations))
    result.reach = reached_by(rid, outcomes.values())
    return result


def _recording_case(path: Path, library: Library, rid: str, name: str,
                    case: dict[str, Any]) -> CaseResult:
    file = recording_file(_recording_path(path, str(case["recording"]))).resolve()
    try:
        recording = load_recording(file)
    except RecordingError as exc:
        return CaseResult(str(path), name, [str(exc)], runbook=rid, recording=file)
    if library.get(recording.runbook_id) is None:
        return CaseResult(str(path), name, [f"the recording is of runbook "
                                            f"{recording.runbook_id!r}, which is not loaded"],
                          runbook=rid, recording=file)
    result = _replay_case(str(path), name, library, recording, case.get("expect"))
    result.recording = file
    return result


def _replay_case(file: str, name: str, library: Library, recording: Recording,
                 expect: dict[str, Any] | None) -> CaseResult:
    """Replay a recording; compare with `expect` (one node: its expectation; several: node ->
    expectation), or by default with the recorded status and conclusion of every node."""
    done = replay(library, recording)
    result = CaseResult(file, name, runbook=recording.runbook_id)
    outcomes = {o.node.name: o for o in done.outcomes}
    incomplete = {v.node: v.missing for v in done.verdicts if v.missing}
    result.failures.extend(f"{node}: the runbook now asks step {step}, which the recording lacks"
                           for node, step in incomplete.items())
    if expect is None:
        expectations = {n.name: _recorded_expectation(n.expected) for n in recording.nodes}
    elif len(recording.nodes) == 1:
        expectations = {recording.nodes[0].name: expect}
    else:
        expectations = dict(expect)
    expectations = {n: e for n, e in expectations.items() if n not in incomplete}
    result.failures.extend(_check_expectations(outcomes, expectations, always_name=True))
    result.reach = reached_by(recording.runbook_id, done.outcomes)
    return result


def _recorded_expectation(expected: dict[str, Any]) -> dict[str, Any]:
    wanted: dict[str, Any] = {"status": expected.get("status")}
    if expected.get("conclusion"):
        wanted["conclusion"] = expected["conclusion"]["id"]
    return wanted


def _check_expectations(outcomes: dict[str, NodeOutcome], expectations: dict[str, Any],
                        always_name: bool = False) -> list[str]:
    failures: list[str] = []
    for node_name, wanted in expectations.items():
        outcome = outcomes.get(node_name)
        if outcome is None:
            failures.append(f"expect names node {node_name!r}, which the case lacks")
            continue
        failures.extend(_compare(node_name, outcome, wanted or {}, always_name))
    return failures


def _compare(node: str, outcome: NodeOutcome, wanted: dict[str, Any],
             always_name: bool = False) -> list[str]:
    got_conclusion = outcome.conclusion.id if outcome.conclusion else None
    where = "" if node == SINGLE_NODE and not always_name else f"{node}: "
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
    finding = outcome.finding.get("en", "")
    for words in wanted.get("finding_contains") or []:  # the facts the finding must name
        if words not in finding:
            failures.append(f"{where}finding {finding!r} lacks {words!r}")
    for words in wanted.get("finding_excludes") or []:  # what it must not claim
        if words in finding:
            failures.append(f"{where}finding {finding!r} says {words!r}")
    return failures
