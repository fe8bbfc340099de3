"""`runbook mcp` on the command line: without the SDK, with bad flags, with an audit log it cannot
write, and serving streamable HTTP on 127.0.0.1 only."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # not from tests.mcp.inmemory: that needs the SDK
INSTALL = "pip install 'runbook[mcp]'"
UP_WITHIN_S = 30.0
LOOPBACK_HEX = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it


def test_without_the_sdk_it_says_how_to_install_it_in_one_line() -> None:
    code = "import sys; sys.modules['mcp'] = None\nfrom runbook.cli import main\nsys.exit(main(['mcp']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT / "engine")})
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and INSTALL in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("flags, why", [
    (["--port", "8765"], "--port goes with --http"),
    (["--http", "--port", "70000"], "--port 70000: not a port"),
    (["--timeout", "0"], "--timeout 0: must be a positive number of seconds"),
    (["--max-nodes", "0"], "must be at least 1"),
])
def test_bad_flags_are_one_line_usage_errors(runbook_cli, flags: list[str], why: str) -> None:  # type: ignore[no-untyped-def]
    out = runbook_cli("mcp", *flags)
    assert out.returncode == 2 and why in out.stderr and "Traceback" not in out.stderr


def test_an_audit_log_it_cannot_write_stops_it_before_it_serves(runbook_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK is not installed")
    (tmp_path / "file").write_text("")
    audit = tmp_path / "file" / "audit.jsonl"  # under a file: no folder can be made there
    out = runbook_cli("mcp", "--audit-log", str(audit))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert out.stderr.startswith(f"runbook mcp: --audit-log {audit}: cannot be written")


def test_http_serves_the_tools_on_loopback_only(tmp_path: Path) -> None:
    pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK is not installed")
    import anyio
    from mcp import Client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "runbook", "mcp", "--http", "--port", str(port),
                               "--audit-log", str(tmp_path / "audit.jsonl")], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT / "engine"), "RUNBOOK_LANG": "en"})
    try:
        _wait_listening(port, server)
        assert _listening_addresses(port) == {LOOPBACK_HEX}

        async def ask() -> tuple[list[str], str]:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=30) as client:
                tools = await client.list_tools()
                found = await client.call_tool("search", {"query": "NCCL timeout", "top": 1})
                return [t.name for t in tools.tools], found.structured_content["results"][0]["id"]

        names, first = anyio.run(ask)
        assert "run_runbook" in names and first == "nccl-errors"
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert server.returncode == 130 and "Traceback" not in stderr, stderr


def _wait_listening(port: int, server: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + UP_WITHIN_S
    while time.monotonic() < deadline:
        assert server.poll() is None, server.communicate()[1]
        if _listening_addresses(port):
            return
        time.sleep(0.1)
    raise AssertionError(f"runbook mcp --http did not listen on port {port} within {UP_WITHIN_S:g}s")


def _listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on `port` (IPv4, hex as /proc writes them)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(address)
    return found
