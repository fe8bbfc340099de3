"""The walk: level-synchronous rounds, per-node failure, timeouts, loops, cross-node views."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from runbook.format.loader import load_text
from runbook.library.runbooks import load_library
from runbook.run.walk import CONCLUDED, ERROR, TIMEOUT, UNREACHABLE, Walk, WalkOptions
from runbook.testing.runner import ReplayTransport
from runbook.transports import Node, ProbeAnswer

TREE = """apiVersion: runbook/v1
id: t
version: 1.0.0
title: {en: T, zh: T 测试}
summary: {en: S, zh: S 摘要}
params:
  limit: {type: number, default: 60, help: {en: Limit, zh: 限制}}
start: age
steps:
  age:
    title: {en: Age, zh: 时间}
    check: {type: log, with: {path: /x}}
    branches:
      - when: >-
          result.age_s > params.limit
          and result.age_s > 10 * (cluster | field('age_s') | median)
        goto: straggler
      - when: result.again
        goto: age
    default: fine
conclusions:
  fine: {severity: ok, taxonomy: [], title: {en: Fine, zh: 正常}, explanation: {en: Ok, zh: 好}}
  straggler:
    severity: warning
    taxonomy: [perf.straggler]
    title: {en: Straggler, zh: 掉队}
    explanation: {en: Behind its peers, zh: 落后于其他节点}
"""


def library_with(tmp_path: Path, text: str = TREE):
    (tmp_path / "t.yaml").write_text(text)
    library = load_library([tmp_path])
    assert not library.problems, [str(p) for p in library.problems]
    return library


def walk(library: Any, results: dict[str, Any], **options: Any) -> dict[str, Any]:
    runbook = library.get("t")
    nodes = [Node(name) for name in results]
    outcomes = Walk(library, runbook, nodes, ReplayTransport(results), {},
                    WalkOptions(**options)).run()
    return {o.node.name: o for o in outcomes}


def test_cluster_view_names_the_straggler(tmp_path: Path) -> None:
    results = {f"n{i}": {"age": {"age_s": 5 + i}} for i in range(7)}
    results["n7"] = {"age": {"age_s": 2400}}
    outcomes = walk(library_with(tmp_path), results)
    assert outcomes["n7"].conclusion.id == "straggler"
    assert {o.conclusion.id for n, o in outcomes.items() if n != "n7"} == {"fine"}
    assert outcomes["n7"].evidence[0].decided_by == {
        "result.age_s": 2400, "params.limit": 60, "cluster | field('age_s') | median": 8.5}


def test_one_node_failing_never_loses_the_others(tmp_path: Path) -> None:
    results: dict[str, Any] = {"good": {"age": {"age_s": 1}},
                               "gone": {"age": {"_answer": "unreachable", "_error": "refused"}},
                               "broken": {"age": {"_answer": "error", "_error": "probe crashed"}},
                               "hung": {"age": {"timed_out": True}}}
    outcomes = walk(library_with(tmp_path), results)
    assert outcomes["good"].status == CONCLUDED
    assert (outcomes["gone"].status, outcomes["gone"].reason) == (UNREACHABLE, "step age: refused")
    assert outcomes["broken"].status == ERROR
    assert outcomes["hung"].status == TIMEOUT  # a hang never falls through to the default


def test_a_loop_in_the_tree_cannot_run_forever(tmp_path: Path) -> None:
    outcomes = walk(library_with(tmp_path), {"n": {"age": {"age_s": 1, "again": True}}},
                    max_steps=10)
    assert outcomes["n"].status == ERROR
    assert "10 steps" in outcomes["n"].reason


class SlowTransport:
    """Answers after a delay; for the deadline test."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        time.sleep(self.delay if node.name == "slow" else 0)
        return ProbeAnswer("ok", {"age_s": 1, "timed_out": False})

    def close(self) -> None:
        pass


def test_the_run_deadline_times_out_slow_nodes_only(tmp_path: Path) -> None:
    library = library_with(tmp_path)
    start = time.monotonic()
    outcomes = Walk(library, library.get("t"), [Node("fast"), Node("slow")], SlowTransport(3),
                    {}, WalkOptions(deadline_s=0.5)).run()
    assert time.monotonic() - start < 1.5
    by_name = {o.node.name: o for o in outcomes}
    assert by_name["fast"].status == CONCLUDED
    assert by_name["slow"].status == TIMEOUT


def test_goto_into_another_runbook(tmp_path: Path) -> None:
    other = TREE.replace("id: t\n", "id: other\n")
    (tmp_path / "other.yaml").write_text(other)
    text = TREE.replace("        goto: age\n    default: fine",
                        "        goto: fine\n    default: other:start")
    library = library_with(tmp_path, text)
    outcomes = walk(library, {"n": {"age": {"age_s": 1}, "other:age": {"age_s": 1}}})
    assert outcomes["n"].path == ["age", "other:age"]
    assert outcomes["n"].conclusion_runbook.id == "other"


def test_a_goto_to_a_missing_runbook_is_a_lint_error(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        TREE.replace("        goto: age\n    default: fine", "        goto: fine\n    default: nope:start"))
    library = load_library([tmp_path])
    assert [p.message for p in library.problems] == ["no runbook named 'nope'"]
    assert load_text(TREE, "x.yaml").ok


