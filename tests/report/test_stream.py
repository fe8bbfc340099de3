"""`run --format jsonl`: the report streamed as JSON Lines, the same content as the v1 document."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from runbook.library.runbooks import load_library
from runbook.report.build import build_report
from runbook.report.stream import JsonLinesReporter, read_lines
from runbook.run.walk import Walk
from runbook.testing.runner import ReplayTransport
from runbook.transports import Node

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "hf_" + "Q" * 34  # a Hugging Face token's shape, passed as a secret-named parameter
TREE = """apiVersion: runbook/v1
id: t
version: 1.0.0
title: {en: Stuck job, zh: 作业卡住}
summary: {en: S, zh: 摘要}
params:
  hf_token: {type: string, default: "", help: {en: A token, zh: 令牌}}
start: age
steps:
  age:
    title: {en: Age, zh: 时间}
    check: {type: log, with: {path: /x}}
    branches:
      - when: result.age_s > 60
        goto: stalled
    default: fine
conclusions:
  fine: {severity: ok, taxonomy: [], title: {en: Fine, zh: 正常}, explanation: {en: Ok, zh: 好}}
  stalled:
    severity: warning
    taxonomy: [perf.straggler]
    title: {en: The log stopped, zh: 日志停了}
    explanation: {en: Nothing written for a while, zh: 很久没写}
    fixes:
      - title: {en: Look at the log, zh: 查看日志}
        run: "tail -n 5 /x"
        effect: read-only
"""
RESULTS = {"n1": {"age": {"age_s": 5}}, "n2": {"age": {"age_s": 900, "last": f"login with {TOKEN}"}},
           "n3": {"age": {"age_s": 900}},
           "n4": {"age": {"_answer": "unreachable", "_error": "connection refused"}}}
SLOW = """apiVersion: runbook/v1
id: slow
version: 1.0.0
title: {en: Slow, zh: 慢}
summary: {en: A check that takes long, zh: 一个很慢的检查}
start: wait
steps:
  wait:
    title: {en: Wait, zh: 等待}
    check: {type: command, with: {run: "touch MARKER; sleep 30"}, timeout: 40s}
    default: done
conclusions:
  done: {severity: ok, taxonomy: [], title: {en: Done, zh: 完成}, explanation: {en: D, zh: 完}}
