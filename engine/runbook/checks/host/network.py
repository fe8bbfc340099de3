"""`network`: this node's network links, InfiniBand ports, the rendezvous master, a port's owner.

Interfaces and InfiniBand ports are read from /sys; the master (MASTER_ADDR:MASTER_PORT,
from the parameters, the training process's environment or the probe's) is tried with one
TCP connect; a local port's owner comes from /proc/net/tcp as in the `port` check.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

from runbook.checks import _procfs
from runbook.checks.base import CheckContext
from runbook.checks.host.port import _owners, listening_sockets

NAME = "network"
SUMMARY = {
    "en": "Network links and InfiniBand ports of the node, whether MASTER_ADDR:MASTER_PORT answers, "
          "and which process holds a port",
    "zh": "节点的网络链路和 InfiniBand 端口、MASTER_ADDR:MASTER_PORT 是否可连接，以及端口被哪个进程占用",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "master_addr": {"type": "string",
                        "description": "Rendezvous host; default MASTER_ADDR of the process `pid`, "
                                       "else of the probe's environment"},
        "master_port": {"type": ["integer", "string"],
                        "description": "Rendezvous port; default MASTER_PORT, found like master_addr"},
        "pid": {"type": ["integer", "string"],
                "description": 'Training process whose environment gives MASTER_ADDR/PORT ("" = none)'},
        "port": {"type": ["integer", "string"],
                 "description": 'Local TCP port: is it bound, and by whom ("" = do not check)'},
        "ifaces": {"type": "array", "items": {"type": "string"},
                   "description": "Only these interfaces (lo included when named); default all but lo"},
        "connect_timeout": {"type": "number", "exclusiveMinimum": 0, "default": 2.0,
                            "description": "Seconds to wait for the TCP connect to the master"},
        "sys_root": {"type": "string", "default": "/sys", "description": "for tests"},
    },
    "additionalProperties": False,
}
_IFACE_FIELDS = "name, operstate, admin_up, carrier, speed_mbps, mtu, physical"
_IB_FIELDS = "device, port, state, phys_state, rate, link_layer, link_downed"
RESULT_FIELDS = {
    "interfaces": {"type": "array",
                   "en": f"Network interfaces from /sys/class/net: {{{_IFACE_FIELDS}}} (physical: backed "
                         "by a device, not a bridge/veth/tunnel; null = not reported)",
                   "zh": f"/sys/class/net 中的网络接口：{{{_IFACE_FIELDS}}}（physical 表示有实际设备，"
                         "而非网桥、veth 或隧道；null 表示无法读取）"},
    "down": {"type": "array",
             "en": "Physical interfaces configured up (or named in ifaces) without a link: no carrier, "
                   "or operstate down",
             "zh": "已启用（或在 ifaces 中指定）但没有链路的物理接口：无载波或 operstate 为 down"},
    "missing_ifaces": {"type": "array", "en": "Interfaces named in ifaces that do not exist",
                       "zh": "ifaces 中指定但不存在的接口"},
    "infiniband": {"type": "array",
                   "en": f"InfiniBand/RoCE ports from /sys/class/infiniband: {{{_IB_FIELDS}}} "
                         "(state like \"4: ACTIVE\"; empty when there is no RDMA device)",
                   "zh": f"/sys/class/infiniband 中的 InfiniBand/RoCE 端口：{{{_IB_FIELDS}}}"
                         "（state 形如 \"4: ACTIVE\"；没有 RDMA 设备时为空列表）"},
    "ib_down": {"type": "array", "en": "InfiniBand ports not ACTIVE, as device/port (e.g. mlx5_0/1)",
                "zh": "未处于 ACTIVE 状态的 InfiniBand 端口，形如 设备/端口（如 mlx5_0/1）"},
    "master": {"type": "object",
               "en": "The rendezvous master: {addr, port, source (params, process or probe_env), ip "
                     "(as resolved), reachable (a TCP connect succeeded; null when no address is "
                     "known), error (refused, timed out, DNS), latency_ms}",
               "zh": "rendezvous 主节点：{addr, port, source（params、process 或 probe_env）、"
                     "ip（解析结果）、reachable（TCP 连接成功；地址未知时为 null）、"
                     "error（拒绝、超时、DNS）、latency_ms}"},
    "port_bound": {"type": "object",
                   "en": "With port: {port, bound (listening on this node), addresses, pids, cmdlines}; "
                         "null without port",
                   "zh": "指定 port 时：{port, bound（本节点是否在监听）、addresses、pids、cmdlines}；"
                         "未指定时为 null"},
}
DEFAULT_TIMEOUT = 5.0

_IFF_UP = 0x1
_LINK_DOWN = ("down", "lowerlayerdown", "notpresent")
_CMDLINE_MAX = 300


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    sys_root = str(params.get("sys_root") or "/sys")
    asked = [str(name) for name in params.get("ifaces") or []]
    interfaces, missing = read_interfaces(sys_root, asked)
    ports = read_ib_ports(sys_root)
    return {
        "interfaces": interfaces,
        "down": [i["name"] for i in interfaces if _is_down(i, bool(asked))],
        "missing_ifaces": missing,
        "infiniband": ports,
        "ib_down": [f"{p['device']}/{p['port']}" for p in ports if "ACTIVE" not in (p["state"] or "")],
        "master": _master(params, ctx),
        "port_bound": _port_bound(params.get("port"), ctx),
    }


# -- interfaces ---------------------------------------------------------------------------------


def read_interfaces(sys_root: str, asked: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Interfaces (all but lo, or the ones asked) and the asked ones that do not exist."""
    base = os.path.join(sys_root, "class", "net")
    try:
        present = sorted(os.listdir(base))
    except OSError:
        present = []
    names = [n for n in asked if n in present] if asked else [n for n in present if n != "lo"]
    return [_interface(base, name) for name in names], [n for n in asked if n not in present]


