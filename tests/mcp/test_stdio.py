"""`python -m runbook mcp` started as an assistant starts it (the SDK's stdio client), pointed at a
real faulty job from scenarios/: a data loader still tokenising before its first batch, one CPU core
busy (`loader_accumulating`). One job for the module, stopped at its end."""

from __future__ import annotations

import os
import sys
import tarfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK is not installed: pip install 'runbook[mcp]' "
                                                   "(make setup installs it)")

from mcp import Client, StdioServerParameters  # noqa: E402

from scenarios.jobs import Scenario, start  # noqa: E402
from tests.mcp.inmemory import ROOT, Progress, audit_entries, text  # noqa: E402

pytestmark = pytest.mark.e2e
SPEED = 4.0
STARTED_WITHIN_S = 60.0  # the job's first `Token buffer:` line, on a busy 2-core machine
ANSWER_WITHIN_S = 120.0  # a call's answer: the server's own --timeout bounds the run under it
TOOLS = ["list_runbooks", "show_runbook", "search", "triage_log", "run_runbook", "check", "collect"]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    handle = start("loader_accumulating", tmp_path_factory.mktemp("job") / "loader", speed=SPEED)
    try:
        assert handle.wait_for_log(r"Token buffer:", timeout=STARTED_WITHIN_S), handle.read_log()[-2000:]
        yield handle
    finally:
        assert handle.stop(), "the job's processes outlived stop()"


def over_stdio(audit: Path, work: Callable[[Client], Awaitable[Any]]) -> Any:
    """`work(client)` against `python -m runbook mcp` in a subprocess, as an MCP client runs it;
    this checkout's engine, the suite's cache, the audit log in the test's folder."""
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "runbook", "mcp", "--audit-log", str(audit), "--timeout", "90"],
        env={"PYTHONPATH": str(ROOT / "engine"), "RUNBOOK_LANG": "en",
             "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(audit.parent / "cache"))},
        cwd=str(ROOT))

    async def session() -> Any:
        async with Client(server, read_timeout_seconds=ANSWER_WITHIN_S) as client:
            return await work(client)

    return anyio.run(session)


def test_an_assistant_over_stdio_lists_the_tools_and_diagnoses_the_job(job: Scenario, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    heard: Progress = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        heard.append((done, total, message))

    async def conversation(client: Client) -> tuple[Any, Any]:
        listed = await client.list_tools()
        diagnosed = await client.call_tool("run_runbook", {
            "runbook": "training-hang", "set": {"log": str(job.log), "pid": job.pid, "stall_after": 2}},
            progress_callback=progress)
        return listed, diagnosed

    listed, diagnosed = over_stdio(audit, conversation)
    assert [tool.name for tool in listed.tools] == TOOLS
    node = diagnosed.structured_content["nodes"][0]
    assert node["conclusion"]["id"] == "dataloader-accumulating", node["path"]
    assert node["conclusion"]["taxonomy"] == ["hang.dataloader"]
    found = node["evidence"][0]["result"]
    assert found["found"] and found["pid"] == job.pid and found["cpu_percent"] > 20
    assert "(training-hang:dataloader-accumulating)" in text(diagnosed)
    assert len(heard) == 1 and heard[0][:2] == (1, 1) and "dataloader-accumulating" in str(heard[0][2])
    assert [(e["tool"], e["status"]) for e in audit_entries(audit)] == [("run_runbook", "ok")]


def test_collect_over_stdio_bundles_the_job(job: Scenario, tmp_path: Path) -> None:
    bundle = tmp_path / "job.tar.gz"
    collected = over_stdio(tmp_path / "audit.jsonl", lambda client: client.call_tool("collect", {
        "output": str(bundle), "log": str(job.log), "pid": job.pid, "section_timeout_s": 3}))
    index = collected.structured_content
    sections = {s["section"]: s for s in index["nodes"][0]["sections"]}
    assert sections["process"]["status"] == sections["log"]["status"] == "collected", sections
    with tarfile.open(bundle) as tar:
        log_tail = tar.extractfile(sections["log"]["file"]).read().decode()  # type: ignore[union-attr]
        process = tar.extractfile(sections["process"]["file"]).read().decode()  # type: ignore[union-attr]
    assert "Token buffer:" in log_tail and str(job.pid) in process
    assert text(collected).startswith(f"bundle {bundle}: 1 node(s), ")
