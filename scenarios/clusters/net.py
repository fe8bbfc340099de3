"""Names, loopback addresses and ports of the test clusters' hosts: standard library only.

Host i (0-based) of every cluster is called ``node{i+1:02d}``; all of 127/8 is loopback, so
each host can have an address of its own (`host_address`). Ports are picked at random below
the kernel's ephemeral range (`free_port`); `port_free` and `listening` tell whether a daemon
could bind one, and whether it did.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
from collections.abc import Iterable

from scenarios.clusters.daemon import DaemonError

PORT_RANGE = (20000, 32000)  # below the usual ephemeral range (32768-60999)
MAX_HOSTS = 254 * 64  # 127.0.0.x .. 127.0.63.x, far more than one machine can run


def host_name(index: int) -> str:
    """The name of host `index` (0-based): node01, node02, ..."""
    return f"node{index + 1:02d}"


def host_address(position: int) -> str:
    """The loopback address of position 1, 2, ...: 127.0.0.1..254, then 127.0.1.1..254, ...

    (No .0 or .255 last octet, which some tools read as a network or broadcast address.)"""
    third, last = divmod(position - 1, 254)
    return f"127.0.{third}.{last + 1}"


def free_port(addresses: Iterable[str] = ("127.0.0.1",), *, attempts: int = 200) -> int:
    """A TCP port that can be bound now on every one of `addresses`.

    Chosen at random in 20000-31999 (below the kernel's ephemeral range, so an outgoing
    connection will not take it meanwhile); two clusters started at the same time are very
    unlikely to get the same port, and a cluster's start retries with another if they do.
    """
    addrs = list(addresses) or ["127.0.0.1"]
    rng = random.SystemRandom()
    for _ in range(attempts):
        port = rng.randrange(*PORT_RANGE)
        try:
            for addr in addrs:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind((addr, port))
        except OSError:
            continue
        return port
    raise DaemonError(f"no free TCP port found on {len(addrs)} addresses after {attempts} tries")


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports on 127.0.0.1."""
    ports: list[int] = []
    for _ in range(20 * n):
        port = free_port()
        if port not in ports:
            ports.append(port)
        if len(ports) == n:
            return ports
    raise DaemonError(f"no {n} distinct free ports")


def port_free(addresses: Iterable[str], port: int) -> str | None:
    """None if `port` can be bound (as a daemon binds, SO_REUSEADDR) on all addresses, else why."""
    for addr in addresses:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((addr, port))
                s.listen(1)
            except OSError as exc:
                return f"{addr}:{port}: {exc.strerror or exc}"
    return None


def tcp_open(address: str, port: int) -> bool:
    """Whether a TCP connection to address:port succeeds (within half a second)."""
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def listening_inodes() -> dict[tuple[str, int], str]:
    """(address, port) -> socket inode of every IPv4 TCP socket in LISTEN state."""
    out: dict[tuple[str, int], str] = {}
    with contextlib.suppress(OSError), open("/proc/net/tcp") as fh:
        next(fh, None)
        for line in fh:
            cols = line.split()
            if len(cols) < 10 or cols[3] != "0A":
                continue
            addr_hex, port_hex = cols[1].split(":")
            addr = ".".join(str(b) for b in reversed(bytes.fromhex(addr_hex)))
            out[(addr, int(port_hex, 16))] = cols[9]
    return out


def socket_inodes(pid: int) -> set[str]:
    """The inodes of every socket PID holds open."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    return inodes


def listens(pid: int, address: str, port: int, listening: dict[tuple[str, int], str]) -> bool:
    """Whether PID itself (not another process) holds the listening socket of address:port
    (`listening`: from listening_inodes()), and a TCP connection to it succeeds."""
    inode = listening.get((address, port))
    return bool(inode) and inode in socket_inodes(pid) and tcp_open(address, port)
