"""Job-level analyses end to end: stack-groups, rank-map and drift as pure functions, and what a
walk does with them (each node's `job`, the conclusion's finding, the job verdict in every report
format, exit code 1 when the job has a problem although each node alone looks fine)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

from runbook import jobs
from runbook.library.runbooks import load_library
from runbook.report.build import build_report
from runbook.report.junit import JunitReporter
from runbook.report.markdown import MarkdownReporter
from runbook.report.text import TextReporter
from runbook.run.walk import Walk
from runbook.testing.runner import ReplayTransport
from runbook.transports import Node

ROOT = Path(__file__).resolve().parents[2]


def _stack(rank: int, pid: int, wait: str, op: str | None, frame: str) -> dict[str, Any]:
    entry = {"pid": pid, "wait": wait, "op": op, "user_frame": frame}
    return {"available": True, "ranks": {str(rank): entry}}


def test_stack_groups_names_the_rank_out_of_step_with_host_pid_and_frame() -> None:
    results = {f"gpu0{r + 1}": _stack(r, 3500 + r, "collective", "all_reduce", "/job/train.py:41 step")
               for r in (0, 1, 3)}
    results["gpu07"] = _stack(2, 3519, "running", None, "/job/train.py:88 save_shard")
    job = jobs.run_analysis("stack-groups", results)
    assert job["verdict"] == "odd-ranks" and job["problem"] and job["ranks"] == [2]
    assert job["finding"]["en"] == ("rank 2 (gpu07, pid 3519) is in `save_shard` (train.py:88) while "
                                    "ranks 0, 1, 3 wait in `all_reduce`")
    assert "rank 2（gpu07，pid 3519）" in job["finding"]["zh"]
    assert job["nodes"]["gpu07"]["suspect"] and not job["nodes"]["gpu01"]["suspect"]


def test_stack_groups_calls_a_two_against_two_split_a_tie() -> None:
    results = {"a": _stack(0, 1, "collective", "all_reduce", "/t.py:1 f"),
               "b": _stack(1, 2, "collective", "all_reduce", "/t.py:1 f"),
               "c": _stack(2, 3, "collective", "barrier", "/t.py:9 g"),
               "d": _stack(3, 4, "collective", "barrier", "/t.py:9 g")}
    job = jobs.run_analysis("stack-groups", results)
    assert job["verdict"] == "tie" and job["finding"]["en"].startswith("a tie, no majority to trust")


def test_stack_groups_reads_a_polling_loop_sampled_on_two_lines_as_one_place() -> None:
    """Ranks polling `while not work.is_completed(): time.sleep()` are caught on either line;
    a rank blocked in a call on another line of the same function is still out of step."""
    polling = {f"n{r}": _stack(r, r, "idle" if r % 2 else "running", None,
                               f"/job/train.py:{37 + r % 2} wait_for") for r in range(4)}
    job = jobs.run_analysis("stack-groups", polling)
    assert job["verdict"] == "in-step" and job["ranks"] == [0, 1, 2, 3]
    elsewhere = {**polling, "n3": _stack(3, 3, "running", None, "/job/other.py:37 wait_for")}
    assert jobs.run_analysis("stack-groups", elsewhere)["ranks"] == [3]
    blocked = {f"n{r}": _stack(r, r, "collective", "all_reduce", "/job/train.py:41 step") for r in range(3)}
    blocked["n3"] = _stack(3, 3, "collective", "all_reduce", "/job/train.py:52 step")
    assert jobs.run_analysis("stack-groups", blocked)["ranks"] == [3]


def test_one_rank_in_the_rendezvous_is_said_from_its_node_alone() -> None:
    stack = _stack(0, 4242, "running", None, "/job/train.py:12 main")
    stack["ranks"]["0"].update(world_size=2, master="10.0.0.1:29500")
    stack["processes"] = [{"pid": 4242, "threads": [{"name": "MainThread", "frames": [
        "torch/distributed/distributed_c10d.py:1500 init_process_group", "/job/train.py:12 main"]}]}]
    job = jobs.run_analysis("stack-groups", {"gpu01": stack})
    assert job["verdict"] == "rendezvous" and job["problem"]
    assert job["world_size"] == 2 and job["found"] == [0] and job["master"] == "10.0.0.1:29500"
    assert job["finding"]["en"] == ("rank 0 waits in the rendezvous (init_process_group at train.py:12) for "
                                    "WORLD_SIZE=2 ranks; ranks found: 0; rank 1 never joined "
                                    "(store 10.0.0.1:29500)")
    assert "rank 1 没有加入" in job["finding"]["zh"]


def test_a_lone_rank_elsewhere_says_how_it_waits() -> None:
    job = jobs.run_analysis("stack-groups", {"gpu01": _stack(3, 77, "cuda-sync", "synchronize",
                                                              "/job/train.py:40 step")})
    assert job["verdict"] == "one-rank" and job["wait"] == "cuda-sync" and not job["problem"]
    assert job["finding"]["en"] == "rank 3 (gpu01, pid 77) is waiting on a CUDA synchronize (train.py:40)"
    collective = jobs.run_analysis("stack-groups", {"n": _stack(0, 5, "collective", "all_reduce",
                                                                "/job/train.py:41 step")})
    assert collective["wait"] == "collective" and collective["op"] == "all_reduce"
    assert jobs.run_analysis("stack-groups", {"n": {"ranks": {}}})["verdict"] == "no-stacks"


def test_rank_map_missing_partial_and_complete() -> None:
    proc = lambda rank: {"processes": [{"rank": rank, "world_size": 4}]}  # noqa: E731
    missing = jobs.run_analysis("rank-map", {"n1": proc(0), "n2": proc(1), "n3": {"processes": []},
                                             "n4": proc(3)})
    assert missing["verdict"] == "missing-ranks" and missing["ranks"] == [2] and missing["hosts"] == ["n3"]
    assert missing["finding"]["en"].startswith("rank 2 of 4 missing")
    assert "n3 runs no rank" in missing["finding"]["en"]
    partial = jobs.run_analysis("rank-map", {"n1": proc(0)})  # one node of a four-node job asked about
    assert partial["verdict"] == "partial" and not partial["problem"]
    complete = jobs.run_analysis("rank-map", {f"n{r}": proc(r) for r in range(4)})
    assert complete["verdict"] == "complete" and not complete["problem"]
    unanswered = jobs.run_analysis("rank-map", {"n1": proc(0), "n2": proc(1), "n3": None, "n4": proc(3)})
    assert unanswered["taxonomy"] == ["hardware.host"] and "n3 did not answer" in unanswered["finding"]["en"]


def test_a_finding_names_sixteen_hosts_and_counts_the_rest() -> None:
    # 1,000 nodes of a 1,000-rank job, 40 of them idle and 10 unanswered: the sentence stays short,
    # the lists stay whole (a finding is copied onto every node it concerns).
    rank = lambda r: {"processes": [{"rank": r, "world_size": 1000}]}  # noqa: E731
    results: dict[str, Any] = {f"n{i:04d}": rank(i) for i in range(950)}
    results.update({f"n{i:04d}": {"processes": []} for i in range(950, 990)})
    results.update({f"n{i:04d}": None for i in range(990, 1000)})
    out = jobs.run_analysis("rank-map", results)
    assert len(out["hosts"]) == 50 and out["ranks"] == list(range(950, 1000))
    assert "n0965 and 24 more run no rank" in out["finding"]["en"]
    assert "n0999 did not answer" in out["finding"]["en"] and "等另外" not in out["finding"]["en"]
    assert "等另外 24 个 上没有 rank" in out["finding"]["zh"]
    complete = jobs.run_analysis("rank-map", {f"n{r:04d}": rank(r) for r in range(1000)})["finding"]["en"]
    assert complete.endswith("n0015: 15 and 984 more)") and len(complete) < 400


def test_drift_names_the_setting_and_the_node_that_differs() -> None:
    results = {n: {"settings": {"NCCL_SOCKET_IFNAME": "ib0", "NCCL_IB_DISABLE": "0"}, "pid": i}
               for i, n in enumerate(("n1", "n2", "n3"))}
    results["n2"]["settings"]["NCCL_SOCKET_IFNAME"] = "eth9"
    job = jobs.run_analysis("drift", results, {"fields": ["settings."]})
    assert job["verdict"] == "differs" and job["hosts"] == ["n2"]
    assert job["finding"]["en"] == "settings.NCCL_SOCKET_IFNAME is ib0 on most nodes but n2: eth9"
    assert job["nodes"]["n2"]["differs"] == {"settings.NCCL_SOCKET_IFNAME": "eth9"}
    same = jobs.run_analysis("drift", {"n1": results["n1"], "n3": results["n3"]}, {"fields": ["settings."]})
    assert same["verdict"] == "same" and not same["problem"]


def test_analyses_of_shared_answers_equal_those_of_copies() -> None:
    """The walk gives nodes that answered alike one result object; the analyses read each distinct
    object once and may give such nodes one part. What they find is what copies give."""
    import copy

    healthy = {"settings": {"NCCL_SOCKET_IFNAME": "ib0"}, "processes": [{"rank": 0, "world_size": 8}]}
    odd = {"settings": {"NCCL_SOCKET_IFNAME": "eth9"}, "processes": []}
    shared = {f"n{i}": (odd if i == 5 else healthy) for i in range(8)}
    shared["n7"] = None
    copies = {node: copy.deepcopy(result) for node, result in shared.items()}
    for kind, params in (("drift", {"fields": ["settings."]}), ("rank-map", {})):
        assert jobs.run_analysis(kind, shared, params) == jobs.run_analysis(kind, copies, params), kind
    drift = jobs.run_analysis("drift", shared, {"fields": ["settings."]})
    assert drift["hosts"] == ["n5"] and drift["nodes"]["n5"]["differs"]


def test_an_analysis_that_raises_loses_no_node(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    library = load_library([ROOT / "runbooks"])
    cases = yaml.safe_load((ROOT / "runbooks" / "training-hang.tests.yaml").read_text("utf-8"))["cases"]
    case = next(c for c in cases if c["name"].startswith("rank 2 is in save_shard"))
    monkeypatch.setitem(jobs.ANALYSES, "stack-groups", lambda results, params: 1 / 0)
    outcomes, walk = _walk(library, case)
    # Every node walked on past the step (to flight-records, which this case has no answer for).
    assert all("stack-dump" in o.path and "flight-records" in (o.reason or "") for o in outcomes)
    failed = next(v.result for v in walk.job_verdicts if v.result["analysis"] == "stack-groups")
    assert failed["verdict"] == "failed" and "ZeroDivisionError" in failed["finding"]["en"]


def _walk(library, case: dict[str, Any]):  # type: ignore[no-untyped-def]
    results = {node: dict(steps.items())
               for node, steps in case["nodes"].items()}
    walk = Walk(library, library.get("training-hang"), [Node(n, "local") for n in case["nodes"]],
                ReplayTransport(results), case.get("params") or {})
    return walk.run(), walk


def test_the_job_verdict_comes_first_in_every_report_and_the_run_exits_1() -> None:
    library = load_library([ROOT / "runbooks"])
    cases = yaml.safe_load((ROOT / "runbooks" / "training-hang.tests.yaml").read_text("utf-8"))["cases"]
    case = next(c for c in cases if c["name"].startswith("rank 2 is in save_shard"))
    outcomes, walk = _walk(library, case)
    report = build_report(library.get("training-hang"), outcomes, "2026-11-26T10:00:00Z", 1.0, "en", {},
                          job_verdicts=walk.job_verdicts)
    assert report["summary"]["exit_code"] == 1
    stack_job = next(j for j in report["summary"]["job"] if j["analysis"] == "stack-groups")
    assert stack_job["verdict"] == "odd-ranks" and stack_job["suspects"] == ["node3"]
    node3 = next(n for n in report["nodes"] if n["node"] == "node3")
    assert node3["finding"].startswith("rank 2 (node3, pid 12) is in `save_shard` (train.py:88)")
    text = TextReporter(lang="en").render(report)
    assert text.splitlines()[0].startswith("✖ JOB: rank 2 (node3, pid 12) is in `save_shard`")
    assert "  ▸ rank 2 (node3" in text
    markdown = MarkdownReporter(lang="en").render(report)
    assert markdown.startswith("> **✖ JOB: rank 2 (node3")
    suite = ET.fromstring(JunitReporter(lang="en").render(report))
    first = suite.find("testcase")
    assert first is not None and first.get("name", "") == "job: stack-dump"
    chinese = TextReporter(lang="zh").render(build_report(library.get("training-hang"), outcomes,
                                                     "2026-11-26T10:00:00Z", 1.0, "zh", {},
                                                     job_verdicts=walk.job_verdicts))
    assert chinese.splitlines()[0].startswith("✖ 作业: rank 2（node3，pid 12）")
    json.dumps(report)  # plain data


def test_a_job_whose_nodes_each_look_fine_still_exits_1() -> None:
    """Drift: every node alone concludes log-stalled or settings-differ (a warning); without the
    warning node the job verdict alone makes the exit code 1."""
    from runbook.report.build import exit_code

    nodes = [{"node": "n1", "status": "concluded", "conclusion": {"severity": "info"}}]
    assert exit_code(nodes) == 0
    assert exit_code(nodes, [{"problem": True}]) == 1
