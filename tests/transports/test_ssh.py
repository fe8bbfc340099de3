"""The SSH transport against real sshds (scenarios/clusters/ssh.py): each broken host gets its own
one-line reason, and close() (Ctrl-C) stops busy probes and pending connects at once."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runbook.transports import Node
from runbook.transports import _openssh as openssh
from runbook.transports.bundle import bundle_name
from runbook.transports.ssh import SshTransport
from tests import cluster_fixture
from tests.polling import wait_for

make_cluster = cluster_fixture.make_cluster
delay_proxy = cluster_fixture.delay_proxy
pytestmark = cluster_fixture.needs_cluster

SYSTEM = {"check": "system", "with": {}}


@pytest.fixture
def ssh_home(make_cluster, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """make(n, **kwargs) -> a cluster whose ~/.ssh the transport reads (HOME points at its client side)."""

    def make(n: int, **kwargs: Any) -> Any:
        cl = make_cluster(n, **kwargs)
        monkeypatch.setenv("HOME", str(cl.home))
        return cl

    return make


def hang(marker: Path) -> dict[str, Any]:
    return {"check": "command", "with": {"run": f"touch {marker}; exec sleep 300"}}


def test_a_full_disk_is_named_and_leaves_no_half_copied_bundle(ssh_home) -> None:
    cl = ssh_home(2)
    home = cl.fill_disk("node02")
    transport = SshTransport(connect_timeout=10)
    try:
        full = transport.run_check(Node("node02", "ssh"), SYSTEM, 10)
        fine = transport.run_check(Node("node01", "ssh"), SYSTEM, 10)
    finally:
        transport.close()
    assert full.status == "unreachable"
    assert full.error == ("cannot copy the probe to ~/.cache/runbook on the node: No space left on "
                          "device (free some space on the node's home file system)")
    assert fine.status == "ok" and fine.result
    listing = cl.run_in("node02", ["find", str(home), "-type", "f"]).stdout.split()
    assert sorted(Path(p).name for p in listing) == ["filler", "probe"]


def test_a_changed_host_key_is_refused_even_when_new_keys_are_accepted(ssh_home) -> None:
    cl = ssh_home(1, wrong_host_key={"node01"})
    transport = SshTransport(connect_timeout=10, accept_new_host_keys=True)
    try:
        answer = transport.run_check(Node("node01", "ssh"), SYSTEM, 10)
    finally:
        transport.close()
    host = cl.hosts[0]
    assert answer.status == "unreachable"
    assert answer.error.startswith(f"host key of {host.address} changed: it does not match known_hosts")
    assert f"ssh-keygen -R '[{host.address}]:{host.port}'" in answer.error


def test_no_python_says_how_to_point_python_at_one(ssh_home) -> None:
    cl = ssh_home(1, python_missing={"node01"})
    transport = SshTransport(connect_timeout=10)
    try:
        missing = transport.run_check(Node("node01", "ssh"), SYSTEM, 10)
    finally:
        transport.close()
    assert missing.status == "error"
    assert missing.error.startswith("python3 not found on the node's PATH: point --python at")
    # The advice works: the same host with --python naming a real interpreter answers...
    real = os.path.realpath(shutil.which("python3") or "python3")
    pointed = SshTransport(connect_timeout=10, python=real)
    try:
        assert pointed.run_check(Node("node01", "ssh"), SYSTEM, 10).status == "ok"
    finally:
        pointed.close()
    # ... and a wrong path is named as such.
    wrong = SshTransport(connect_timeout=10, python="/nowhere/bin/python3")
    try:
        answer = wrong.run_check(Node("node01", "ssh"), SYSTEM, 10)
    finally:
        wrong.close()
    assert answer.error.startswith("/nowhere/bin/python3 not found on the node: check the path")
    wait_for(lambda: not _leftovers(cl, "node01"), 5, lambda: _leftovers(cl, "node01"))


def test_a_slow_host_concludes_and_a_stuck_one_times_out_within_connect_timeout(
        ssh_home, delay_proxy) -> None:
    cl = ssh_home(1)
    host = cl.hosts[0]
    slow, stuck = delay_proxy(host.address, host.port, 2.0), delay_proxy(host.address, host.port, 120)
    cl.add_alias("slow01", "node01", slow.address, slow.port)
    cl.add_alias("stuck01", "node01", stuck.address, stuck.port)
    transport = SshTransport(connect_timeout=4)
    try:
        began = time.monotonic()
        fine = transport.run_check(Node("slow01", "ssh"), SYSTEM, 10)
        slow_s = time.monotonic() - began
        began = time.monotonic()
        failed = transport.run_check(Node("stuck01", "ssh"), SYSTEM, 10)
        stuck_s = time.monotonic() - began
    finally:
        transport.close()
    assert fine.status == "ok" and slow_s >= 2.0
    assert failed.status == "unreachable"
    assert failed.error.startswith(f"connection to {stuck.address}:{stuck.port} too slow: the SSH "
                                   "handshake did not finish within 4s (--connect-timeout)")
    assert 3.5 < stuck_s < 4 + 6, stuck_s  # generous: the machine may be loaded


def test_close_kills_busy_probes_on_every_node_at_once(ssh_home, tmp_path: Path) -> None:
    cl = ssh_home(3)
    transport = SshTransport(connect_timeout=10)
    answers: dict[str, Any] = {}
    threads = [threading.Thread(target=lambda n=name: answers.__setitem__(
        n, transport.run_check(Node(n, "ssh"), hang(tmp_path / n), 120))) for name in cl.names()]
    for thread in threads:
        thread.start()
    wait_for(lambda: all((tmp_path / n).exists() for n in cl.names()), 30)
    began = time.monotonic()
    transport.close()
    for thread in threads:
        thread.join(timeout=10)
    assert time.monotonic() - began < 8, "close() waited for the checks"
    assert {a.error for a in answers.values()} == {"interrupted: the run is stopping"}
    for name in cl.names():
        wait_for(lambda n=name: not _leftovers(cl, n), 5, lambda n=name: _leftovers(cl, n))
    # Nothing new starts after close().
    late = transport.run_check(Node("node01", "ssh"), SYSTEM, 10)
    assert late.status == "error" and late.error == "interrupted: the run is stopping"


def test_close_cancels_a_connect_under_way(ssh_home, delay_proxy) -> None:
    cl = ssh_home(1)
    stuck = delay_proxy(cl.hosts[0].address, cl.hosts[0].port, 120)
    cl.add_alias("stuck01", "node01", stuck.address, stuck.port)
    transport = SshTransport(connect_timeout=60)
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(
        transport.run_check(Node("stuck01", "ssh"), SYSTEM, 10)))
    thread.start()
    wait_for(lambda: stuck.accepted > 0, 20)
    time.sleep(0.3)  # ssh is now waiting for the banner
    began = time.monotonic()
    transport.close()
    thread.join(timeout=15)
    assert not thread.is_alive() and time.monotonic() - began < 5
    assert answers[0].error == "interrupted: the run is stopping"


def test_the_bundle_is_sent_once_per_node_and_version(ssh_home) -> None:
    cl = ssh_home(1)
    first = SshTransport(connect_timeout=10)
    try:
        assert first.run_check(Node("node01", "ssh"), SYSTEM, 10).status == "ok"
    finally:
        first.close()
    bundle = cl.hosts[0].home / ".cache" / "runbook" / bundle_name()
    before = bundle.stat()
    second = SshTransport(connect_timeout=10)  # a later run: the node already has this version
    try:
        answers = [second.run_check(Node("node01", "ssh"), SYSTEM, 10) for _ in range(3)]
    finally:
        second.close()
    assert [a.status for a in answers] == ["ok"] * 3
    after = bundle.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert [p.name for p in bundle.parent.iterdir()] == [bundle.name]  # no temporary left


def test_a_probe_that_stops_answering_is_stopped_and_the_next_check_starts_afresh(
        ssh_home, tmp_path: Path) -> None:
    cl = ssh_home(1)
    transport = SshTransport(connect_timeout=10)
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(
        transport.run_check(Node("node01", "ssh"), hang(tmp_path / "m"), 3)))
    try:
        thread.start()
        wait_for(lambda: (tmp_path / "m").exists(), 30)
        probes = [pid for pid, _, args in cl.process_table("node01") if "runbook-probe" in args]
        for pid in probes:  # a probe too stuck to answer, even with its own timeout
            os.kill(pid, signal.SIGSTOP)
        thread.join(timeout=20)
        for pid in probes:
            os.kill(pid, signal.SIGCONT)
        assert answers and answers[0].status == "ok" and answers[0].result["timed_out"] is True
        assert "the probe was killed on the node" in answers[0].result["reason"]
        # the probe, continued, finds its input ended and stops its check's processes: seconds on a
        # loaded 2-core CI machine (5 s once was too few there), far under the check's `sleep 300`
        wait_for(lambda: not _leftovers(cl, "node01"), 20, lambda: _leftovers(cl, "node01"))
        again = transport.run_check(Node("node01", "ssh"), SYSTEM, 10)
        assert again.status == "ok" and again.result
    finally:
        transport.close()


def _kex_with(home: Path, host: str) -> str:
    """The key exchange `ssh` agrees on with `host` under the config the transport hands it."""
    argv = ["ssh", "-F", openssh.write_config(str(home)), "-T", "-o", "BatchMode=yes",
            "-o", "LogLevel=DEBUG1", "--", host, "true"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    found = re.search(r"kex: algorithm: (\S+)", done.stderr)
    assert done.returncode == 0 and found, done.stderr[-600:]
    return found[1]


def test_the_key_exchange_is_p256_unless_the_users_config_names_one(ssh_home) -> None:
    if openssh.ssh_version() < (8, 2):
        pytest.skip("OpenSSH before 8.2 has no `^` to put a key exchange first")
    system = [openssh.SYSTEM_CONFIG, *openssh.SYSTEM_CONFIG.parent.glob("ssh_config.d/*.conf")]
    if any("kexalgorithms" in path.read_text(errors="replace").lower() for path in system if path.is_file()):
        pytest.skip(f"{openssh.SYSTEM_CONFIG} names its own key exchanges, which win")
    cl = ssh_home(1)
    assert _kex_with(cl.home, "node01") == "ecdh-sha2-nistp256"  # the client's cheapest
    with cl.ssh_config.open("a") as config:  # the user's choice wins over the transport's
        config.write("\nHost *\n    KexAlgorithms curve25519-sha256\n")
    assert _kex_with(cl.home, "node01") == "curve25519-sha256"


def _leftovers(cl: Any, host: str) -> list[str]:
    return [p for p in cl.processes(host) if "runbook-probe" in p or "sleep 300" in p]

