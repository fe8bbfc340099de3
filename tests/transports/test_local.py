"""The local transport: the real probe bundle in a child Python, killed on timeout."""

from __future__ import annotations

import io
import os
import threading
import time
import zipfile
from pathlib import Path

import runbook
from runbook.transports import Node
from runbook.transports.bundle import bundle_bytes, bundle_name, local_bundle
from runbook.transports.local import LocalTransport


def test_bundle_is_stable_and_holds_only_probe_and_checks(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = local_bundle()
    assert path.name == bundle_name() and path.read_bytes() == bundle_bytes()
    names = zipfile.ZipFile(path).namelist()
    assert "__main__.py" in names and "runbook/probe/__init__.py" in names
    assert all(n.startswith(("runbook/probe/", "runbook/checks/", "runbook/__init__", "__main__"))
               for n in names)


def test_bundle_holds_every_checks_subpackage_in_sorted_order() -> None:
    package = Path(runbook.__file__).resolve().parent
    expected = sorted(f"runbook/{p.relative_to(package).as_posix()}"  # code and its data tables
                      for pattern in ("*.py", "*.json") for p in (package / "checks").rglob(pattern))
    names = [n for n in zipfile.ZipFile(io.BytesIO(bundle_bytes())).namelist()
             if n.startswith("runbook/checks/")]
    assert names == expected
    assert "runbook/checks/gpu/gpu.py" in names and "runbook/checks/distributed/_torch_worker.py" in names
    assert "runbook/checks/distributed/known_regressions.json" in names


def test_a_check_runs_and_answers(tmp_path: Path) -> None:
    answer = LocalTransport().run_check(
        Node("localhost"), {"check": "command", "with": {"run": "echo hi"}}, 5)
    assert answer.status == "ok"
    assert answer.result["stdout"] == "hi\n" and answer.result["timed_out"] is False


def test_a_hanging_check_is_killed_with_its_children_within_timeout(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    start = time.monotonic()
    answer = LocalTransport().run_check(
        Node("localhost"),
        {"check": "command", "with": {"run": f"sleep 60 & echo $! > {marker}; wait"}}, 1.0)
    elapsed = time.monotonic() - start
    assert answer.status == "ok" and answer.result["timed_out"] is True
    assert elapsed < 2.0
    child = int(marker.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or _is_zombie(child)


def test_a_missing_python_is_an_error_not_a_crash() -> None:
    answer = LocalTransport(python="/nonexistent/python3").run_check(
        Node("localhost"), {"check": "system", "with": {}}, 5)
    assert answer.status == "error" and "cannot start" in answer.error


def test_unknown_check_type_on_the_node_is_an_error() -> None:
    answer = LocalTransport().run_check(Node("localhost"), {"check": "nope", "with": {}}, 5)
    assert answer.status == "error" and "unknown check type 'nope'" in answer.error


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"
    except OSError:
        return True


def test_environment_of_the_probe_is_ours() -> None:
    answer = LocalTransport(env={**os.environ, "RB_MARK": "42"}).run_check(
        Node("localhost"), {"check": "command", "with": {"run": "echo $RB_MARK"}}, 5)
    assert answer.result["stdout"].strip() == "42"


def test_probe_is_killed_by_transport_timeout_with_inner_commands(tmp_path: Path) -> None:
    marker = tmp_path / "inner.pid"
    # The check believes it has 60 s; the transport gives 1 s, then stops the probe.
    transport = LocalTransport()
    start = time.monotonic()
    answer = _run_with_short_transport_timeout(transport, marker)
    assert time.monotonic() - start < 2.5
    assert answer.result["timed_out"] is True
    inner = int(marker.read_text())
    time.sleep(0.3)
    assert not Path(f"/proc/{inner}").exists() or _is_zombie(inner)


def _run_with_short_transport_timeout(transport: LocalTransport, marker: Path):
    import runbook.transports.local as local

    request = {"check": "command", "with": {"run": f"echo $$ > {marker}; exec sleep 60"},
               "timeout": 60}
    original = local.KILL_GRACE_S
    try:
        local.KILL_GRACE_S = -59.0  # the transport gives up at 1 s while the probe waits 60 s
        return transport.run_check(Node("localhost"), request, 60)
    finally:
        local.KILL_GRACE_S = original


def test_close_stops_running_probes_and_their_commands_at_once(tmp_path: Path) -> None:
    transport = LocalTransport()
    answers: list = []
    markers = [tmp_path / f"cmd{i}.pid" for i in range(2)]
    threads = [threading.Thread(target=lambda m=m: answers.append(transport.run_check(
        Node("localhost"), {"check": "command", "with": {"run": f"echo $$ > {m}; exec sleep 60"}}, 60)))
        for m in markers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while not all(m.exists() and m.read_text().strip() for m in markers) and time.monotonic() < deadline:
        time.sleep(0.05)
    began = time.monotonic()
    transport.close()
    for thread in threads:
        thread.join(timeout=10)
    assert time.monotonic() - began < 3, "close() waited for the checks"
    assert [a.error for a in answers] == ["interrupted: the run is stopping"] * 2
    for marker in markers:
        pid = int(marker.read_text())
        deadline = time.monotonic() + 5
        while Path(f"/proc/{pid}").exists() and not _is_zombie(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid), f"sleep {pid} was left behind"
    late = transport.run_check(Node("localhost"), {"check": "system", "with": {}}, 5)
    assert (late.status, late.error) == ("error", "interrupted: the run is stopping")
