"""Sections of `runbook collect`, run through the real local probe, with fake tools on PATH.

The fakes stand in for what this machine lacks or does fine: a dmesg that is refused, one with
Xid lines, an nvidia-smi without a driver, a conda environment.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from runbook.collect.archive import ABSENT, COLLECTED, DENIED, FAILED, UNREACHABLE
from runbook.collect.sections import SECTIONS, NodeJob, collect_node, render, run_section
from runbook.transports import Node, NodeTransports

SECTION = {s.name: s for s in SECTIONS}


def fake_tool(folder: Path, name: str, script: str) -> None:
    folder.mkdir(exist_ok=True)
    tool = folder / name
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(0o755)


def job(tmp_path: Path, params: dict | None = None, python: str | None = None) -> NodeJob:
    """A job on this machine whose probe sees tmp_path/bin first on PATH."""
    env = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    node = Node("here", "local", {"env": env})
    return NodeJob(node, NodeTransports(local={"python": sys.executable}), params or {},
                   time.monotonic() + 60, python=python)


def test_a_refused_dmesg_and_no_journalctl_say_why(tmp_path: Path) -> None:
    fake_tool(tmp_path / "bin", "dmesg", "echo 'dmesg: read kernel buffer failed: Operation not "
                                         "permitted' >&2; exit 1\n")
    fake_tool(tmp_path / "bin", "journalctl", "echo 'sh: 1: journalctl: not found' >&2; exit 127\n")
    outcome = run_section(job(tmp_path), SECTION["dmesg"])
    assert outcome.status == DENIED
    assert outcome.reason == ("dmesg (exit 1): dmesg: read kernel buffer failed: Operation not "
                              "permitted; journalctl: not installed")


def test_xid_lines_are_gathered_apart_from_the_tail(tmp_path: Path) -> None:
    lines = [f"[Mon Nov 23 04:00:0{i % 10} 2026] kernel: line {i}" for i in range(600)]
    lines.insert(10, "[Mon Nov 23 04:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen "
                     "off the bus.")
    (tmp_path / "kmsg").write_text("\n".join(lines) + "\n")
    fake_tool(tmp_path / "bin", "dmesg", f"cat {tmp_path / 'kmsg'}\n")
    outcome = run_section(job(tmp_path), SECTION["dmesg"])
    assert outcome.status == COLLECTED and outcome.source == "command `dmesg -T`"
    xid, tail = outcome.body.split("--- last 500 lines ---")
    assert "Xid lines (1," in xid and "79, pid=1, GPU has fallen off the bus." in xid
    assert tail.strip().splitlines() == lines[-500:]


def test_nvidia_smi_without_a_driver_fails_with_its_message(tmp_path: Path) -> None:
    fake_tool(tmp_path / "bin", "nvidia-smi", "echo \"NVIDIA-SMI has failed because it couldn't "
                                              "communicate with the NVIDIA driver.\"; exit 9\n")
    outcome = run_section(job(tmp_path), SECTION["nvidia-smi"])
    assert outcome.status == FAILED
    assert outcome.reason == ("exit status 9: NVIDIA-SMI has failed because it couldn't communicate "
                              "with the NVIDIA driver.")


def test_the_log_section_reads_the_newest_match_of_a_glob(tmp_path: Path) -> None:
    old, new = tmp_path / "a.log", tmp_path / "b.log"
    old.write_text("old\n")
    new.write_text("".join(f"line {i}\n" for i in range(800)))
    os.utime(old, (time.time() - 100, time.time() - 100))
    outcome = run_section(job(tmp_path, {"log": str(tmp_path / "*.log")}), SECTION["log"])
    assert outcome.status == COLLECTED
    header, _, tail = outcome.body.partition("--- last 500 lines ---\n")
    assert f"file: {new} (" in header and f"other files matching: {old}" in header
    assert tail.splitlines() == [f"line {i}" for i in range(300, 800)]


def test_a_missing_log_is_a_failure_and_no_log_given_is_absent(tmp_path: Path) -> None:
    missing = run_section(job(tmp_path, {"log": str(tmp_path / "none.log")}), SECTION["log"])
    assert missing.status == FAILED and "does not exist" in str(missing.reason)
    assert run_section(job(tmp_path), SECTION["log"]).status == ABSENT


def test_no_writer_of_the_log_is_absent_and_a_missing_pid_is_a_failure(tmp_path: Path) -> None:
    # The process check's answer is given: which processes run on this machine depends on
    # what else runs beside the test (a launcher's ranks would be taken as the job's).
    asked: list[dict] = []

    def not_found(self: NodeJob, section: str, check: str, params: dict, timeout: float) -> dict:
        asked.append(params)
        return {"found": False, "processes": [], "reason": "no process holds the log open, is named "
                "in it or was started by a launcher: the job has exited"}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(NodeJob, "ask", not_found)
        exited = run_section(job(tmp_path, {"log": "/x/train.log"}), SECTION["process"])
        gone = run_section(job(tmp_path, {"pid": "4242", "log": "/x/train.log"}), SECTION["process"])
    # the log ties the process unless a pid is given
    assert asked == [{"log": "/x/train.log"}, {"pid": "4242"}]
    assert exited.status == ABSENT and "the job has exited" in str(exited.reason)  # a finding
    assert "tied to the writer of /x/train.log" in exited.source
    assert gone.status == FAILED  # the pid asked for is not there


def test_a_wrong_interpreter_fails_and_says_so(tmp_path: Path) -> None:
    outcome = run_section(job(tmp_path, python="/nonexistent/python3"), SECTION["pip-list"])
    assert outcome.status == FAILED
    assert outcome.reason == "interpreter /nonexistent/python3 not found on the node (give --python PATH)"


def test_conda_environments_are_listed_without_a_conda_command(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "numpy-1.26.4-py311h64a7726_0.json").write_text("{}")
    fake_tool(prefix / "bin", "python", f"echo {prefix}\n")
    outcome = run_section(job(tmp_path, python=str(prefix / "bin" / "python")), SECTION["conda-list"])
    assert outcome.status == COLLECTED, outcome
    assert outcome.body.strip() == "numpy-1.26.4-py311h64a7726_0"
    assert "(no conda command found)" in outcome.source


def test_config_files_from_globs_and_one_that_matches_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("lr: 3e-4\n")
    (tmp_path / "b.bin").write_bytes(b"\0\1")
    params = {"config": [str(tmp_path / "*.yaml"), str(tmp_path / "b.bin"), str(tmp_path / "*.toml")]}
    outcome = run_section(job(tmp_path, params), SECTION["config"])
    assert outcome.status == FAILED
    assert outcome.reason == f"no file matches {tmp_path}/*.toml; {tmp_path}/b.bin: binary file, not included"
    assert f"===== {tmp_path}/a.yaml (9 bytes, from the --set config) =====\nlr: 3e-4\n" in outcome.body


def test_an_unreachable_node_stops_after_its_first_section(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    node = Node("gone", "ssh", {"host": "127.0.0.1", "port": port})
    transport = NodeTransports(ssh={"connect_timeout": 2.0})
    seen: list[tuple[str, str]] = []
    begin = time.monotonic()
    try:
        collect_node(NodeJob(node, transport, {}, time.monotonic() + 30), SECTIONS,
                     lambda section, outcome: seen.append((section.name, outcome.status)))
    finally:
        transport.close()
    assert seen == [(s.name, UNREACHABLE) for s in SECTIONS]
    assert time.monotonic() - begin < 10


def test_no_time_left_means_not_started(tmp_path: Path) -> None:
    late = job(tmp_path)
    late.deadline = time.monotonic()
    outcome = run_section(late, SECTION["nvidia-smi"])
    assert outcome.status == "timeout" and outcome.reason == "not started: the whole-run --timeout ran out"


@pytest.mark.parametrize("status", [COLLECTED, FAILED])
def test_each_file_says_what_it_is_and_why_it_is_empty(tmp_path: Path, status: str) -> None:
    from runbook.collect.sections import SectionOutcome

    text = render("n1", SECTION["pip-list"], SectionOutcome(status, "pkg 1.0\n", "why", "command `x`"))
    label = "note" if status == COLLECTED else "not collected"
    assert text == (f"# pip list of the training interpreter on n1\n# status: {status}\n"
                    f"# source: command `x`\n# {label}: why\n\npkg 1.0\n")
