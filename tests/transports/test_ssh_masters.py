"""Reused SSH connections against real sshds (scenarios/clusters/ssh.py): a run within the window
opens its session on the master the last run left, without logging in again; a master that is
killed, stopped, or whose connection or sshd is gone is replaced or named, never waited on."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runbook.transports import Node, ProbeAnswer
from runbook.transports import _masters as masters
from runbook.transports._mux import MuxConnection, MuxRefused
from runbook.transports.ssh import SshTransport
from tests import cluster_fixture
from tests.polling import wait_for

make_cluster = cluster_fixture.make_cluster
pytestmark = cluster_fixture.needs_cluster

SYSTEM = {"check": "system", "with": {}}
BOUND_S = 60  # a check that has not answered by then hangs: the thing these tests rule out


@pytest.fixture
def control(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The masters' directory of this test alone (short: a socket path has 107 bytes)."""
    runtime = Path(tempfile.mkdtemp(prefix="rbm-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    yield runtime / "runbook-ssh"
    if (runtime / "runbook-ssh").is_dir():
        for master in masters.masters(runtime / "runbook-ssh"):
            masters.stop(master)
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture
def ssh_home(make_cluster, monkeypatch: pytest.MonkeyPatch, control: Path) -> Callable[..., Any]:
    def make(n: int, **kwargs: Any) -> Any:
        cl = make_cluster(n, **kwargs)
        monkeypatch.setenv("HOME", str(cl.home))
        return cl

    return make


def one_run(node: str = "node01", **options: Any) -> ProbeAnswer:
    """A run: its own transport, one check, closed (Ctrl-C or the end of `runbook run`).
    Run in a thread joined within BOUND_S, so that a hang fails the test instead of stalling it."""
    answers: list[ProbeAnswer] = []

    def run() -> None:
        transport = SshTransport(**{"connect_timeout": 10, **options})
        try:
            answers.append(transport.run_check(Node(node, "ssh"), SYSTEM, 10))
        finally:
            transport.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND_S)
    assert not thread.is_alive(), f"the run on {node} did not end within {BOUND_S}s"
    return answers[0]


def the_master(control: Path) -> masters.Master:
    found = masters.masters(control)
    assert len(found) == 1, found
    return found[0]


def logins(cl: Any, host: str) -> list[int]:
    """The node's sshd processes that serve one SSH connection each (not the listener)."""
    return [pid for pid, _, args in cl.process_table(host)
            if args.startswith("sshd: ") and "[listener]" not in args]


def test_a_second_run_opens_its_session_on_the_first_runs_connection(ssh_home, control: Path) -> None:
    cl = ssh_home(1)
    assert one_run().status == "ok"
    master = the_master(control)
    assert master.pid and master.host == "node01"
    assert stat.S_IMODE(control.stat().st_mode) == 0o700 and control.stat().st_uid == os.getuid()
    assert len(str(master.path).encode()) < masters.SUN_PATH_MAX
    first = logins(cl, "node01")
    assert len(first) == 1  # the master's connection outlives the run

    again = one_run()
    assert again.status == "ok" and again.result
    assert the_master(control).pid == master.pid  # the same master ...
    assert logins(cl, "node01") == first  # ... over the same connection: no second login


def test_a_master_holds_none_of_the_users_forwardings(ssh_home, control: Path) -> None:
    cl = ssh_home(1)
    with socket.socket() as probe:  # a free port for the user's LocalForward
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with cl.ssh_config.open("a") as config:
        config.write(f"\nHost *\n    LocalForward 127.0.0.1:{port} 127.0.0.1:9\n    ForwardAgent yes\n")
    assert one_run().status == "ok"
    assert the_master(control).pid  # it outlives the run ...
    with socket.socket() as client, pytest.raises(ConnectionRefusedError):
        client.connect(("127.0.0.1", port))  # ... and listens on none of the user's ports


def test_a_killed_master_is_replaced(ssh_home, control: Path) -> None:
    ssh_home(1)
    assert one_run().status == "ok"
    old = the_master(control)
    os.kill(old.pid, signal.SIGKILL)
    wait_for(lambda: not masters.is_master_of(old.pid, old.path))
    assert old.path.is_socket()  # left behind: nothing listens on it now
    assert one_run().status == "ok"
    new = the_master(control)
    assert new.path == old.path and new.pid not in (None, old.pid)


def test_a_stopped_master_is_replaced_not_waited_for(ssh_home, control: Path) -> None:
    ssh_home(1)
    assert one_run().status == "ok"
    old = the_master(control)
    os.kill(old.pid, signal.SIGSTOP)  # it accepts connections (the kernel does) but never answers
    try:
        assert one_run().status == "ok"
        wait_for(lambda: not masters.is_master_of(old.pid, old.path))  # killed as stale
    finally:
        if masters.is_master_of(old.pid, old.path):
            os.kill(old.pid, signal.SIGKILL)
    assert the_master(control).pid not in (None, old.pid)


def test_a_master_whose_connection_no_longer_answers_is_replaced(ssh_home, control: Path) -> None:
    cl = ssh_home(1)
    assert one_run().status == "ok"
    old = the_master(control)
    [stuck] = logins(cl, "node01")
    os.kill(stuck, signal.SIGSTOP)  # the node's end of the master's connection freezes
    try:
        answer = one_run(connect_timeout=3)  # the session it asks for never opens
    finally:
        os.kill(stuck, signal.SIGKILL)
    assert answer.status == "ok" and answer.result  # over a new connection
    assert the_master(control).pid not in (None, old.pid)


def test_a_master_whose_sshd_is_gone_is_not_hung_on(ssh_home, control: Path) -> None:
    cl = ssh_home(1)
    assert one_run().status == "ok"
    assert cl.kill_sshd("node01")
    answer = one_run(connect_timeout=3)
    assert answer.status == "unreachable"
    assert answer.error.startswith("connection refused by 127.0.0.2")
    wait_for(lambda: not masters.masters(control))  # its master ended; no stale socket is left


def test_a_window_of_zero_keeps_no_connection(ssh_home, control: Path) -> None:
    cl = ssh_home(1)
    assert one_run(persist=0).status == "ok"
    assert not control.exists() or not any(control.iterdir())
    wait_for(lambda: not logins(cl, "node01"))


def test_ssh_masters_lists_the_kept_connections_and_stop_ends_them(ssh_home, control: Path,
                                                                   runbook_cli) -> None:
    cl = ssh_home(2)
    assert one_run("node01").status == "ok" and one_run("node02").status == "ok"
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "engine")}  # this tree's runbook
    listed = runbook_cli("ssh-masters", env=env)
    assert listed.returncode == 0, listed.stderr
    assert sorted(line.split()[0] for line in listed.stdout.splitlines()) == ["node01", "node02"]
    stopped = runbook_cli("ssh-masters", "--stop", env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith("stopped 2 SSH connection(s)")
    assert not masters.masters(control)
    wait_for(lambda: not logins(cl, "node01") and not logins(cl, "node02"))



def test_a_node_that_refuses_one_more_session_gets_a_connection_of_the_runs_own(
        ssh_home, control: Path) -> None:
    cl = ssh_home(1)
    host = cl.hosts[0]
    config = host.sshd_config.read_text().replace("MaxSessions 100", "MaxSessions 1")
    host.sshd_config.write_text(config)
    os.kill(host.ns_init_pid, signal.SIGHUP)  # sshd re-reads its config: new connections get it
    wait_for(lambda: one_run().status == "ok")  # on a master made under MaxSessions 1
    master = the_master(control)
    opened: list[Any] = []

    def open_busy() -> bool:  # the run's own session may still be closing at sshd (MaxSessions 1)
        conn = MuxConnection(str(master.path), time.monotonic() + 10)
        try:
            opened.append(conn.open_session("exec sleep 60", time.monotonic() + 10))  # another run's
        except MuxRefused:
            conn.close()
            return False
        return True

    wait_for(open_busy)
    busy = opened[0]
    try:
        second = MuxConnection(str(master.path), time.monotonic() + 10)
        with pytest.raises(MuxRefused):  # the node allows no second session on that connection
            second.open_session("true", time.monotonic() + 10)
        second.close()
        answer = one_run()
        assert answer.status == "ok" and answer.result  # over a connection of its own ...
        assert the_master(control).pid == master.pid  # ... and the shared master is left alone
        assert busy.poll() is None
    finally:
        busy.kill()


def _spoil(cl: Any, kind: str, tmp: Path) -> None:
    """Replace the known key of `kind` ("ed25519" or "ecdsa") of every host by a stranger's."""
    other = tmp / f"other_{kind}"
    size = ["-b", "256"] if kind == "ecdsa" else []
    subprocess.run(["ssh-keygen", "-q", "-t", kind, *size, "-N", "", "-f", str(other)],
                   check=True, capture_output=True, timeout=30)
    stranger = " ".join(other.with_name(other.name + ".pub").read_text().split()[:2])
    key_type = stranger.split()[0]
    lines = [f"{line.split()[0]} {stranger}" if line.split()[1] == key_type else line
             for line in cl.known_hosts.read_text().splitlines()]
    cl.known_hosts.write_text("\n".join(lines) + "\n")


def test_a_new_connection_checks_the_hosts_ecdsa_key_where_known_hosts_has_it(ssh_home, tmp_path) -> None:
    """The host's ECDSA P-256 key, cheaper for the client to check than ed25519 (_known_hosts.py),
    is the one checked where known_hosts holds both: a wrong ed25519 line is not even read."""
    cl = ssh_home(1)
    _spoil(cl, "ed25519", tmp_path)
    assert one_run().status == "ok"


def test_where_the_lookup_is_wrong_ssh_chooses_as_it_would_alone(ssh_home, control, tmp_path) -> None:
    """A wrong guess costs one handshake: the master is made again with ssh's own choice, which
    checks the ed25519 key; with neither key right, ssh's own reason."""
    cl = ssh_home(1)
    _spoil(cl, "ecdsa", tmp_path)  # known_hosts has an ECDSA key, but not this host's
    assert one_run().status == "ok"
    masters.stop(the_master(control))
    _spoil(cl, "ed25519", tmp_path)
    refused = one_run()
    assert refused.status == "unreachable" and "changed: it does not match known_hosts" in refused.error


def test_the_users_host_key_algorithms_stand(ssh_home, tmp_path) -> None:
    cl = ssh_home(1)
    _spoil(cl, "ed25519", tmp_path)
    with cl.ssh_config.open("a") as config:
        config.write("\nHost *\n    HostKeyAlgorithms ssh-ed25519\n")
    refused = one_run()  # ssh-ed25519 as the user asks, its wrong line read, refused
    assert refused.status == "unreachable" and "changed: it does not match known_hosts" in refused.error
