"""`--format jsonl`: the report as JSON Lines (schema: schema/report-lines.v1.json), written as
nodes finish.

One `header` line when the walk starts, one `node` line per node the moment it finishes (its
`entry` is the object a `runbook-report/v1` document holds in `nodes[]`; out to the reader
within FLUSH_EVERY_S, and at once whenever the walk waits for answers), one `fixes` line per
node whose fixes were planned or run (they act after the walk), and the `summary` line last. A
run cut short by Ctrl-C still ends with its summary line (`incomplete: true`).

Memory stays flat with the node count: once a node's line is written, its raw evidence is
dropped from the walk's outcome (`slim`), keeping only what the fixes and the summary read.

A node's line costs little when thousands of nodes answered alike: the walk shares one result
object and one `decided_by` per distinct answer, so each step's evidence, the conclusion, the
job findings and the node's status, path and finding are redacted and written as JSON once per
distinct content (`_Texts`) and reused by every node with the same; only the node's name, its
durations and a `decided_by` that holds the node's own values are written per node.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from runbook.report.silent import SilentReporter
from runbook.run.walk import from_node

SCHEMA = "runbook-report-lines/v1"
TEXTS_CAP = 4096  # distinct evidence steps and conclusions kept as written text
# Node lines are flushed at most this often while nodes finish, and always when the walk waits:
# a reader (tail -f, a pipe) sees each node within this time, and 100,000 nodes are not 100,000
# system calls.
FLUSH_EVERY_S = 0.2
WRITE_BUFFER = 1 << 20


def dumps(line: dict[str, Any]) -> str:
    return json.dumps(line, ensure_ascii=False, default=str, separators=(",", ":")) + "\n"


class JsonLinesReporter(SilentReporter):
    """A listener that writes each node's report entry as soon as the node finishes."""

    streams = True  # cli/run writes nothing itself: this reporter owns the output

    def __init__(self, lang: str = "en", **_: Any) -> None:
        self.lang = lang
        self.output: str | None = None
        self.slim = True  # False when something after the walk (a --record) still reads evidence
        self._out: TextIO | None = None
        self._redactor: Any = None
        self._texts: _Texts | None = None
        # `decided_by` apart: where a condition reads the node, each node has its own, and those
        # must not push the shared evidence texts out.
        self._decided: _Texts | None = None
        self.written = 0
        self._flushed = 0.0  # when the lines were last flushed (time.monotonic)

    def stream_to(self, output: str | None, slim: bool = True) -> None:
        """Where the lines go (a file, or stdout when None); opened only when the walk starts,
        so a bad argument leaves no half-written file."""
        self.output, self.slim = output, slim

    def start(self, runbook: Any, params: dict[str, Any], started_at: str) -> None:
        from runbook.report.build import SCHEMA as REPORT_SCHEMA
        from runbook.run.redact import Redactor

        self._redactor = Redactor.for_params(params)
        self._texts, self._decided = _Texts(self._redactor), _Texts(self._redactor)
        # A large buffer: a node's line is kilobytes, and lines go out when flushed (FLUSH_EVERY_S).
        self._out = (open(self.output, "w", encoding="utf-8", buffering=WRITE_BUFFER)  # noqa: SIM115
                     if self.output else sys.stdout)
        self._write({"type": "header", "schema": SCHEMA, "report_schema": REPORT_SCHEMA,
                     "runbook": {"id": runbook.id, "version": runbook.version, "digest": runbook.digest,
                                 "title": runbook.title.get(self.lang)},
                     "started_at": started_at, "lang": self.lang, "params": params})

    def on_node_done(self, outcome: Any) -> None:
        if self._out is None or self._texts is None or self._decided is None:  # not started
            return
        text = self._entry_text(outcome, self._texts, self._decided)
        self._out.write(f'{{"type":"node","entry":{text}}}\n')
        now = time.monotonic()
        if now - self._flushed >= FLUSH_EVERY_S:
            self._out.flush()
            self._flushed = now
        self.written += 1
        if self.slim:
            forget_evidence(outcome)

    def on_idle(self) -> None:
        """The walk waits for answers or has ended: every line written so far is out."""
        if self._out is not None:
            self._out.flush()
            self._flushed = time.monotonic()

    def render(self, report: dict[str, Any]) -> str:
        """Finish the stream: the fixes' results, then the summary line. Returns "" (all written)."""
        for node in report["nodes"]:
            fixes = (node.get("conclusion") or {}).get("fixes") or []
            results = {str(i): fix["result"] for i, fix in enumerate(fixes) if "result" in fix}
            if results:
                self._write({"type": "fixes", "node": node["node"], "results": results})
        self._write({"type": "summary", "duration_s": report["duration_s"], "summary": report["summary"]})
        self.close()
        return ""

    def close(self) -> None:
        if self._out is not None and self._out is not sys.stdout:
            self._out.close()
            print(f"runbook: report written to {self.output}", file=sys.stderr)
        self._out = None

    def _entry_text(self, outcome: Any, texts: _Texts, decided_texts: _Texts) -> str:
        """The node's entry as JSON text (redacted): what `dumps(redactor.data(node_entry(...)))`
        gives, each part taken from the texts of earlier nodes with the same and built (as
        report/build.py builds it) only when no earlier node had it."""
        from runbook.report.build import conclusion_entry, evidence_item, finding_text, job_findings

        lang = self.lang
        # The node's name, then its status, path, finding and reason: the same on many nodes.
        name = outcome.node.name
        name_text = dumps(self._redactor.data(name, "node"))[:-1]
        pieces = ['{"node":', name_text]
        finding, reason = finding_text(outcome, lang), outcome.reason

        def own() -> dict[str, Any]:
            fields = {"status": outcome.status, "path": list(outcome.path)}
            fields.update({"finding": finding} if finding is not None else {})
            return {**fields, **({"reason": reason} if reason else {})}

        key: Any = ("own", outcome.status, tuple(outcome.path), finding, reason or None)
        pieces.append("," + texts.get(key, None, own)[1:-1])
        # the same for every node with the same history (`jobs`); none is written as no field
        findings = texts.get(("job_findings", id(outcome.jobs)), outcome.jobs,
                             lambda: job_findings(outcome, lang))
        if findings != "[]":
            pieces.append(',"job_findings":' + findings)
        if outcome.conclusion is None:
            pieces.append(',"conclusion":null')
        else:
            key = ("conclusion", id(outcome.conclusion), tuple(outcome.fix_commands or ()))
            pieces.append(',"conclusion":' + texts.get(key, outcome.conclusion,
                                                        lambda: conclusion_entry(outcome, lang)))
        steps = []
        for evidence in outcome.evidence:
            # `decided_by` apart: where a condition reads the node, it holds this node's own values.
            key = (evidence.step, evidence.check, id(evidence.result), evidence.goto, evidence.when,
                   tuple(evidence.notes))
            text = texts.get(key, evidence.result, lambda e=evidence: {
                k: v for k, v in evidence_item(e).items() if k not in ("duration_s", "decided_by")})
            decided = self._decided_text(evidence.decided_by, decided_texts, (name, name_text))
            duration = evidence.duration_s  # a rounded float: JSON writes it as repr does
            duration = (repr(duration) if type(duration) is float and math.isfinite(duration)
                        else json.dumps(duration))
            steps.append(f'{{"duration_s":{duration},"decided_by":{decided},{text[1:]}')
        pieces.append(',"evidence":[' + ",".join(steps) + "]}")
        return "".join(pieces)

    def _decided_text(self, decided_by: dict[str, Any], texts: _Texts, name: tuple[str, str]) -> str:
        """`decided_by` as JSON text: one text per dict shared by nodes that decided alike; a dict
        of a node's own (its conditions read the node) is written item by item, each value that
        is not the node's own (a path from `node`) taken from its text for earlier nodes, and the
        node's name (`name`: it and its text) as written at the head of its entry."""
        known = texts.known.get(id(decided_by))
        if known is not None:
            return known[1]
        parts = []
        own = False  # a dict with the node's own values is this node's: not kept for others
        for path, value in decided_by.items():
            if path == "node.name" and value == name[0]:
                parts.append('"node.name":' + name[1])
                own = True
            elif from_node(path):  # the node's own values: one text each
                parts.append(dumps(self._redactor.data({path: value}))[1:-2])
                own = True
            else:
                key = ("item", path, value if type(value) is str else id(value))
                parts.append(texts.get(key, value, lambda p=path, v=value: {p: v})[1:-1])
        text = "{" + ",".join(parts) + "}"
        if not own:
            texts.put(id(decided_by), decided_by, text)
        return text

    def _write(self, line: dict[str, Any]) -> None:
        assert self._out is not None
        self._out.write(dumps(self._redactor.data(line)))
        self._out.flush()  # a reader (tail -f, a pipe) sees each node as it finishes


