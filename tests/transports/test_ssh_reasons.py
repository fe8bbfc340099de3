"""The SSH transport's reasons for peers that are not a working sshd, on real loopback sockets
(no sshd needed): nothing listening, a server that never speaks, one that hangs up at once;
and close() cutting a connect short."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runbook.transports import Node
from runbook.transports.ssh import SshTransport

SYSTEM = {"check": "system", "with": {}}


@pytest.fixture(autouse=True)
def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ~/.ssh of the machine running the tests: its config must not change the answers."""
    monkeypatch.setenv("HOME", str(tmp_path))


class Peer:
    """A TCP server on 127.0.0.1 that accepts and then stays silent, or hangs up at once."""

    def __init__(self, hang_up: bool) -> None:
        self.hang_up = hang_up
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.kept: list[socket.socket] = []
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            if self.hang_up:
                conn.close()
            else:
                self.kept.append(conn)

    def close(self) -> None:
        self.stop.set()
        self.server.close()
        for conn in self.kept:
            conn.close()


@pytest.fixture
def peer() -> Iterator[type[Peer]]:
    made: list[Peer] = []

    def make(hang_up: bool) -> Peer:
        made.append(Peer(hang_up))
        return made[-1]

    yield make  # type: ignore[misc]
    for p in made:
        p.close()


def node(port: int) -> Node:
    return Node("peer", "ssh", {"host": "127.0.0.1", "port": port})


def ask(transport: SshTransport, port: int) -> tuple[str, str, float]:
    began = time.monotonic()
    try:
        answer = transport.run_check(node(port), SYSTEM, 10)
    finally:
        transport.close()
    return answer.status, answer.error or "", time.monotonic() - began


def test_nothing_listening_is_connection_refused() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    status, error, _ = ask(SshTransport(connect_timeout=5), port)
    assert status == "unreachable"
    assert error.startswith(f"connection refused by 127.0.0.1:{port}: nothing listens there")


def test_a_server_that_never_speaks_is_too_slow_within_the_connect_timeout(peer) -> None:
    silent = peer(hang_up=False)
    status, error, took = ask(SshTransport(connect_timeout=1.5), silent.port)
    assert status == "unreachable"
    assert error.startswith(f"connection to 127.0.0.1:{silent.port} too slow: the SSH handshake did "
                            "not finish within 1.5s (--connect-timeout)")
    assert 1.3 < took < 1.5 + 4, took  # generous: the machine may be loaded


def test_a_server_that_hangs_up_at_once_is_not_called_slow(peer) -> None:
    rude = peer(hang_up=True)
    status, error, took = ask(SshTransport(connect_timeout=5), rude.port)
    assert status == "unreachable"
    assert error.startswith(f"no SSH greeting from 127.0.0.1:{rude.port}: the other side closed")
    assert took < 4


def test_close_cuts_a_connect_short(peer) -> None:
    silent = peer(hang_up=False)
    transport = SshTransport(connect_timeout=60)
    answers: list[object] = []
    thread = threading.Thread(target=lambda: answers.append(transport.run_check(node(silent.port),
                                                                                SYSTEM, 10)))
    thread.start()
    deadline = time.monotonic() + 10
    while not silent.kept and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # ssh now waits for the banner
    began = time.monotonic()
    transport.close()
    thread.join(timeout=10)
    assert not thread.is_alive() and time.monotonic() - began < 3
    assert answers[0].error == "interrupted: the run is stopping"  # type: ignore[attr-defined]