"""


def line_validator() -> Draft202012Validator:
    schemas = resources.files("runbook").joinpath("schema")
    registry: Registry = Registry()
    for name in ("report.v1.json", "report-lines.v1.json"):
        doc = json.loads(schemas.joinpath(name).read_text())
        registry = registry.with_resource(doc["$id"], Resource.from_contents(doc))
    lines = json.loads(schemas.joinpath("report-lines.v1.json").read_text())
    return Draft202012Validator(lines, registry=registry)


def walk(tmp_path: Path, listeners: list[Any]) -> tuple[Any, Any, list[Any]]:
    (tmp_path / "t.yaml").write_text(TREE)
    library = load_library([tmp_path])
    assert not library.problems, [str(p) for p in library.problems]
    runbook = library.get("t")
    outcomes = Walk(library, runbook, [Node(n) for n in RESULTS], ReplayTransport(RESULTS),
                    {"hf_token": TOKEN}, listeners=listeners).run()
    return library, runbook, outcomes


@pytest.fixture
def streamed(tmp_path: Path) -> tuple[Path, dict[str, Any], list[Any]]:
    """The same walk twice on canned answers: once streamed (evidence dropped as lines are
    written), once kept whole for the v1 document."""
    params = {"hf_token": TOKEN}
    lines = tmp_path / "report.jsonl"
    reporter = JsonLinesReporter(lang="en")
    reporter.stream_to(str(lines))
    _, runbook, _ = walk(tmp_path, [])
    reporter.start(runbook, params, "2026-11-22T03:00:00Z")
    _, _, slimmed = walk(tmp_path, [reporter])
    reporter.render(build_report(runbook, slimmed, "2026-11-22T03:00:00Z", 1.5, "en", params))
    _, _, whole = walk(tmp_path, [])
    document = build_report(runbook, whole, "2026-11-22T03:00:00Z", 1.5, "en", params)
    return lines, document, slimmed


def test_every_line_parses_and_follows_its_schema(streamed: tuple[Path, dict[str, Any], list[Any]]) -> None:
    lines, _, _ = streamed
    parsed = [json.loads(text) for text in lines.read_text("utf-8").splitlines()]
    validator = line_validator()
    for line in parsed:
        validator.validate(line)
    kinds = [line["type"] for line in parsed]
    assert kinds[0] == "header" and kinds[-1] == "summary"
    assert kinds.count("node") == len(RESULTS)


def test_the_lines_hold_the_v1_documents_nodes_and_summary(
        streamed: tuple[Path, dict[str, Any], list[Any]]) -> None:
    lines, document, _ = streamed
    again = read_lines(lines)
    Draft202012Validator(json.loads(resources.files("runbook").joinpath(
        "schema/report.v1.json").read_text())).validate(again)
    by_name = lambda nodes: sorted(nodes, key=lambda n: n["node"])  # noqa: E731
    assert by_name(again["nodes"]) == by_name(document["nodes"])  # in finishing order when streamed
    assert again["summary"] == document["summary"]
    assert {k: v for k, v in again.items() if k not in ("nodes", "summary")} == {
        k: v for k, v in document.items() if k not in ("nodes", "summary")}


def test_secrets_are_redacted_in_every_line(streamed: tuple[Path, dict[str, Any], list[Any]]) -> None:
    lines, _, _ = streamed
    text = lines.read_text("utf-8")
    assert TOKEN not in text
    assert '"hf_token":"' in text  # the parameter is named, its value hidden


def test_a_written_node_keeps_only_what_the_fixes_and_summary_read(
        streamed: tuple[Path, dict[str, Any], list[Any]]) -> None:
    _, _, slimmed = streamed
    assert all(o.evidence == [] and o.seen == {} for o in slimmed)
    stalled = next(o for o in slimmed if o.node.name == "n3")
    assert stalled.conclusion.id == "stalled" and stalled.fix_commands == ["tail -n 5 /x"]


def test_run_jsonl_streams_and_an_interrupted_run_ends_with_an_incomplete_summary(tmp_path: Path) -> None:
    marker = tmp_path / "running"
    (tmp_path / "slow.yaml").write_text(SLOW.replace("MARKER", str(marker)))
    out = tmp_path / "report.jsonl"
    env = {**os.environ, "RUNBOOK_PATH": str(tmp_path), "RUNBOOK_LANG": "en"}
    command = [sys.executable, "-m", "runbook", "run", "slow", "--format", "jsonl", "-o", str(out)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT)
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # until the check's command runs
    assert marker.exists(), proc.communicate(timeout=30) if proc.poll() is not None else "not started"
    assert json.loads(out.read_text("utf-8").splitlines()[0])["type"] == "header"  # written at the start
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err
    parsed = [json.loads(text) for text in out.read_text("utf-8").splitlines()]
    for line in parsed:
        line_validator().validate(line)
    assert [line["type"] for line in parsed] == ["header", "node", "summary"]
    node = parsed[1]["entry"]
    assert (node["status"], node["reason"]) == ("timeout", "step wait: interrupted")
    assert parsed[-1]["summary"]["incomplete"] is True
    assert parsed[-1]["summary"]["reason"] == "interrupted (Ctrl-C)"


def test_jsonl_with_watch_is_refused_with_one_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "runbook", "run", "training-hang", "--format", "jsonl",
                          "--watch"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "RUNBOOK_LANG": "en"}, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().startswith("runbook: --format jsonl streams one walk")


class _Expected:
    """A listener ahead of the streamed report: each node's line as the plain way writes it (the
    whole entry redacted, then JSON), before the report drops the node's evidence."""

    def __init__(self, params: dict[str, Any]) -> None:
        from runbook.run.redact import Redactor

        self.redactor = Redactor.for_params(params)
        self.lines: dict[str, Any] = {}

    def on_step(self, outcome: Any, evidence: Any) -> None:
        pass

    def on_node_done(self, outcome: Any) -> None:
        from runbook.report.build import node_entry

        entry = node_entry(outcome, "en")
        self.lines[outcome.node.name] = json.loads(json.dumps(self.redactor.data(entry), default=str))


def test_lines_written_from_shared_texts_equal_each_entry_written_alone(tmp_path: Path) -> None:
    """Nodes that answer alike share their evidence's and conclusion's written text: each line
    still says exactly what its own entry says, secrets redacted, on the shipped training-hang
    walked by nodes answering in several ways (tests/run/test_walk_memo.py's variants)."""
    from tests.run.test_walk_memo import _variant

    results = {f"n{i:03d}": _variant(i) for i in range(60)}
    results["n007"]["read-log"]["last"] = f"login with {TOKEN}"
    library = load_library()
    runbook = library.get("training-hang")
    params = {"log": "/var/log/train.log", "hf_token": TOKEN}
    expected = _Expected(params)
    streamed = JsonLinesReporter(lang="en")
    out = tmp_path / "lines.jsonl"
    streamed.stream_to(str(out))
    streamed.start(runbook, params, "2026-01-01T00:00:00Z")
    Walk(library, runbook, [Node(name) for name in results], ReplayTransport(results), params,
         listeners=[expected, streamed]).run()
    streamed.close()
    written = {line["entry"]["node"]: line["entry"] for line in map(json.loads, out.read_text().splitlines())
               if line["type"] == "node"}
    assert written == expected.lines
    assert TOKEN not in out.read_text()
    assert len({e["conclusion"]["id"] for e in written.values() if e["conclusion"]}) > 2


