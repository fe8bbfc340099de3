"""Fixes that run: dry run by default, --apply for safe ones, --yes for disruptive ones on a
terminal only, the blast-radius cap, checks after a fix, the canary and the audit log."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from runbook.library.runbooks import load_library
from runbook.run.fixes import FixPolicy, execute, plan
from runbook.run.walk import CONCLUDED, NodeOutcome
from runbook.transports import Node, ProbeAnswer

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "fixes"


def run_cli(target: Path, *args: str, audit: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RUNBOOK_PATH": str(FIXTURES), "RUNBOOK_LANG": "en"}
    return subprocess.run([sys.executable, "-m", "runbook", "run", "fix-demo", "--set", f"dir={target}",
                           "--format", "json", "--audit-log", str(audit), *args],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=60)


def fixes_of(out: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return json.loads(out.stdout)["nodes"][0]["conclusion"]["fixes"]


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "a dir; with spaces"  # every command must quote it
    path.mkdir()
    return path


def test_dry_run_is_the_default_and_shows_exact_commands(target: Path, tmp_path: Path) -> None:
    out = run_cli(target, audit=tmp_path / "audit.jsonl")
    fixes = fixes_of(out)
    assert fixes[1]["run"] == f"touch '{target}'/marker"
    assert [f["result"]["status"] for f in fixes] == ["dry-run"] * 3
    assert list(target.iterdir()) == [] and not (tmp_path / "audit.jsonl").exists()
    assert out.returncode == 1


def test_apply_without_a_terminal_runs_safe_fixes_only(target: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    for extra in ((), ("--yes",)):
        (target / "marker").unlink(missing_ok=True)
        out = run_cli(target, "--apply", *extra, audit=audit)
        fixes = fixes_of(out)
        assert [f["result"]["status"] for f in fixes] == ["ok", "ok", "held-back"], extra
        assert fixes[1]["result"]["verify"]["passed"] is True
        assert "without a terminal" in fixes[2]["result"]["reason"]
        assert (target / "marker").exists() and not (target / "disruptive-ran").exists()
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["fix"], e["effect"], e["status"]) for e in lines] == [
        ("List the directory", "read-only", "ok"), ("Create the marker", "changes-state", "ok")] * 2
    assert lines[1]["command"] == f"touch '{target}'/marker" and lines[1]["verify_passed"] is True


def test_blast_radius_cap_refuses_and_still_reports(target: Path, tmp_path: Path) -> None:
    out = run_cli(target, "--apply", "--max-nodes", "0", audit=tmp_path / "audit.jsonl")
    assert out.returncode == 2 and "more than --max-nodes 0" in out.stderr
    assert [f["result"]["status"] for f in fixes_of(out)][:2] == ["refused", "refused"]
    assert list(target.iterdir()) == [] and not (tmp_path / "audit.jsonl").exists()


def test_yes_without_apply_is_a_usage_error(target: Path, tmp_path: Path) -> None:
    out = run_cli(target, "--yes", audit=tmp_path / "audit.jsonl")
    assert out.returncode == 2 and "--yes only makes sense with --apply" in out.stderr


def _run_on_terminal(target: Path, audit: Path, args: list[str], answer: str | None) -> tuple[str, str]:
    """Run with stdin/stderr on a pseudo-terminal; answer the prompt; return (stdout, terminal)."""
    master, slave = pty.openpty()
    env = {**os.environ, "RUNBOOK_PATH": str(FIXTURES), "RUNBOOK_LANG": "en"}
    proc = subprocess.Popen([sys.executable, "-m", "runbook", "run", "fix-demo", "--set", f"dir={target}",
                             "--format", "json", "--audit-log", str(audit), *args],
                            stdin=slave, stderr=slave, stdout=subprocess.PIPE, text=True, env=env)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 60
    answered = False
    while proc.poll() is None and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                seen += os.read(master, 4096)
            except OSError:
                break
        if answer is not None and not answered and b"Run them? [y/N]" in seen:
            os.write(master, answer.encode() + b"\n")
            answered = True
    stdout, _ = proc.communicate(timeout=30)
    os.close(master)
    return stdout, seen.decode(errors="replace")


def test_terminal_confirmation_and_disruptive_with_yes(target: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    stdout, terminal = _run_on_terminal(target, audit, ["--apply"], answer="n")
    assert f"$ touch '{target}'/marker" in terminal  # the prompt lists nodes and commands
    assert "wipe" not in terminal.lower()  # disruptive: not offered without --yes
    statuses = [f["result"]["status"] for f in json.loads(stdout)["nodes"][0]["conclusion"]["fixes"]]
    assert statuses == ["refused", "refused", "held-back"] and list(target.iterdir()) == []

    stdout, terminal = _run_on_terminal(target, audit, ["--apply", "--yes"], answer=None)
    statuses = [f["result"]["status"] for f in json.loads(stdout)["nodes"][0]["conclusion"]["fixes"]]
    assert statuses == ["ok", "ok", "ok"] and "Run them?" not in terminal
    assert (target / "disruptive-ran").exists()


# -- the canary and stopping after a failure, with a transport that fails on chosen nodes --


class FlakyTransport:
    def __init__(self, failing: set[str]) -> None:
        self.failing = failing
        self.ran: list[str] = []

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        self.ran.append(node.name)
        ok = node.name not in self.failing
        return ProbeAnswer("ok", {"exit_code": 0 if ok else 1, "ok": ok, "stdout": "", "stderr": "boom",
                                  "timed_out": False})

    def close(self) -> None:
        pass


def _outcomes(names: list[str]) -> tuple[list[NodeOutcome], Any]:
    library = load_library([FIXTURES])
    runbook = library.get("fix-demo")
    assert runbook is not None
    conclusion = runbook.conclusions["marker-missing"]
    outcomes = []
    for name in names:
        outcome = NodeOutcome(Node(name))
        outcome.status, outcome.conclusion, outcome.conclusion_runbook = CONCLUDED, conclusion, runbook
        outcome.fix_commands = ["true", None, "true"]  # one fix with no command: never planned
        outcome.fix_verifies = [None, None, None]
        outcomes.append(outcome)
    return outcomes, library


def test_a_failed_fix_on_the_canary_stops_the_others() -> None:
    outcomes, library = _outcomes(["n1", "n2", "n3"])
    for outcome in outcomes:
        outcome.fix_commands = [None, "true", None]  # only the changes-state fix runs
    policy = FixPolicy(apply=True, interactive=False)
    planned = plan(outcomes, policy, "en")
    transport = FlakyTransport({"n1"})
    execute(planned, transport, library, policy)
    assert transport.ran == ["n1"]
    assert [(p.outcome.node.name, p.result["status"]) for p in planned] == [
        ("n1", "failed"), ("n2", "skipped"), ("n3", "skipped")]


def test_keep_going_runs_every_node() -> None:
    outcomes, library = _outcomes(["n1", "n2", "n3"])
    policy = FixPolicy(apply=True, keep_going=True)
    planned = plan(outcomes, policy, "en")
    transport = FlakyTransport({"n1", "n3"})
    execute(planned, transport, library, policy)
    assert sorted(transport.ran) == ["n1", "n2", "n3"]
    assert {p.outcome.node.name: p.result["status"] for p in planned if p.effect == "read-only"} == {
        "n1": "failed", "n2": "ok", "n3": "failed"}


def test_a_failed_read_only_fix_does_not_stop_the_rest() -> None:
    outcomes, library = _outcomes(["n1", "n2"])
    for outcome in outcomes:
        outcome.fix_commands = ["grep nothing", "true", None]
    policy = FixPolicy(apply=True)
    planned = plan(outcomes, policy, "en")

    class ReadOnlyFails(FlakyTransport):
        def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
            self.ran.append(node.name)
            ok = request["with"]["run"] != "grep nothing"
            return ProbeAnswer("ok", {"exit_code": 0 if ok else 1, "ok": ok, "stdout": "", "stderr": "",
                                      "timed_out": False})

    transport = ReadOnlyFails(set())
    execute(planned, transport, library, policy)
    assert [(p.outcome.node.name, p.effect, p.result["status"]) for p in planned] == [
        ("n1", "read-only", "failed"), ("n1", "changes-state", "ok"),
        ("n2", "read-only", "failed"), ("n2", "changes-state", "ok")]


def test_a_command_missing_a_value_never_runs() -> None:
    outcomes, library = _outcomes(["n1"])
    outcomes[0].fix_commands = ["kill '<unset>'", None, None]
    planned = plan(outcomes, FixPolicy(apply=True), "en")
    assert planned[0].result["status"] == "held-back" and "missing" in planned[0].result["reason"]


def test_a_policy_limited_to_read_only_runs_nothing_else() -> None:
    outcomes, library = _outcomes(["n1"])
    outcomes[0].fix_commands = ["true", "true", "true"]
    policy = FixPolicy(apply=True, yes=True, interactive=True, effects=("read-only",),
                       not_allowed="an assistant applies read-only fixes only")
    planned = plan(outcomes, policy, "en")
    transport = FlakyTransport(set())
    execute(planned, transport, library, policy)
    assert transport.ran == ["n1"]  # the read-only fix alone reached the node
    assert [(p.effect, p.result["status"]) for p in planned] == [
        ("read-only", "ok"), ("changes-state", "held-back"), ("disruptive", "held-back")]
    assert planned[1].result["reason"] == "changes-state: an assistant applies read-only fixes only"
