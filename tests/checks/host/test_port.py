"""`port` against real sockets opened by the test."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from runbook.checks.host import port


def test_listening_socket_owned_by_us(make_ctx) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        number = server.getsockname()[1]
        result = port.run({"port": number}, make_ctx(3.0))
    assert result["open"] is True
    assert result["error"] is None
    assert result["listening"] is True
    assert result["listen_addresses"] == [f"127.0.0.1:{number}"]
    assert os.getpid() in result["owner_pids"]
    index = result["owner_pids"].index(os.getpid())
    argv0 = Path("/proc/self/cmdline").read_bytes().split(b"\0")[0].decode()
    assert result["owner_cmdlines"][index].startswith(argv0)  # this test's process
    assert result["host"] == "127.0.0.1" and result["port"] == number


def test_ipv6_listener(make_ctx) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as server:
        try:
            server.bind(("::1", 0))
        except OSError as exc:
            pytest.skip(f"cannot bind ::1: {exc}")
        server.listen(1)
        number = server.getsockname()[1]
        result = port.run({"port": number, "host": "::1"}, make_ctx(3.0))
    assert result["open"] is True
    assert result["listen_addresses"] == [f"[::1]:{number}"]
    assert os.getpid() in result["owner_pids"]


def test_closed_port(make_ctx) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))  # bound, never listening: connect is refused
        number = probe.getsockname()[1]
        result = port.run({"port": number, "connect_timeout": 0.5}, make_ctx(3.0))
    assert result["open"] is False
    assert result["listening"] is False
    assert "refused" in result["error"].lower()
    assert result["owner_pids"] == [] and result["owner_cmdlines"] == []
    assert result["listen_addresses"] == []


def test_unreachable_host_is_bounded(make_ctx) -> None:
    start = time.monotonic()
    result = port.run({"port": 29500, "host": "192.0.2.1", "connect_timeout": 0.3},
                      make_ctx(3.0))
    assert time.monotonic() - start < 1.5
    assert result["open"] is False
    assert result["error"]


def test_invalid_port_is_a_result(make_ctx) -> None:
    for given in ("", "http", 70000):
        result = port.run({"port": given}, make_ctx(3.0))
        assert result["open"] is False and result["listening"] is False
        assert result["error"] == f"invalid port {given!r}"
    assert port.run({"port": "22", "connect_timeout": 0.2}, make_ctx(3.0))["port"] == 22
