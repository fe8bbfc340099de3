"""Ctrl-C (SIGINT) or SIGTERM anywhere: `run`, `check` and `collect` stop every probe and the
commands they started, write what they found marked incomplete, and exit 130 within seconds;
a second Ctrl-C exits at once.

Real signals to a real `runbook` process, with the local transport (the probes are children
of this machine) and over SSH on the loopback cluster (each host in its own PID namespace).
Every test waits for a real sign that the checks are running (a marker file their command
creates, or the hanging process itself) before it sends the signal.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from scenarios.jobs import SCENARIO_ROOT
from tests import cluster_fixture

pytestmark = pytest.mark.e2e
make_cluster = cluster_fixture.make_cluster
_module_cluster_factory = cluster_fixture._module_cluster_factory
delay_proxy = cluster_fixture.delay_proxy

SIGNALS = [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")]
REASON = {signal.SIGINT: "interrupted (Ctrl-C)", signal.SIGTERM: "interrupted (SIGTERM)"}
EXIT_WITHIN_S = 10.0  # "a few seconds", with room for a loaded machine
# Every node answers `first`; then the first node concludes and every other one touches a
# marker and hangs in `look`. (The walk is level-synchronous: an answer is decided when its
# whole round is in, so the node that concludes must do so in an earlier round.)
RUNBOOK = """apiVersion: runbook/v1
id: interruptible
version: 1.0.0
title: {en: Interruptible, zh: 可中断}
summary: {en: One node concludes and the others hang, zh: 一个节点得出结论，其余卡住}
start: first
steps:
  first:
    title: {en: First, zh: 第一步}
    check: {type: command, with: {run: "echo {{ node.name }}"}}
    branches:
      - when: node.name in ['a', 'node01']
        goto: done
    default: look
  look:
    title: {en: Look, zh: 查看}
    check: {type: command, with: {run: "touch MARKS/{{ node.name }}; exec sleep SLEEP"}, timeout: 200s}
    default: done
conclusions:
  done: {severity: ok, taxonomy: [], title: {en: Done, zh: 完成}, explanation: {en: D, zh: 完}}
"""


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    folder = tmp_path / "marks"
    folder.mkdir()
    return folder


@pytest.fixture
def token() -> str:
    """Put in the environment of every local process the test starts: what still carries it
    after the command exited was left behind."""
    return f"RB_INTERRUPT_TEST={uuid.uuid4().hex}"


def library(tmp_path: Path, marks: Path, sleep: str = "300") -> Path:
    folder = tmp_path / "library"
    folder.mkdir(exist_ok=True)
    (folder / "interruptible.yaml").write_text(RUNBOOK.replace("MARKS", str(marks)).replace("SLEEP", sleep))
    return folder


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "runbook", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**env, "RUNBOOK_LANG": "en"},
                            stdin=subprocess.DEVNULL)


def interrupt(proc: subprocess.Popen[str], ready: Callable[[], bool], signum: int,
              again_after: float | None = None) -> tuple[str, str, float]:
    """Wait until `ready()`, send `signum` (and a second SIGINT `again_after` s later);
    (stdout, stderr, seconds from the last signal to the exit)."""
    try:
        _wait_for(lambda: ready() or proc.poll() is not None, 60)
        assert proc.poll() is None, f"it ended before the signal: {proc.communicate()}"
        proc.send_signal(signum)
        sent = time.monotonic()
        if again_after is not None:
            time.sleep(again_after)
            proc.send_signal(signal.SIGINT)
            sent = time.monotonic()
        out, err = proc.communicate(timeout=60)
        return out, err, time.monotonic() - sent
    finally:
        proc.kill()
        proc.wait(timeout=10)


def local_leftovers(token: str) -> list[str]:
    """Command lines of the processes that still carry the test's token in their environment."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if token.encode() not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                found.append(fh.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return found


def host_leftovers(cl: Any, host: str) -> list[str]:
    return [p for p in cl.processes(host) if "runbook-probe" in p or "sleep 300" in p
            or "nvidia-smi" in p]


