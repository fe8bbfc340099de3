"""`port`: is a TCP port reachable, is it listening on this node, and which process owns it."""

from __future__ import annotations

import socket
import time
from typing import Any

from runbook.checks import _procfs
from runbook.checks.base import CheckContext

NAME = "port"
SUMMARY = {
    "en": "TCP port: can we connect, is it listening on this node, which process holds it",
    "zh": "TCP 端口：能否连接、本节点上是否在监听、由哪个进程占用",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "port": {"type": "integer", "minimum": 1, "maximum": 65535,
                 "description": "TCP port, e.g. MASTER_PORT"},
        "host": {"type": "string", "default": "127.0.0.1",
                 "description": "Host to connect to, e.g. MASTER_ADDR"},
        "connect_timeout": {"type": "number", "exclusiveMinimum": 0, "default": 1.0,
                            "description": "Seconds to wait for the TCP connect"},
    },
    "required": ["port"],
    "additionalProperties": False,
}
RESULT_FIELDS = {
    "open": {"type": "boolean", "en": "A TCP connect to host:port succeeded",
             "zh": "成功建立到 host:port 的 TCP 连接"},
    "error": {"type": "string", "en": "Why the connect failed (null when open)",
              "zh": "连接失败的原因（连接成功时为 null）"},
    "listening": {"type": "boolean",
                  "en": "The port is in LISTEN state on this node (/proc/net/tcp, tcp6)",
                  "zh": "本节点上该端口处于 LISTEN 状态（依据 /proc/net/tcp 和 tcp6）"},
    "listen_addresses": {"type": "array",
                         "en": "Local addresses it listens on (127.0.0.1 = this node only)",
                         "zh": "监听的本地地址（127.0.0.1 表示只接受本机连接）"},
    "owner_pids": {"type": "array", "en": "Processes holding the listening socket (if readable)",
                   "zh": "持有该监听套接字的进程 PID（有权限读取时）"},
    "owner_cmdlines": {"type": "array", "en": "Command lines of owner_pids, in the same order",
                       "zh": "owner_pids 对应的命令行，顺序相同"},
    "host": {"type": "string", "en": "The host connected to", "zh": "连接的目标主机"},
    "port": {"type": "integer", "en": "The port checked", "zh": "检查的端口"},
}
DEFAULT_TIMEOUT = 5.0

_LISTEN = "0A"
_CMDLINE_MAX = 300


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    host = str(params.get("host") or "127.0.0.1")
    try:
        port = int(params["port"])
    except (KeyError, TypeError, ValueError):
        return _bad_port(params.get("port"), host)
    if not 0 < port < 65536:
        return _bad_port(port, host)
    wait = min(float(params.get("connect_timeout") or 1.0), ctx.remaining() / 2)
    error = _connect(host, port, wait)
    listeners = listening_sockets(port)
    owners = _owners({inode for inode, _ in listeners}, ctx)
    return {
        "open": error is None,
        "error": error,
        "listening": bool(listeners),
        "listen_addresses": sorted({address for _, address in listeners}),
        "owner_pids": [pid for pid, _ in owners],
        "owner_cmdlines": [cmd for _, cmd in owners],
        "host": host,
        "port": port,
    }


def _bad_port(port: Any, host: str) -> dict[str, Any]:
    return {"open": False, "error": f"invalid port {port!r}", "listening": False,
            "listen_addresses": [], "owner_pids": [], "owner_cmdlines": [], "host": host,
            "port": port}


def _connect(host: str, port: int, wait: float) -> str | None:
    try:
        with socket.create_connection((host, port), timeout=wait):
            return None
    except OSError as exc:  # refused, timed out, unreachable, unknown host
        return str(exc) or type(exc).__name__


def listening_sockets(port: int) -> list[tuple[int, str]]:
    """(inode, local address) of sockets listening on `port` in this network namespace."""
    found: list[tuple[int, str]] = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        text = _procfs.read_text(f"{_procfs.PROC}/net/{table}") or ""
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            address, _, port_hex = fields[1].partition(":")
            if int(port_hex, 16) == port:
                shown = _address(address, family)
                shown = f"[{shown}]" if family == socket.AF_INET6 else shown
                found.append((int(fields[9]), f"{shown}:{port}"))
    return found


def _address(hex_address: str, family: int) -> str:
    """/proc/net/tcp addresses are 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    try:
        return socket.inet_ntop(family, raw)
    except (OSError, ValueError):
        return hex_address


def _owners(inodes: set[int], ctx: CheckContext) -> list[tuple[int, str]]:
    """(pid, cmdline) of processes with an fd on one of the socket inodes."""
    owners: list[tuple[int, str]] = []
    if not inodes:
        return owners
    for pid in _procfs.pids():
        if time.monotonic() > ctx.deadline - 0.5:
            break  # a huge process table: report the owners found so far
        try:
            if not inodes & _procfs.socket_inodes_of(pid):
                continue
            cmd = " ".join(_procfs.cmdline(pid))
        except (OSError, ValueError):
            continue  # not ours to read, or gone
        owners.append((pid, cmd[:_CMDLINE_MAX]))
    return owners