def _interface(base: str, name: str) -> dict[str, Any]:
    def read(leaf: str) -> str | None:
        # speed and carrier raise EINVAL while the link is down: unreadable reads as None.
        text = _procfs.read_text(os.path.join(base, name, leaf))
        return None if text is None else text.strip()

    flags = _int(read("flags"), 16)
    speed = _int(read("speed"))
    carrier = _int(read("carrier"))
    return {
        "name": name,
        "operstate": read("operstate"),
        "admin_up": None if flags is None else bool(flags & _IFF_UP),
        "carrier": None if carrier is None else carrier == 1,
        "speed_mbps": speed if speed is not None and speed > 0 else None,
        "mtu": _int(read("mtu")),
        "physical": os.path.exists(os.path.join(base, name, "device")),
    }


def _is_down(iface: dict[str, Any], asked: bool) -> bool:
    """No link on a physical interface that is meant to be up (configured up, or asked for)."""
    if not iface["physical"] or not (asked or iface["admin_up"]):
        return False
    return iface["carrier"] is False or iface["operstate"] in _LINK_DOWN


# -- InfiniBand ---------------------------------------------------------------------------------


def read_ib_ports(sys_root: str) -> list[dict[str, Any]]:
    """Every port of every RDMA device under /sys/class/infiniband (none: [])."""
    base = os.path.join(sys_root, "class", "infiniband")
    found = []
    for device in _listdir(base):
        ports_dir = os.path.join(base, device, "ports")
        for port in sorted(_listdir(ports_dir), key=lambda p: (len(p), p)):
            found.append(_ib_port(os.path.join(ports_dir, port), device, port))
    return found


def _ib_port(path: str, device: str, port: str) -> dict[str, Any]:
    def read(leaf: str) -> str | None:
        text = _procfs.read_text(os.path.join(path, leaf))
        return None if text is None else text.strip()

    return {
        "device": device,
        "port": _int(port) if port.isdigit() else port,
        "state": read("state"),
        "phys_state": read("phys_state"),
        "rate": read("rate"),
        "link_layer": read("link_layer"),
        "link_downed": _int(read("counters/link_downed")),
    }


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


# -- master and port ----------------------------------------------------------------------------


def _master(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    addr, port, source = master_address(params, ctx)
    master: dict[str, Any] = {"addr": addr, "port": port, "source": source, "ip": None,
                              "reachable": None, "error": None, "latency_ms": None}
    if not addr or port is None:
        master["error"] = "no master address: give master_addr/master_port, pid, or set MASTER_ADDR/PORT"
        return master
    wait = min(float(params.get("connect_timeout") or 2.0), ctx.remaining() / 2)
    start = time.monotonic()
    infos, error = _resolve(addr, port, wait)
    for family, kind, proto, _, sockaddr in infos:
        master["ip"] = sockaddr[0]
        error = _connect(family, kind, proto, sockaddr, max(0.05, wait - (time.monotonic() - start)))
        if error is None:
            master["latency_ms"] = round((time.monotonic() - start) * 1000, 2)
            break
    master["reachable"] = error is None
    master["error"] = error
    return master


def _resolve(addr: str, port: int, wait: float) -> tuple[list[Any], str | None]:
    """getaddrinfo under a deadline: a broken resolver blocks for many seconds."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["infos"] = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            box["error"] = f"cannot resolve {addr}: {exc}"

    worker = threading.Thread(target=work, name="runbook-resolve", daemon=True)
    worker.start()
    worker.join(wait)
    if worker.is_alive():
        return [], f"resolving {addr} did not answer within {wait:.1f}s (DNS)"
    return box.get("infos", []), box.get("error")


def _connect(family: int, kind: int, proto: int, sockaddr: Any, wait: float) -> str | None:
    sock = socket.socket(family, kind, proto)
    try:
        sock.settimeout(wait)
        sock.connect(sockaddr)
        return None
    except OSError as exc:  # refused, timed out, unreachable
        return str(exc) or type(exc).__name__
    finally:
        sock.close()


def master_address(params: dict[str, Any], ctx: CheckContext) -> tuple[str | None, int | None, str | None]:
    """(addr, port, source): parameters first, then the process's environment, then the probe's."""
    addr = str(params.get("master_addr") or "").strip() or None
    port = _int(params.get("master_port"))
    source = "params" if addr or port is not None else None
    for name, env in (("process", _process_env(params.get("pid"))), ("probe_env", ctx.env)):
        if addr and port is not None:
            break
        env_addr = (env.get("MASTER_ADDR") or "").strip() or None
        env_port = _int(env.get("MASTER_PORT"))
        if (not addr and env_addr) or (port is None and env_port is not None):
            source = source or name
        addr = addr or env_addr
        port = env_port if port is None else port
    return addr, port, source


def _process_env(pid: Any) -> dict[str, str]:
    number = _int(pid)
    if number is None:
        return {}
    try:
        return _procfs.environ(number)
    except OSError:
        return {}


def _port_bound(value: Any, ctx: CheckContext) -> dict[str, Any] | None:
    port = _int(value)
    if port is None or not 0 < port < 65536:
        return None
    listeners = listening_sockets(port)
    owners = _owners({inode for inode, _ in listeners}, ctx)
    return {
        "port": port,
        "bound": bool(listeners),
        "addresses": sorted({address for _, address in listeners}),
        "pids": [pid for pid, _ in owners],
        "cmdlines": [cmd[:_CMDLINE_MAX] for _, cmd in owners],
    }


def _int(value: Any, base: int = 10) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip(), base)
    except ValueError:
        return None
