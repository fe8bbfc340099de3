"""`runbook run ... --record DIR`: keep every check's raw answer so the incident becomes a test.

`RecordingTransport` wraps the transport a walk uses and keeps, per node and in order, each
step check's request and its `ProbeAnswer` (a step visited twice keeps both). Fixes and their
verify checks go through the unwrapped transport, so they are never part of a recording.
`build_recording` turns that into the `runbook-recording/v1` document written to
DIR/incident.json, with secrets in params and results hidden by `Redactor.data`:

    {"schema": "runbook-recording/v1",
     "runbook": {"id": "training-hang", "version": "1.3.0", "digest": "sha256:..."},
     "engine": {"version": "0.1.0"}, "recorded_at": "2026-11-22T03:00:00Z",
     "params": {"log": "/var/log/train.log"},
     "nodes": [{"node": "gpu001", "vars": {}, "status": "concluded", "reason": null,
                "path": ["find-process", "read-log"],
                "conclusion": {"id": "dataloader-accumulating", "runbook": "training-hang"},
                "results": {"find-process": [{"check": "process", "with": {...}, "status": "ok",
                                              "result": {...}, "error": null, "duration_s": 0.04}]}}]}

The format's JSON Schema ships as schema/recording.v1.json. `results` is keyed by
qualified step (`rid:step` for another runbook's step, as in test files). `status`,
`reason`, `path` and `conclusion` are what a replay expects.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runbook import __version__
from runbook.format import safeyaml
from runbook.format.model import Runbook
from runbook.run.redact import Redactor
from runbook.run.walk import NodeOutcome
from runbook.transports import Node, ProbeAnswer, Transport

SCHEMA = "runbook-recording/v1"
FILE = "incident.json"
ANSWER_STATUSES = ("ok", "unreachable", "error", "timeout")
FIX_STEP_PREFIX = "fix:"  # verify checks are sent as step `fix:verify`


class RecordingError(ValueError):
    """A recording that cannot be read or written; `str()` is the one-line message."""


@dataclass
class RecordedAnswer:
    request: dict[str, Any]
    answer: ProbeAnswer


class RecordingTransport:
    """Passes every check to `inner` and keeps each step check's request and answer per node."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.answers: dict[str, list[RecordedAnswer]] = {}
        self._lock = threading.Lock()  # checks of many nodes answer from many threads

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        answer = self.inner.run_check(node, request, timeout)
        step = request.get("step")
        if isinstance(step, str) and not step.startswith(FIX_STEP_PREFIX):
            with self._lock:
                self.answers.setdefault(node.name, []).append(RecordedAnswer(dict(request), answer))
        return answer

    def clear(self) -> None:
        """Forget what was recorded (`--watch` keeps only its last round)."""
        with self._lock:
            self.answers = {}

    def close(self) -> None:
        self.inner.close()


def build_recording(runbook: Runbook, outcomes: list[NodeOutcome],
                    answers: dict[str, list[RecordedAnswer]], params: dict[str, Any],
                    recorded_at: str, redactor: Redactor | None = None) -> dict[str, Any]:
    """The `runbook-recording/v1` document of one walk, secrets hidden (the values of secret-named
    parameters too, wherever a check's parameters or results repeat them)."""
    redactor = redactor or Redactor.for_params(params)
    nodes = []
    for outcome in outcomes:
        results: dict[str, list[dict[str, Any]]] = {}
        for recorded in answers.get(outcome.node.name, []):
            step = str(recorded.request["step"])
            results.setdefault(step, []).append(_answer_entry(recorded, redactor))
        nodes.append({"node": outcome.node.name, "vars": redactor.data(json_ready(outcome.node.vars)),
                      **expected_outcome(outcome, redactor), "results": results})
    return {"schema": SCHEMA,
            "runbook": {"id": runbook.id, "version": runbook.version, "digest": runbook.digest},
            "engine": {"version": __version__}, "recorded_at": recorded_at,
            "params": redactor.data(json_ready(params)), "nodes": nodes}


def expected_outcome(outcome: NodeOutcome, redactor: Redactor | None = None) -> dict[str, Any]:
    """What a replay of this node should end at: status, reason, path, conclusion."""
    reason = outcome.reason
    if reason is not None and redactor is not None:
        reason = redactor.text(reason)
    conclusion = None
    if outcome.conclusion is not None:
        owner = outcome.conclusion_runbook.id if outcome.conclusion_runbook else None
        conclusion = {"id": outcome.conclusion.id, "runbook": owner}
    return {"status": outcome.status, "reason": reason, "path": list(outcome.path),
            "conclusion": conclusion}


def _answer_entry(recorded: RecordedAnswer, redactor: Redactor) -> dict[str, Any]:
    check = str(recorded.request.get("check", ""))
    answer = recorded.answer
    return {"check": check, "with": redactor.data(json_ready(recorded.request.get("with") or {})),
            "status": answer.status,
            "result": None if answer.result is None else _redact_result(redactor, check, answer.result),
            "error": None if answer.error is None else redactor.text(answer.error),
            "duration_s": round(answer.duration_s, 3)}


