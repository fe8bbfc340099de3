"""What an assistant cannot do through `runbook mcp`: without --allow-read-only-fixes no tool changes
anything; with it only read-only fixes run; nothing it names runs as a program or code; no secret
reaches an answer or the audit log, which records every call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK is not installed: pip install 'runbook[mcp]' "
                                                   "(make setup installs it)")

from runbook.mcp_server.safety import NO_FIXES, READ_ONLY_ONLY  # noqa: E402
from tests.mcp.inmemory import FIXES, audit_entries, call, error, server, text  # noqa: E402

SECRET = "hf_PlantedSecretToken0123456789abcdef"


@pytest.fixture(autouse=True)
def fix_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """fix-demo on the search path: a runbook whose three fixes (read-only, changes-state,
    disruptive) really act on a folder."""
    monkeypatch.setenv("RUNBOOK_PATH", str(FIXES))


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "a dir; with spaces"  # every command must quote it
    path.mkdir()
    return path


def fixes_of(result: Any) -> list[dict[str, Any]]:
    fixes: list[dict[str, Any]] = result.structured_content["nodes"][0]["conclusion"]["fixes"]
    return fixes


def test_without_the_flag_no_tool_changes_anything(tmp_path: Path, target: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    srv = server(audit)
    mine = tmp_path / "existing.tar.gz"
    mine.write_bytes(b"a person's file")
    marker = target / "marker"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_runbooks", {}), ("show_runbook", {"runbook": "fix-demo"}), ("search", {"query": "marker"}),
        ("triage_log", {"text": f"touch {marker}\nRuntimeError: CUDA error: out of memory\n"}),
        ("run_runbook", {"runbook": "fix-demo", "set": {"dir": str(target)}, "apply_read_only_fixes": True}),
        ("run_runbook", {"runbook": "fix-demo", "set": {"dir": str(target)}}),
        ("check", {"check_type": "command", "params": {"run": f"touch '{marker}'"}}),
        ("check", {"check_type": "file", "params": {"path": str(target)}}),
        ("collect", {"output": str(mine)}),
    ]
    results = [call(srv, tool, arguments) for tool, arguments in calls]
    assert list(target.iterdir()) == [] and mine.read_bytes() == b"a person's file"
    applied, shown = fixes_of(results[4]), fixes_of(results[5])
    assert [(f["effect"], f["result"]["status"]) for f in applied] == [
        ("read-only", "held-back"), ("changes-state", "held-back"), ("disruptive", "held-back")]
    assert all(f["result"]["reason"].endswith(NO_FIXES) for f in applied)
    assert [f["result"]["status"] for f in shown] == ["dry-run"] * 3
    assert "check_type: command runs a shell command" in error(results[6])
    assert "exists; name a new file" in error(results[8])
    entries = audit_entries(audit)  # every call, in order, and not one executed fix
    assert [(e["event"], e["tool"]) for e in entries] == [("mcp-tool", tool) for tool, _ in calls]
    assert [e["status"] for e in entries] == ["ok"] * 6 + ["error", "ok", "error"]
    assert not [e for e in entries if "fix" in e]


def test_with_the_flag_read_only_fixes_alone_run_and_only_when_asked(tmp_path: Path, target: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    srv = server(audit, allow_read_only_fixes=True)
    asked = call(srv, "run_runbook", {"runbook": "fix-demo", "set": {"dir": str(target)},
                                      "apply_read_only_fixes": True})
    not_asked = call(srv, "run_runbook", {"runbook": "fix-demo", "set": {"dir": str(target)}})
    listed, created, wiped = fixes_of(asked)
    assert (listed["effect"], listed["result"]["status"], listed["result"]["exit_code"]) == (
        "read-only", "ok", 0)
    assert listed["result"]["stdout"].count("\n") >= 2  # `ls -la` of the folder: . and ..
    assert created["result"] == {"status": "held-back", "reason": f"changes-state: {READ_ONLY_ONLY}"}
    assert wiped["result"] == {"status": "held-back", "reason": f"disruptive: {READ_ONLY_ONLY}"}
    assert [f["result"]["status"] for f in fixes_of(not_asked)] == ["dry-run"] * 3
    assert list(target.iterdir()) == []  # no marker, no disruptive-ran
    fixes = [e for e in audit_entries(audit) if "fix" in e]
    assert [(e["effect"], e["status"], e["command"]) for e in fixes] == [
        ("read-only", "ok", f"ls -la '{target}'")]
    assert "[read-only; ok]" in text(asked)


@pytest.mark.parametrize("tool, arguments, why", [
    ("check", {"check_type": "python", "params": {"code": "open(MARKER, 'w')"}}, "python runs Python code"),
    ("check", {"check_type": "stack", "params": {"pid": 1, "py_spy": "/bin/touch"}},
     "params py_spy: names the program to run"),
    ("check", {"check_type": "checkpoint", "params": {"path": "MARKER", "python": "/bin/touch"}},
     "params python: names the interpreter to run"),
    ("check", {"check_type": "checkpoint", "params": {"path": "MARKER", "weights_only": False}},
     "params weights_only: false would unpickle"),
    ("run_runbook", {"runbook": "checkpoint-problems", "set": {"checkpoint": "MARKER",
                                                               "reference": "os:system"}},
     "set reference: can name code to import and call"),
])
def test_nothing_an_assistant_names_runs_as_code_even_with_the_flag(
        tmp_path: Path, tool: str, arguments: dict[str, Any], why: str) -> None:
    marker = tmp_path / "marker"
    srv = server(tmp_path / "audit.jsonl", allow_read_only_fixes=True)
    filled = json.loads(json.dumps(arguments).replace("MARKER", str(marker)))
    assert why in error(call(srv, tool, filled))
    assert not marker.exists()


def test_no_secret_reaches_an_answer_or_the_audit_log(tmp_path: Path, target: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", SECRET)  # the probe on this machine inherits it
    audit = tmp_path / "audit.jsonl"
    srv = server(audit)
    results = [
        call(srv, "triage_log", {"text": f"HF_TOKEN={SECRET}\ntorch.OutOfMemoryError: CUDA out of memory\n"}),
        call(srv, "check", {"check_type": "env", "params": {"names": ["HF_TOKEN"]}}),
        call(srv, "run_runbook", {"runbook": "fix-demo", "set": {"dir": str(target), "api_key": SECRET}}),
    ]
    env = results[1].structured_content["nodes"][0]["result"]["vars"]
    assert env == {"HF_TOKEN": "***redacted***"}
    for result in results:
        assert SECRET not in json.dumps(result.structured_content) + text(result)
    written = audit.read_text("utf-8")
    assert SECRET not in written and written.count('"event": "mcp-tool"') == 3
    assert "HF_TOKEN=***redacted***" in written  # the pasted text is kept, its secret hidden