class _Texts:
    """Redacted JSON texts by a key naming their content; each key holds the objects whose
    identities it names (`keep`), so no id in a key can belong to another object meanwhile."""

    def __init__(self, redactor: Any) -> None:
        self.redactor = redactor
        self.known: dict[Any, tuple[Any, str]] = {}

    def get(self, key: Any, keep: Any, make: Callable[[], Any]) -> str:
        """The text of `make()`'s value, made only for the first key of its kind."""
        known = self.known.get(key)
        if known is not None:
            return known[1]
        text = dumps(self.redactor.data(make()))[:-1]
        self.put(key, keep, text)
        return text

    def put(self, key: Any, keep: Any, text: str) -> None:
        if len(self.known) >= TEXTS_CAP:
            self.known.clear()  # the next distinct contents start afresh
        self.known[key] = (keep, text)


def forget_evidence(outcome: Any) -> None:
    """Drop what only the node's own report entry needed, now that it is written: the checks'
    raw results and the per-step job parts. The fixes read the conclusion and its rendered
    commands; the summary reads status and conclusion; both are kept."""
    from runbook.run.walk import NO_HISTORY

    outcome.evidence = []
    outcome.seen = {}
    outcome.jobs = {}
    outcome.job = {}
    outcome.lineage = NO_HISTORY


def read_lines(path: Path | str) -> dict[str, Any]:
    """A JSON Lines report read back as the `runbook-report/v1` document it stands for (nodes in
    the order they finished, each with its fixes' results). Raises ValueError naming the line."""
    header: dict[str, Any] | None = None
    nodes: dict[str, dict[str, Any]] = {}
    summary: dict[str, Any] | None = None
    with open(path, encoding="utf-8") as lines:
        for number, text in enumerate(lines, 1):
            try:
                line = json.loads(text)
                kind = line["type"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a report line ({exc})") from None
            if kind == "header":
                header = line
            elif kind == "node":
                nodes[line["entry"]["node"]] = line["entry"]
            elif kind == "fixes":
                for i, result in line["results"].items():
                    nodes[line["node"]]["conclusion"]["fixes"][int(i)]["result"] = result
            elif kind == "summary":
                summary = line
    if header is None or summary is None:
        raise ValueError(f"{path}: no {'header' if header is None else 'summary'} line: the run did "
                         "not finish writing it")
    return {"schema": header["report_schema"], "runbook": header["runbook"],
            "started_at": header["started_at"], "duration_s": summary["duration_s"],
            "lang": header["lang"], "params": header["params"], "nodes": list(nodes.values()),
            "summary": summary["summary"]}