def _redact_result(redactor: Redactor, check: str, result: dict[str, Any]) -> dict[str, Any]:
    """A field the check itself declares (`state_dict_key`) is not a secret by its name; its
    value is still searched for secrets. Every other field is judged by its name too."""
    from runbook.checks import CHECK_TYPES, load_check

    declared = set(getattr(load_check(check), "RESULT_FIELDS", {})) if check in CHECK_TYPES else set()
    plain = json_ready(result)
    return {k: redactor.data(v) if k in declared else redactor.data(v, str(k))
            for k, v in plain.items()}


def json_ready(value: Any) -> Any:
    """JSON-ready data (tuples become lists, odd objects their text), as the file will hold."""
    return json.loads(json.dumps(value, default=str))


# -- the directory --

def prepare_dir(directory: Path) -> None:
    """Create DIR; refuse an existing non-empty one unless it already holds a recording."""
    if directory.exists() and not directory.is_dir():
        raise RecordingError(f"{directory}: --record: not a directory (name a new or empty one)")
    if directory.is_dir() and any(directory.iterdir()):
        target = directory / FILE
        if not target.is_file() or _schema_of(target) != SCHEMA:
            raise RecordingError(f"{directory}: --record: the directory is not empty and holds no "
                                 "recording (name a new or empty directory)")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecordingError(f"{directory}: --record: cannot create it: {exc.strerror}") from None


def _schema_of(path: Path) -> Any:
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return doc.get("schema") if isinstance(doc, dict) else None


def write_recording(directory: Path, doc: dict[str, Any]) -> Path:
    """Write DIR/incident.json whole or not at all (an interrupted write leaves the old one)."""
    target = directory / FILE
    tmp = target.with_name(f".{FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target


# -- reading --

@dataclass
class RecordedNode:
    name: str
    vars: dict[str, Any]
    expected: dict[str, Any]  # status, reason, path, conclusion
    results: dict[str, list[dict[str, Any]]]


@dataclass
class Recording:
    path: Path  # the incident.json file
    doc: dict[str, Any]
    nodes: list[RecordedNode] = field(default_factory=list)

    @property
    def runbook_id(self) -> str:
        return str(self.doc["runbook"]["id"])

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.doc.get("params") or {})

    @property
    def name(self) -> str:
        return self.path.parent.name


def recording_file(path: Path) -> Path:
    """DIR or DIR/incident.json -> the file."""
    return path / FILE if path.is_dir() or path.suffix != ".json" else path


def load_recording(path: Path) -> Recording:
    """Read and check a recording; RecordingError says where it is wrong and what to do."""
    file = recording_file(path)
    try:
        doc = json.loads(safeyaml.read_text(file, safeyaml.RECORDING_MAX_BYTES)[0])
    except FileNotFoundError:
        raise RecordingError(f"{file}: no recording here (make one with "
                             "`runbook run ID --record DIR`)") from None
    except safeyaml.LimitError as exc:
        raise RecordingError(f"{file}:{exc.line}: {exc.message}") from None
    except RecursionError:
        raise RecordingError(f"{file}: nested too deeply to be a recording") from None
    except (OSError, ValueError) as exc:
        raise RecordingError(f"{file}: cannot read the recording: {exc}") from None
    problem = _problem(doc)
    if problem:
        raise RecordingError(f"{file}: {problem}")
    nodes = [RecordedNode(str(n["node"]), dict(n.get("vars") or {}),
                          {k: n.get(k) for k in ("status", "reason", "path", "conclusion")},
                          n["results"]) for n in doc["nodes"]]
    return Recording(file, doc, nodes)


def _problem(doc: Any) -> str | None:
    """The first thing wrong with a recording document, as `where: what (what to do)`."""
    again = "(record the incident again with `runbook run ID --record DIR`)"
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return f"schema: expected {SCHEMA!r} {again}"
    if not isinstance(doc.get("runbook"), dict) or not isinstance(doc["runbook"].get("id"), str):
        return f"runbook.id: missing {again}"
    if not isinstance(doc.get("params", {}), dict):
        return f"params: expected a mapping {again}"
    if not isinstance(doc.get("nodes"), list) or not doc["nodes"]:
        return f"nodes: expected a list of at least one node {again}"
    for i, node in enumerate(doc["nodes"]):
        where = f"nodes[{i}]"
        if not isinstance(node, dict) or not isinstance(node.get("node"), str):
            return f"{where}.node: missing {again}"
        if not isinstance(node.get("results"), dict):
            return f"{where}.results: expected a mapping of step -> answers {again}"
        for step, answers in node["results"].items():
            if not isinstance(answers, list) or not answers:
                return f"{where}.results.{step}: expected a list of answers {again}"
            for j, answer in enumerate(answers):
                status = answer.get("status") if isinstance(answer, dict) else None
                if status not in ANSWER_STATUSES:
                    return (f"{where}.results.{step}[{j}].status: {status!r} is not one of "
                            f"{', '.join(ANSWER_STATUSES)} {again}")
    return None