def assert_nothing_left(cl: Any) -> None:
    for host in cl.names():
        _wait_for(lambda h=host: not host_leftovers(cl, h), 10, lambda h=host: host_leftovers(cl, h))


def _wait_for(condition: Callable[[], Any], timeout: float, what: Callable[[], Any] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s" + (f": {what()}" if what else ""))


def assert_partial_run_report(out: str, signum: int, quick: str, hung: list[str]) -> None:
    report = json.loads(out)
    schema = json.loads(resources.files("runbook").joinpath("schema/report.v1.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    nodes = {n["node"]: n for n in report["nodes"]}
    assert report["summary"]["incomplete"] is True
    assert report["summary"]["reason"] == REASON[signum]
    assert nodes[quick]["status"] == "concluded" and nodes[quick]["conclusion"]["id"] == "done"
    for name in hung:  # what they found before is kept
        assert (nodes[name]["status"], nodes[name]["reason"]) == ("timeout", "step look: interrupted")
        assert nodes[name]["evidence"][0]["result"]["stdout"] == f"{name}\n"


def open_bundle(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {i.name: tar.extractfile(i).read() for i in tar.getmembers()}  # type: ignore[union-attr]


def assert_partial_bundle(bundle: Path, signum: int, nodes: list[str]) -> None:
    members = open_bundle(bundle)
    index = json.loads(members["index.json"])
    assert index["summary"]["incomplete"] is True and index["summary"]["reason"] == REASON[signum]
    assert f"**INCOMPLETE: {REASON[signum]}.**" in members["INDEX.md"].decode()
    for entry in index["nodes"]:
        assert entry["node"] in nodes
        sections = {s["section"]: s for s in entry["sections"]}
        # What was found before the signal is kept; the rest says why it is missing.
        assert sections["process"]["reason"] != REASON[signum], sections["process"]
        for name in ("nvidia-smi", "dmesg", "pip-list"):
            assert (sections[name]["status"], sections[name]["reason"]) == ("failed", REASON[signum])


def hanging_smi(tmp_path: Path) -> Path:
    """A copy of the scenario's hanging nvidia-smi in a folder of this test's own."""
    folder = tmp_path / "smi-bin"
    folder.mkdir(exist_ok=True)
    shutil.copy(SCENARIO_ROOT / "nvidia_smi_hang" / "bin" / "nvidia-smi", folder / "nvidia-smi")
    return folder


# -- the local transport ------------------------------------------------------------------------


@pytest.mark.parametrize("signum", SIGNALS)
def test_local_run_stops_its_probes_and_writes_a_partial_report(tmp_path: Path, marks: Path, token: str,
                                                               signum: int) -> None:
    env = {**os.environ, "RUNBOOK_PATH": str(library(tmp_path, marks)),
           token.split("=")[0]: token.split("=")[1]}
    proc = start(["run", "interruptible", "--executor", "local", "--nodes", "a,b,c", "--format", "json"],
                 env)
    out, err, took = interrupt(proc, lambda: len(list(marks.iterdir())) == 2, signum)
    assert proc.returncode == 130, err
    assert took < EXIT_WITHIN_S, took
    assert "Traceback" not in err and f"runbook: {REASON[signum]}: the report is incomplete" in err
    assert_partial_run_report(out, signum, "a", ["b", "c"])
    _wait_for(lambda: not local_leftovers(token), 5, lambda: local_leftovers(token))


@pytest.mark.parametrize("signum", SIGNALS)
def test_local_check_stops_and_says_which_nodes_had_not_answered(tmp_path: Path, marks: Path, token: str,
                                                                signum: int) -> None:
    env = {**os.environ, token.split("=")[0]: token.split("=")[1]}
    proc = start(["check", "command", "--with", f"run=mktemp {marks}/m.XXXXXX; exec sleep 300",
                  "--executor", "local", "--nodes", "a,b", "--timeout", "200", "--format", "json"], env)
    out, err, took = interrupt(proc, lambda: len(list(marks.iterdir())) == 2, signum)
    assert proc.returncode == 130 and took < EXIT_WITHIN_S, (took, err)
    report = json.loads(out)
    assert report["incomplete"] is True and report["reason"] == REASON[signum]
    assert [(n["node"], n["status"], n["error"]) for n in report["nodes"]] == [
        ("a", "timeout", "interrupted"), ("b", "timeout", "interrupted")]
    _wait_for(lambda: not local_leftovers(token), 5, lambda: local_leftovers(token))


@pytest.mark.parametrize("signum", SIGNALS)
def test_local_collect_writes_an_incomplete_bundle(tmp_path: Path, token: str, signum: int) -> None:
    smi = hanging_smi(tmp_path)
    env = {**os.environ, "PATH": f"{smi}{os.pathsep}{os.environ['PATH']}",
           token.split("=")[0]: token.split("=")[1]}
    bundle = tmp_path / "B.tar.gz"
    proc = start(["collect", "--executor", "local", "--nodes", "a,b", "--section-timeout", "120",
                  "--set", "match=^no-such-job$", "-o", str(bundle)], env)
    hanging = lambda: len([p for p in local_leftovers(token) if str(smi) in p]) == 2  # noqa: E731
    out, err, took = interrupt(proc, hanging, signum)
    assert proc.returncode == 130 and took < EXIT_WITHIN_S, (took, err)
    assert "the bundle holds what was collected and says it is incomplete" in err
    assert_partial_bundle(bundle, signum, ["a", "b"])
    _wait_for(lambda: not local_leftovers(token), 5, lambda: local_leftovers(token))


def test_a_second_ctrl_c_exits_at_once_locally(tmp_path: Path, marks: Path, token: str) -> None:
    env = {**os.environ, "RUNBOOK_PATH": str(library(tmp_path, marks)),
           token.split("=")[0]: token.split("=")[1]}
    proc = start(["run", "interruptible", "--executor", "local", "--nodes", "a,b"], env)
    _, err, took = interrupt(proc, lambda: len(list(marks.iterdir())) == 1, signal.SIGINT, again_after=0.05)
    assert proc.returncode == 130 and took < EXIT_WITHIN_S, (took, err)
    assert "Traceback" not in err


# -- over SSH -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster4(_module_cluster_factory) -> Any:
    """Four hosts shared by the SSH tests here: each test leaves none of its processes behind."""
    return _module_cluster_factory(4)


@pytest.mark.parametrize("signum", SIGNALS)
def test_ssh_run_stops_every_remote_probe(cluster4: Any, tmp_path: Path, marks: Path, signum: int) -> None:
    env = {**cluster4.env(), "RUNBOOK_PATH": str(library(tmp_path, marks))}
    proc = start(["run", "interruptible", "--nodes", "node[01-04]", "--format", "json"], env)
    out, err, took = interrupt(proc, lambda: len(list(marks.iterdir())) == 3, signum)
    assert proc.returncode == 130 and took < EXIT_WITHIN_S, (took, err)
    assert_partial_run_report(out, signum, "node01", ["node02", "node03", "node04"])
    assert_nothing_left(cluster4)


def test_ssh_check_stops_every_remote_probe(cluster4: Any, marks: Path) -> None:
    script = (f"touch {marks}/$(hostname); [ $(hostname) = node01 ] && echo quick || exec sleep 300")
    proc = start(["check", "command", "--with", f"run={script}", "--nodes", "node[01-04]",
                  "--timeout", "200", "--format", "json"], cluster4.env())

    def ready() -> bool:  # node01's answer is on its way once its marker is there: give it 1 s
        if len(list(marks.iterdir())) < 4:
            return False
        time.sleep(1.0)
        return True

    out, err, took = interrupt(proc, ready, signal.SIGINT)
    assert proc.returncode == 130 and took < EXIT_WITHIN_S, (took, err)
    report = json.loads(out)
    assert report["incomplete"] is True and report["reason"] == REASON[signal.SIGINT]
    statuses = {n["node"]: (n["status"], n["error"]) for n in report["nodes"]}
    assert statuses.pop("node01") == ("ok", None)
    assert set(statuses.values()) == {("timeout", "interrupted")}
    assert_nothing_left(cluster4)


def test_ssh_collect_writes_an_incomplete_bundle(cluster4: Any, tmp_path: Path) -> None:
    smi = hanging_smi(tmp_path)
    hosts = {h.name: {"env": {"PATH": f"{smi}:{h.session_path}"}} for h in cluster4.hosts}
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(json.dumps({"hosts": hosts}))  # JSON is YAML
    bundle = tmp_path / "B.tar.gz"
    proc = start(["collect", "-i", str(inventory), "--section-timeout", "120",
                  "--set", "match=^no-such-job$", "-o", str(bundle)], cluster4.env())
    hanging = lambda: all(any("nvidia-smi" in p for p in cluster4.processes(h))  # noqa: E731
                          for h in cluster4.names())
    _, err, took = interrupt(proc, hanging, signal.SIGTERM)
    assert proc.returncode == 130 and took < EXIT_WITHIN_S, (took, err)
    assert_partial_bundle(bundle, signal.SIGTERM, cluster4.names())
    assert_nothing_left(cluster4)


def test_ctrl_c_while_a_host_is_still_connecting(cluster4: Any, delay_proxy, tmp_path: Path,
                                                 marks: Path) -> None:
    first = cluster4.hosts[0]
    stuck = delay_proxy(first.address, first.port, 300)
    cluster4.add_alias("stuck01", "node01", stuck.address, stuck.port)
    env = {**cluster4.env(), "RUNBOOK_PATH": str(library(tmp_path, marks))}
    proc = start(["run", "interruptible", "--nodes", "node01,stuck01", "--connect-timeout", "120",
                  "--format", "json"], env)
    out, err, took = interrupt(proc, lambda: stuck.accepted > 0, signal.SIGINT)
    assert proc.returncode == 130 and took < EXIT_WITHIN_S, (took, err)
    nodes = {n["node"]: n for n in json.loads(out)["nodes"]}
    assert (nodes["stuck01"]["status"], nodes["stuck01"]["reason"]) == ("timeout", "step first: interrupted")
    assert_nothing_left(cluster4)


def freeze(cl: Any, host: str, signum: int) -> None:
    """SIGSTOP (or SIGCONT) every process of a host: a machine that stops answering."""
    for pid, _, _ in cl.process_table(host):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            continue


def test_one_ctrl_c_does_not_wait_for_a_frozen_host(make_cluster, tmp_path: Path, marks: Path) -> None:
    cl = make_cluster(3)
    env = {**cl.env(), "RUNBOOK_PATH": str(library(tmp_path, marks))}
    proc = start(["run", "interruptible", "--nodes", "node[01-03]", "--format", "json"], env)
    running = lambda: len(list(marks.iterdir())) == 2  # noqa: E731
    try:
        _wait_for(running, 60, lambda: proc.poll())
        freeze(cl, "node03", signal.SIGSTOP)
        out, err, took = interrupt(proc, running, signal.SIGINT)
    finally:
        freeze(cl, "node03", signal.SIGCONT)
    assert proc.returncode == 130 and took < EXIT_WITHIN_S, (took, err)
    assert_partial_run_report(out, signal.SIGINT, "node01", ["node02", "node03"])
    _wait_for(lambda: not host_leftovers(cl, "node02"), 10, lambda: host_leftovers(cl, "node02"))


def test_a_second_ctrl_c_exits_at_once_while_the_first_waits(make_cluster, tmp_path: Path,
                                                            marks: Path) -> None:
    cl = make_cluster(2)
    env = {**cl.env(), "RUNBOOK_PATH": str(library(tmp_path, marks))}
    proc = start(["run", "interruptible", "--nodes", "node[01-02]", "--format", "json"], env)
    running = lambda: len(list(marks.iterdir())) == 1  # noqa: E731
    try:
        _wait_for(running, 60, lambda: proc.poll())
        freeze(cl, "node02", signal.SIGSTOP)  # the first Ctrl-C now waits (<= 4 s) to kill its probe
        out, err, took = interrupt(proc, running, signal.SIGINT, again_after=0.5)
    finally:
        freeze(cl, "node02", signal.SIGCONT)
    assert proc.returncode == 130, err
    assert took < 1.5, took
    assert "runbook: interrupted again; exiting now" in err and "Traceback" not in err