class _Waiting:
    """A transport whose answers each wait for the test: the walk is idle in between."""

    def __init__(self, results: dict[str, dict[str, Any]], before_answer: Any) -> None:
        self.replay, self.before_answer = ReplayTransport(results), before_answer

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> Any:
        self.before_answer(node.name)
        return self.replay.run_check(node, request, timeout)

    def close(self) -> None:
        pass


def test_a_nodes_line_is_out_while_the_walk_waits_for_other_nodes(tmp_path: Path) -> None:
    """Lines are buffered while nodes finish (not a system call per node), and every line
    written is out the moment the walk waits for answers: a reader of a run that waits on a
    hung node already sees the nodes that finished."""
    out = tmp_path / "lines.jsonl"
    again = ("  again:\n    title: {en: Again, zh: 再看}\n    check: {type: log, with: {path: /y}}\n"
             "    default: fine\nconclusions:")
    tree = TREE.replace("default: fine", "default: again").replace("conclusions:", again)
    (tmp_path / "t.yaml").write_text(tree)
    library = load_library([tmp_path])
    assert not library.problems, [str(p) for p in library.problems]
    runbook = library.get("t")
    reporter = JsonLinesReporter(lang="en")
    reporter.stream_to(str(out))
    reporter.start(runbook, {}, "2026-11-22T03:00:00Z")
    seen_while_waiting: list[list[str]] = []

    def before_answer(node: str) -> None:
        if node == "n1":  # n1 is on its second step: n2 and n3 concluded at the first
            seen_while_waiting.append([json.loads(line).get("entry", {}).get("node")
                                       for line in out.read_text().splitlines()])

    results = {"n1": {"age": {"age_s": 5}}, "n2": {"age": {"age_s": 900}}, "n3": {"age": {"age_s": 901}}}
    Walk(library, runbook, [Node(n) for n in results], _Waiting(results, before_answer), {},
         listeners=[reporter]).run()
    reporter.close()
    assert seen_while_waiting[-1][1:] == ["n2", "n3"]


def test_live_progress_shows_where_each_node_goes(tmp_path: Path) -> None:
    """The text report's live lines (on stderr while the walk runs) name each step's goto: the
    walk sets it before telling its listeners."""
    import io

    from runbook.report.text import TextReporter

    progress = io.StringIO()
    walk(tmp_path, [TextReporter(progress=progress)])
    lines = progress.getvalue().splitlines()
    assert any(line.startswith("  n2") and "age (log" in line and line.endswith("→ stalled")
               for line in lines)
    assert any(line.startswith("  n1") and line.endswith("→ fine") for line in lines)


def test_nodes_alike_share_one_conclusion_entry_unless_their_fixes_ran(tmp_path: Path) -> None:
    """build_report writes one conclusion entry for the nodes that reached the same conclusion
    with the same commands; a node whose fixes ran keeps its own, with their results."""
    _, runbook, outcomes = walk(tmp_path, [])
    results = {("n3", 0): {"status": "ok", "exit_code": 0}}
    report = build_report(runbook, outcomes, "2026-11-22T03:00:00Z", 1.0, "en", {}, results)
    by_node = {n["node"]: n for n in report["nodes"]}
    assert by_node["n2"]["conclusion"]["id"] == by_node["n3"]["conclusion"]["id"] == "stalled"
    assert by_node["n3"]["conclusion"]["fixes"][0]["result"] == {"status": "ok", "exit_code": 0}
    assert "result" not in by_node["n2"]["conclusion"]["fixes"][0]
    library = load_library([tmp_path])
    alike = {"n3": RESULTS["n3"], "n5": RESULTS["n3"]}  # the same answers: the same commands
    twins = Walk(library, runbook, [Node(n) for n in alike], ReplayTransport(alike), {}).run()
    same = {n["node"]: n["conclusion"] for n in build_report(runbook, twins, "x", 1.0, "en", {})["nodes"]}
    assert same["n3"]["id"] == "stalled" and same["n3"] is same["n5"]
