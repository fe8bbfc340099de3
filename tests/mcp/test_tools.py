"""Every tool and resource of `runbook mcp` through the SDK's in-memory client, and every way a call
can be wrong: each answered as a one-line error result that names what to fix."""

from __future__ import annotations

import json
import logging
import tarfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK is not installed: pip install 'runbook[mcp]' "
                                                   "(make setup installs it)")

from jsonschema import Draft202012Validator  # noqa: E402
from mcp.server.mcpserver.exceptions import UnexpectedToolError  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from runbook.mcp_server.server import RunbookServer, error_line  # noqa: E402
from tests.mcp.inmemory import FIXES, LOGS, Progress, call, error, server, session, text  # noqa: E402

TOOLS = ["list_runbooks", "show_runbook", "search", "triage_log", "run_runbook", "check", "collect"]
SECRET = "hf_PlantedSecretToken0123456789abcdef"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunbookServer]:
    """One server for the module, with fix-demo on its search path."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RUNBOOK_PATH", str(FIXES))
        yield server(tmp_path_factory.mktemp("audit") / "audit.jsonl")


def test_the_tools_an_assistant_sees(srv: RunbookServer) -> None:
    tools = {t.name: t for t in session(srv, lambda client: client.list_tools()).tools}
    assert list(tools) == TOOLS
    for tool in tools.values():
        assert "中文" in tool.description and "lang: zh" in tool.description, tool.name
        assert tool.input_schema["properties"]["lang"]["anyOf"][0]["enum"] == ["en", "zh"], tool.name
        assert all(p.get("description") for p in tool.input_schema["properties"].values()), tool.name
        hints = tool.annotations
        assert hints.destructive_hint is False and hints.title, tool.name
        assert hints.read_only_hint is (tool.name != "collect"), tool.name
        assert hints.open_world_hint is (tool.name in ("run_runbook", "check", "collect")), tool.name
    assert tools["run_runbook"].input_schema["required"] == ["runbook"]
    assert tools["collect"].input_schema["required"] == ["output"]


def test_list_runbooks_in_english_and_chinese(srv: RunbookServer) -> None:
    en, zh = call(srv, "list_runbooks"), call(srv, "list_runbooks", {"lang": "zh"})
    rows = {r["id"]: r for r in en.structured_content["runbooks"]}
    assert rows["training-hang"]["title"] == "Training is stuck" and "fix-demo" in rows
    assert {r["id"]: r["title"] for r in zh.structured_content["runbooks"]}["training-hang"] == "训练卡住"
    assert "training-hang " in text(en) and "训练卡住" in text(zh)


def test_show_runbook_gives_its_tree_parameters_and_conclusions(srv: RunbookServer) -> None:
    shown = call(srv, "show_runbook", {"runbook": "training-hang", "lang": "zh"})
    tree = shown.structured_content
    assert tree["id"] == "training-hang" and tree["start"] in tree["steps"]
    assert "log" in tree["params"] and "gpu-driver-hang" in tree["conclusions"]
    assert tree["conclusions"]["gpu-driver-hang"]["title"]["zh"]
    assert "训练卡住" in text(shown) and "when result.timed_out → gpu-driver-hang" in text(shown)


def test_search_in_english_and_chinese(srv: RunbookServer) -> None:
    en = call(srv, "search", {"query": "NCCL timeout", "top": 5})
    assert en.structured_content["schema"] == "runbook-search/v1"
    assert "nccl-errors" in [r["id"] for r in en.structured_content["results"]]
    zh = call(srv, "search", {"query": "显存不足", "top": 3, "lang": "zh"})
    assert zh.structured_content["results"][0]["id"] == "cuda-oom"
    assert text(zh).startswith("1. [runbook] cuda-oom: 内存不足")


def test_triage_a_pasted_log_and_a_log_file(srv: RunbookServer) -> None:
    log = LOGS / "01-cuda-oom-torch2.log"
    pasted = log.read_text("utf-8") + f"export HF_TOKEN={SECRET}\n"
    by_text = call(srv, "triage_log", {"text": pasted})
    by_path = call(srv, "triage_log", {"path": str(log), "lang": "zh"})
    for result in (by_text, by_path):
        doc = result.structured_content
        assert doc["schema"] == "runbook-triage/v1" and doc["verdict"] == "cause"
        assert doc["matches"][0]["runbook"] == "cuda-oom" and doc["matches"][0]["role"] == "cause"
    assert by_text.structured_content["source"] == "<pasted>"
    assert text(by_text).splitlines()[2] == "   → run_runbook cuda-oom" and "[根因]" in text(by_path)
    assert SECRET not in json.dumps(by_text.structured_content) + text(by_text)


def test_run_runbook_answers_the_report_a_summary_and_progress(srv: RunbookServer, tmp_path: Path) -> None:
    heard: Progress = []
    result = call(srv, "run_runbook", {"runbook": "fix-demo", "nodes": "localhost",
                                       "set": {"dir": str(tmp_path)}}, heard)
    report = result.structured_content
    schema = json.loads(resources.files("runbook").joinpath("schema/report.v1.json").read_text())
    assert list(Draft202012Validator(schema).iter_errors(report)) == []
    node = report["nodes"][0]
    assert (node["node"], node["conclusion"]["id"], report["summary"]["exit_code"]) == (
        "localhost", "marker-missing", 1)
    assert [f["result"]["status"] for f in node["conclusion"]["fixes"]] == ["dry-run"] * 3
    assert list(tmp_path.iterdir()) == []  # shown, never run
    lines = text(result).splitlines()
    assert lines[1] == "localhost: The marker is missing [warning] (fix-demo:marker-missing)"
    assert lines[-1] == "exit 1: a problem was found"
    assert heard == [(1, 1, "localhost: marker-missing; 1 done, 0 left")]


def test_check_one_check_on_two_nodes_with_progress(srv: RunbookServer, tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"  # this machine, and a loopback port nothing listens on
    inventory.write_text("hosts:\n  localhost: {}\n  closed: {host: 127.0.0.1, port: 9}\n")
    heard: Progress = []
    result = call(srv, "check", {"check_type": "file", "params": {"path": str(inventory)},
                                 "inventory": str(inventory), "lang": "zh"}, heard)
    doc = result.structured_content
    assert doc["schema"] == "runbook-check/v1" and doc["check"] == "file"
    assert [(n["node"], n["status"]) for n in doc["nodes"]] == [
        ("localhost", "ok"), ("closed", "unreachable")]
    assert doc["nodes"][0]["result"]["exists"] is True
    assert text(result).startswith("在 2 个节点上运行检查 file：1 个有结果，1 个失败或超时")
    assert sorted(h[0] for h in heard) == [1, 2] and all(h[1] == 2 for h in heard)
    assert heard[-1][2].endswith("2 done, 0 left")


def test_collect_writes_a_new_redacted_bundle(srv: RunbookServer, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(f"step 1 | loss 2.0\nwandb login {SECRET}\n")
    bundle = tmp_path / "bundle.tar.gz"
    heard: Progress = []
    result = call(srv, "collect", {"output": str(bundle), "log": str(log), "section_timeout_s": 2,
                                   "timeout_s": 60}, heard)
    index = result.structured_content
    assert index["bundle"] == str(bundle) and index["size_bytes"] == bundle.stat().st_size
    sections = {s["section"]: s["status"] for s in index["nodes"][0]["sections"]}
    assert sections["log"] == "collected"
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
        members = b"".join(tar.extractfile(m).read() for m in tar.getmembers())  # type: ignore[union-attr]
    assert "INDEX.md" in names and "index.json" in names and b"loss 2.0" in members
    assert SECRET.encode() not in members
    assert text(result).startswith(f"bundle {bundle}: 1 node(s), ")
    assert len(heard) == 1 and heard[0][:2] == (1, 1)


def test_runbooks_and_articles_are_resources_in_both_languages(srv: RunbookServer) -> None:
    async def browse(client: Any) -> tuple[Any, ...]:
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        reads = [await client.read_resource(uri) for uri in (
            "runbook://runbooks/training-hang/en", "runbook://runbooks/training-hang/zh",
            "runbook://kb/port-in-use/en", "runbook://kb/port-in-use/zh")]
        return listed, templates, reads

    listed, templates, reads = session(srv, browse)
    uris = {str(r.uri) for r in listed.resources}
    assert {"runbook://runbooks/training-hang/en", "runbook://runbooks/training-hang/zh",
            "runbook://kb/port-in-use/en", "runbook://kb/port-in-use/zh"} <= uris
    assert {t.uri_template for t in templates.resource_templates} == {
        "runbook://runbooks/{runbook_id}/{lang}", "runbook://kb/{article}/{lang}"}
    runbook_en, runbook_zh, article_en, article_zh = (r.contents[0].text for r in reads)
    assert runbook_en.startswith("training-hang ") and "Training is stuck" in runbook_en
    assert "训练卡住" in runbook_zh
    assert article_en.startswith("# ") and article_zh.startswith("# ") and article_en != article_zh


@pytest.mark.parametrize("uri, why", [
    ("runbook://runbooks/training-hagn/en", "did you mean 'training-hang'"),
    ("runbook://runbooks/training-hang/fr", "no language 'fr'"),
    ("runbook://kb/port-in-us/zh", "did you mean 'port-in-use'"),
])
def test_an_unknown_resource_is_a_one_line_error(srv: RunbookServer, uri: str, why: str) -> None:
    async def read(client: Any) -> Any:
        try:
            return await client.read_resource(uri)
        except MCPError as refused:  # caught inside the session, which would wrap it in a group
            return refused

    refused = session(srv, read)
    assert isinstance(refused, MCPError) and why in str(refused) and "\n" not in str(refused)


MISSING = "/nonexistent-folder/train.log"
BAD_CALLS = [
    ("show_runbook", {"runbook": "training-hagn"},
     "show_runbook: runbook: no runbook named 'training-hagn' (did you mean 'training-hang'?)"),
    ("show_runbook", {"runbook": "training-hang@9.9.9"}, "not the pinned version 9.9.9"),
    ("show_runbook", {"runbook": "training-hang@latest"}, "'latest' is not a version or digest pin"),
    ("show_runbook", {}, "show_runbook: runbook: Field required"),
    ("list_runbooks", {"lang": "fr"}, "list_runbooks: lang: Input should be 'en' or 'zh'"),
    ("search", {"query": "  "}, "search: query: empty"),
    ("search", {"query": "nccl", "top": 0}, "search: top: 0 is not between 1 and 50"),
    ("search", {"query": "nccl", "top": "many"}, "search: top: Input should be a valid integer"),
    ("triage_log", {}, "not neither"),
    ("triage_log", {"text": "x", "path": MISSING}, "not both"),
    ("triage_log", {"text": " \n"}, "triage_log: text: empty"),
    ("triage_log", {"path": MISSING}, f"triage_log: path: {MISSING}: no such file or directory"),
    ("run_runbook", {"runbook": "no-such-runbook"},
     "run_runbook: runbook: no runbook named 'no-such-runbook'"),
    ("run_runbook", {"runbook": "fix-demo", "set": {"dir": "/tmp"}, "nodes": "gpu[01-"},
     "run_runbook: nodes: bad host list 'gpu[01-'"),
    ("run_runbook", {"runbook": "fix-demo", "set": {"dir": "/tmp"}, "inventory": MISSING},
     f"run_runbook: inventory {MISSING}: No such file or directory"),
    ("run_runbook", {"runbook": "fix-demo", "set": {"dri": "/tmp"}},
     "run_runbook: set dri: fix-demo has no parameter 'dri' (did you mean 'dir'?)"),
    ("run_runbook", {"runbook": "fix-demo"}, "run_runbook: fix-demo needs set dir=<path>"),
    ("run_runbook", {"runbook": "training-hang", "set": {"stall_after": "soon"}},
     "set stall_after=soon: expected a number"),
    ("run_runbook", {"runbook": "fix-demo", "set": {"dir": "/tmp"}, "timeout_s": -1},
     "run_runbook: timeout_s: -1 is not a positive number of seconds"),
    ("run_runbook", {"runbook": "fix-demo", "set": {"dir": "/tmp"}, "nodes": "n[001-100]"},
     "run_runbook: nodes: 100 nodes, more than --max-nodes 64; nothing was run"),
    ("run_runbook", {"runbook": "fix-demo", "set": {"dir": "/tmp"}, "slurm_job": "job-4242"},
     "run_runbook: slurm_job 'job-4242': a job id is a number"),
    ("check", {"check_type": "gpux"}, "check: check_type: no check type 'gpux' (did you mean 'gpu'?)"),
    ("check", {"check_type": "env", "params": {"bogus": 1}},
     "check: params: bogus: check 'env' has no parameter 'bogus'"),
    ("check", {"check_type": "port", "params": {"port": "http"}},
     "check: params: port: 'http' is not of type"),
    ("collect", {"output": str(FIXES / "fix-demo.yaml")}, "exists; name a new file"),
    ("collect", {"output": "/nonexistent-folder/bundle.tar.gz"},
     "collect: output: the folder /nonexistent-folder does not exist"),
    ("collect", {"output": "/tmp/runbook-mcp-never-written.tar.gz", "match": "(train"},
     "collect: match=(train: not a valid regular expression"),
    ("no_such_tool", {}, "Unknown tool: no_such_tool"),
]


@pytest.mark.parametrize("tool, arguments, why", BAD_CALLS,
                         ids=[f"{tool}-{i}" for i, (tool, _, _) in enumerate(BAD_CALLS)])
def test_a_bad_call_is_a_one_line_error_naming_what_to_fix(srv: RunbookServer, tool: str,
                                                          arguments: dict[str, Any], why: str) -> None:
    assert why in error(call(srv, tool, arguments))


def test_a_crash_is_one_line_for_the_assistant_and_a_traceback_in_the_log(
        caplog: pytest.LogCaptureFixture) -> None:
    crash = RuntimeError("the probe answered\nsomething odd")
    failure = UnexpectedToolError("Error executing tool check")
    failure.__cause__ = crash
    with caplog.at_level(logging.ERROR, logger="runbook.mcp"):
        line = error_line("check", failure)
    assert line == ("check: internal error: RuntimeError: the probe answered something odd (the traceback "
                    "is in the server's log)")
    assert caplog.records[0].exc_info is not None and caplog.records[0].exc_info[1] is crash