def test_a_signature_into_a_missing_runbook_step_is_a_lint_error(tmp_path: Path) -> None:
    (tmp_path / "other.yaml").write_text(TREE.replace("id: t\n", "id: other\n"))
    signatures = ("signatures:\n  - {pattern: 'Watchdog', goto: 'other:agee'}\n"
                  "  - {pattern: 'boom', goto: 'gone:start'}\nstart: age\n")
    (tmp_path / "t.yaml").write_text(TREE.replace("start: age\n", signatures))
    library = load_library([tmp_path])
    errors = [p for p in library.problems if p.severity == "error"]
    assert sorted(p.message for p in errors) == [
        "no runbook named 'gone'",
        "runbook 'other' has no step or conclusion named 'agee'"]
    assert all(p.path[0] == "signatures" and p.line > 1 for p in errors)


def test_ctrl_c_keeps_what_came_back_before_it(tmp_path: Path) -> None:
    import signal
    import threading

    release = threading.Event()

    class HalfAnswering:
        def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
            if node.name == "slow":
                release.wait(30)
                return ProbeAnswer("error", error="never asked for")
            main = threading.main_thread().ident
            threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT)).start()
            return ProbeAnswer("ok", {"age_s": 5})

        def close(self) -> None:
            release.set()

    library = library_with(tmp_path)
    nodes = [Node("fast"), Node("slow")]
    walk = Walk(library, library.get("t"), nodes, HalfAnswering(), {}, WalkOptions())
    # Python's own Ctrl-C, whatever an earlier test in this process (Ray's init) installed.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            walk.run()
    finally:
        release.set()
        signal.signal(signal.SIGINT, previous)
    by_name = {o.node.name: o for o in walk.outcomes}
    assert by_name["fast"].status == CONCLUDED and by_name["fast"].path == ["age"]
    assert (by_name["slow"].status, by_name["slow"].reason) == (TIMEOUT, "step age: interrupted")


PRECEDENCE = """apiVersion: runbook/v1
id: t
version: 1.0.0
title: {en: T, zh: T 测试}
summary: {en: S, zh: S 摘要}
start: ranks
steps:
  ranks:
    title: {en: Ranks, zh: rank}
    check: {type: process}
    analysis: rank-map
    default: moving
  moving:
    title: {en: Log, zh: 日志}
    check: {type: log, with: {path: /x, stall_after: 60}}
    branches:
      - when: steps.ranks.job.verdict == 'missing-ranks'
        goto: waiting
      - when: result.progressing
        goto: fine
    default: stalled
conclusions:
  fine: {severity: ok, taxonomy: [], title: {en: Fine, zh: 正常}, explanation: {en: Ok, zh: 好}}
  stalled:
    severity: warning
    taxonomy: [hang.collective]
    generic: true
    title: {en: Stalled, zh: 停止}
    explanation: {en: Stopped, zh: 停止了}
  waiting:
    severity: critical
    basis: job
    taxonomy: [launch.rendezvous]
    title: {en: Waiting for missing ranks, zh: 在等待缺失的 rank}
    explanation: {en: Peers missing, zh: 缺少 rank}
"""


def test_evidence_before_inference_a_moving_node_is_never_said_to_wait(tmp_path: Path) -> None:
    """Rank 2 of 3 is missing (a job-level inference); n1's log moves, n2's has stopped. n1 ends
    at its own evidence, with the job's verdict kept beside it; n2 may be said to wait."""
    library = library_with(tmp_path, PRECEDENCE)
    proc = lambda rank: {"processes": [{"rank": rank, "world_size": 3}]}  # noqa: E731
    results = {"n1": {"ranks": proc(0), "moving": {"exists": True, "age_s": 2, "progressing": True}},
               "n2": {"ranks": proc(1), "moving": {"exists": True, "age_s": 900, "progressing": False}},
               "n3": {"ranks": {"processes": []}}}
    results["n3"]["moving"] = {"exists": False, "progressing": None}
    out = walk(library, results)
    assert out["n1"].conclusion.id == "fine"
    assert any("skipped, this node's own evidence shows it progressing" in note
               for note in out["n1"].evidence[-1].notes)
    assert out["n1"].jobs["ranks"]["verdict"] == "missing-ranks"
    assert out["n2"].conclusion.id == "waiting"
    assert library.get("t").conclusions["stalled"].generic is True
    assert library.get("t").conclusions["waiting"].basis == "job"


def test_a_node_report_keeps_the_job_finding_beside_its_own_conclusion(tmp_path: Path) -> None:
    from runbook.report.build import node_entry

    library = library_with(tmp_path, PRECEDENCE)
    results = {"n1": {"ranks": {"processes": [{"rank": 0, "world_size": 2}]},
                      "moving": {"exists": True, "age_s": 1, "progressing": True}},
               "n2": {"ranks": {"processes": []},
                      "moving": {"exists": True, "age_s": 1, "progressing": True}}}
    out = walk(library, results)
    entry = node_entry(out["n1"], "en")
    assert entry["conclusion"]["id"] == "fine" and entry["conclusion"]["basis"] == "node"
    [finding] = entry["job_findings"]
    assert finding["verdict"] == "missing-ranks" and finding["finding"].startswith("rank 1 of 2 missing")
