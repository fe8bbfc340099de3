"""`run --format md|html|junit`: the report contract's other renderings, from a real walk."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from runbook.library.runbooks import load_library
from runbook.report import get_reporter
from runbook.report.build import build_report
from runbook.run.walk import Walk
from runbook.testing.runner import ReplayTransport
from runbook.transports import Node

TREE = """apiVersion: runbook/v1
id: t
version: 1.2.0
title: {en: Stuck job, zh: 作业卡住}
summary: {en: S, zh: 摘要}
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
    title: {en: "The log <b>stopped</b>", zh: 日志停了}
    explanation: {en: "Nothing written for a while: <script>alert(1)</script>", zh: 很久没写}
    fixes:
      - title: {en: Look at the log, zh: 查看日志}
        run: "tail -n 5 /x"
        effect: read-only
"""
RESULTS = {"n1": {"age": {"age_s": 5}}, "n2": {"age": {"age_s": 5}}, "n3": {"age": {"age_s": 900}},
           "n4": {"age": {"_answer": "unreachable", "_error": "connection refused"}}}


@pytest.fixture
def report(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "t.yaml").write_text(TREE)
    library = load_library([tmp_path])
    assert not library.problems, [str(p) for p in library.problems]
    runbook = library.get("t")
    outcomes = Walk(library, runbook, [Node(n) for n in RESULTS], ReplayTransport(RESULTS), {}).run()
    return build_report(runbook, outcomes, "2026-11-22T03:00:00Z", 1.5, "en", {"log": "/x"})


def test_markdown_groups_nodes_problems_first_with_path_values_and_commands(report: dict[str, Any]) -> None:
    text = get_reporter("md", lang="en").render(report)
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections == ["## ⚠️ The log <b>stopped</b>: `n3`", "## 🛑 unreachable: `n4`",
                        "## ✅ Fine: `n[1-2]`", "## Summary"]
    assert "1. `age` (log, 0.00s) → `stalled`: when `result.age_s > 60` · `result.age_s=900`" in text
    assert "   ```sh\n   tail -n 5 /x\n   ```" in text
    assert "Reason: step age: connection refused" in text
    assert text.rstrip().endswith("exit 1: a problem was found")


def test_markdown_in_chinese(report: dict[str, Any], tmp_path: Path) -> None:
    text = get_reporter("md", lang="zh").render(report)
    assert "**诊断路径**" in text and "| 节点 | 结论 | 严重程度 |" in text


def test_html_is_one_page_with_every_text_escaped(report: dict[str, Any]) -> None:
    page = get_reporter("html", lang="en").render(report)
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>" not in page and "&lt;b&gt;stopped&lt;/b&gt;" in page
    assert "<table>" in page and "<code>n[1-2]</code>" in page


def test_junit_has_a_case_per_node_a_failure_per_problem_an_error_per_undiagnosed(
        report: dict[str, Any]) -> None:
    suite = ET.fromstring(get_reporter("junit").render(report).split("\n", 1)[1])
    assert (suite.tag, suite.get("tests"), suite.get("failures"), suite.get("errors")) == (
        "testsuite", "4", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == set(RESULTS)
    failure = cases["n3"].find("failure")
    assert failure is not None and failure.get("type") == "stalled"
    assert "perf.straggler" in (failure.text or "")
    error = cases["n4"].find("error")
    assert error is not None and (error.get("type"), error.get("message")) == (
        "unreachable", "step age: connection refused")
    assert cases["n1"].find("failure") is None and cases["n1"].find("error") is None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["param.log"] == "/x" and props["digest"].startswith("sha256:")


def test_a_report_of_many_nodes_is_grouped_with_counts_and_samples(tmp_path: Path) -> None:
    """Past 64 nodes the summary lists each conclusion once with its count and some nodes, and
    every format stays short; the JSON keeps every node and adds summary.conclusions."""
    (tmp_path / "t.yaml").write_text(TREE)
    library = load_library([tmp_path])
    runbook = library.get("t")
    results = {f"gpu{i:05d}": {"age": {"age_s": 900 if i % 100 == 7 else 5}} for i in range(3000)}
    results["oddname,x"] = {"age": {"_answer": "unreachable", "_error": "connection refused"}}
    outcomes = Walk(library, runbook, [Node(n) for n in results], ReplayTransport(results), {}).run()
    report = build_report(runbook, outcomes, "2026-11-22T03:00:00Z", 1.5, "en", {})
    assert len(report["nodes"]) == 3001
    groups = report["summary"]["conclusions"]
    assert [(g["id"], g["severity"], g["count"]) for g in groups] == [
        ("stalled", "warning", 30), ("unreachable", "unreachable", 1), ("fine", "ok", 2970)]
    assert groups[0]["sample"] == [f"gpu{i:05d}" for i in range(7, 800, 100)]
    text = get_reporter("text", lang="en").render(report)
    assert len(text.splitlines()) < 60, text
    assert "fine                              ok        2970" in text
    assert "(+2962 more)" in text  # 2,970 names folded would not fit one line: 8 shown
    markdown = get_reporter("md", lang="zh").render(report)
    assert len(markdown.splitlines()) < 80 and "| 结论 | 严重程度 | 数量 | 例如 |" in markdown
