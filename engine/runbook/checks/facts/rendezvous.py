"""Rendezvous and TCPStore failures: the job's processes could not meet.

Kinds of message, as `kind` names them:

- store-timeout: the store's server gave up on its clients: `Timed out after 1801 seconds waiting
  for clients. 1/2 clients joined.` (earlier releases said "workers")
- barrier-timeout: `Timed out initializing process group in store based barrier on rank: 4, for
  key: store_based_barrier_key:1 (world_size=8, worker_count=6, timeout=0:30:00)` (older torch)
- rendezvous-timeout: torchrun's elastic agent: `RendezvousTimeoutError`
- client-timeout: a client could not reach the store: `The client socket has timed out after
  1800s while trying to connect to (10.0.0.1, 29500).`, `... after 600000ms ...`, `TCP client
  failed to connect/validate to host 10.0.0.1:29500 - timed out (try=1, timeout=600000ms)`
- key-timeout: a key never arrived: `wait timeout after 1800000ms, keys: /default_pg/0//cuda//0`,
  `store->get('0') got error: Socket Timeout`, a bare `Socket Timeout`
- port-in-use: `The server socket has failed to listen on any local network address. ... port:
  29500, useIpv6: false, code: -98, name: EADDRINUSE` or `... failed to bind to [::]:29500
  (errno: 98 - Address already in use)`
- refused: `The client socket has failed to connect to [host]:29500 (errno: 111 - Connection
  refused).`, `connect() failed ... Connection refused`
- connect-failed: the same with another errno (110 timed out, 99 cannot assign ...), `The client
  socket cannot be initialized to connect to ...`, `... failed to connect to any network address
  of (host, 29500).`, `RendezvousConnectionError`

Facts (None or empty where no message says):

- count: messages seen; kind: the kind of the last; kinds: each kind seen, in order
- joined, expected: clients (or workers) that joined and that were expected, from the last
  store-timeout or barrier-timeout; missing: expected - joined (negative when more joined than
  expected: two jobs share the store's port)
- timeout_s: the timeout the last timed-out message states, in seconds
- master_addr, master_port: the store a client tried to reach (the last named)
- port_in_use: the port the store's server could not listen on
- keys: the store keys waited for (the first 20)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runbook.checks.facts._text import add_once, clipped

_JOINED = re.compile(r"Timed out after (\d+) seconds waiting for (?:clients|workers)\. (\d+)/(\d+) ")
_BARRIER = re.compile(r"store based barrier on rank: ?\d+, for key: (\S+) \(world_size=(\d+), "
                      r"worker_count=(\d+), timeout=(\d+):(\d+):(\d+)")
_CLIENT = re.compile(r"The client socket has timed out after (\d+)(ms|s) while trying to connect to "
                     r"(?:\(([^,()\s]+), (\d+)\)|\[?([\w.\-]+)\]?:(\d+))")
_VALIDATE = re.compile(r"failed to connect/validate to host ([\w.\-]+):(\d+) - timed out "
                       r"\(try=\d+, timeout=(\d+)ms\)")
_WAIT_KEYS = re.compile(r"wait timeout after (\d+)ms, keys: ([^\s,]+(?:, [^\s,]+)*)")
_GET_KEY = re.compile(r"store->get\('([^']*)'\) got error: Socket Timeout")
_LISTEN_PORT = re.compile(r"port: (\d+)")
_BIND_PORT = re.compile(r"failed to bind to \S*:(\d+) \(errno: 98")
_CONNECT = re.compile(r"to connect to (?:\[([^\]\s]+)\]|([^\s\[\]]+?)):(\d+) \((?:errno|system error): (\d+)")
_ANY_ADDRESS = re.compile(r"failed to connect to any network address of \(([^,()\s]+), (\d+)\)")


def parse(lines: Sequence[str]) -> dict[str, Any] | None:
    """Facts of the rendezvous and store failures in `lines`, or None when there are none."""
    facts = _empty()
    for line in clipped(lines):
        if not _concerns(line):
            continue
        kind = _read(facts, line)
        if kind:
            facts["count"] += 1
            facts["kind"] = kind
            add_once(facts["kinds"], kind)
    if not facts["count"]:
        return None
    if facts["joined"] is not None and facts["expected"] is not None:
        facts["missing"] = facts["expected"] - facts["joined"]
    return facts


def _concerns(line: str) -> bool:
    """Whether the line may hold a message of this family (NCCL's own lines never do)."""
    marked = ("imed out" in line or "imeout" in line or "socket" in line or "Rendezvous" in line
              or "onnection refused" in line)
    return marked and "NCCL WARN" not in line and "NCCL INFO" not in line


def _read(facts: dict[str, Any], line: str) -> str | None:
    """Read one line into `facts`; the kind of its message, None when it has none."""
    for reader in _READERS:
        kind = reader(facts, line)
        if kind:
            return kind
    return None


def _store_timeout(facts: dict[str, Any], line: str) -> str | None:
    if "Timed out" not in line:
        return "rendezvous-timeout" if "RendezvousTimeoutError" in line else None
    m = _JOINED.search(line)
    if m:
        facts["timeout_s"], facts["joined"], facts["expected"] = (int(g) for g in m.groups())
        return "store-timeout"
    m = _BARRIER.search(line) if "store based barrier" in line else None
    if m:
        add_once(facts["keys"], m.group(1))
        facts["expected"], facts["joined"] = int(m.group(2)), int(m.group(3))
        facts["timeout_s"] = int(m.group(4)) * 3600 + int(m.group(5)) * 60 + int(m.group(6))
        return "barrier-timeout"
    return "rendezvous-timeout" if "RendezvousTimeoutError" in line else None


def _client_timeout(facts: dict[str, Any], line: str) -> str | None:
    if "timed out" not in line:
        return None
    m = _CLIENT.search(line)
    if m:
        amount, unit = int(m.group(1)), m.group(2)
        facts["timeout_s"] = amount // 1000 if unit == "ms" else amount
        facts["master_addr"] = m.group(3) or m.group(5)
        facts["master_port"] = int(m.group(4) or m.group(6))
        return "client-timeout"
    m = _VALIDATE.search(line)
    if m:
        facts["master_addr"], facts["master_port"] = m.group(1), int(m.group(2))
        facts["timeout_s"] = int(m.group(3)) // 1000
        return "client-timeout"
    return None


def _key_timeout(facts: dict[str, Any], line: str) -> str | None:
    m = _WAIT_KEYS.search(line) if "wait timeout" in line else None
    if m:
        facts["timeout_s"] = int(m.group(1)) // 1000
        for key in m.group(2).split(", "):
            add_once(facts["keys"], key.rstrip(".,"))
        return "key-timeout"
    if "Socket Timeout" not in line:
        return None
    m = _GET_KEY.search(line)
    if m:
        add_once(facts["keys"], m.group(1))
    return "key-timeout"


def _port_in_use(facts: dict[str, Any], line: str) -> str | None:
    failed = "failed to listen on any local network address" in line or "failed to bind to" in line
    if failed and ("EADDRINUSE" in line or "Address already in use" in line):
        m = _LISTEN_PORT.search(line) or _BIND_PORT.search(line)
        facts["port_in_use"] = int(m.group(1)) if m else facts["port_in_use"]
        return "port-in-use"
    return None


def _connect_failed(facts: dict[str, Any], line: str) -> str | None:
    if "connect" not in line and "Rendezvous" not in line:
        return None
    m = _CONNECT.search(line) if "The client socket" in line and "to connect to" in line else None
    if m:
        facts["master_addr"], facts["master_port"] = m.group(1) or m.group(2), int(m.group(3))
        return "refused" if m.group(4) == "111" else "connect-failed"
    m = _ANY_ADDRESS.search(line)
    if m:
        facts["master_addr"], facts["master_port"] = m.group(1), int(m.group(2))
        return "connect-failed"
    if "connect() failed" in line and "onnection refused" in line:
        return "refused"
    return "connect-failed" if "RendezvousConnectionError" in line else None


_READERS = (_store_timeout, _client_timeout, _key_timeout, _port_in_use, _connect_failed)


def _empty() -> dict[str, Any]:
    return {"count": 0, "kind": None, "kinds": [], "joined": None, "expected": None, "missing": None,
            "timeout_s": None, "master_addr": None, "master_port": None, "port_in_use": None,
            "keys": []}
