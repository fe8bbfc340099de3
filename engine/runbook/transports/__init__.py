"""Transports get a probe request to a node and a JSON answer back, with a hard timeout.

Each one is named by import string and imported only when used, so the SSH and
Ray libraries load only for runs that need them.
"""

from __future__ import annotations

import copy
import importlib
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from queue import SimpleQueue
from typing import Any, Protocol

TRANSPORTS: dict[str, str] = {
    "local": "runbook.transports.local:LocalTransport",
    "ssh": "runbook.transports.ssh:SshTransport",
    "gateway": "runbook.transports.gateway:GatewayTransport",  # ssh through --gateways
    "ray": "runbook.transports.ray_cluster:RayTransport",
    "slurm": "runbook.transports.slurm:SlurmTransport",
}


@dataclass
class Node:
    """One machine to diagnose, and how to reach it."""

    name: str
    transport: str = "local"
    vars: dict[str, Any] = field(default_factory=dict)  # python, user, port, params ...


@dataclass
class ProbeAnswer:
    """What came back from one node for one check.

    status: `ok` (a result; `result.timed_out` may be true: a hang is a finding),
    `unreachable` (no connection), or `error` (the probe or the check failed).
    """

    status: str
    result: dict[str, Any] | None = None
    error: str | None = None
    duration_s: float = 0.0
    # The probe's answer line the result was parsed from, where there was one: equal lines are
    # equal results, so the walk tells equal answers apart by it without writing each result out.
    text: str | None = field(default=None, repr=False, compare=False)


# The error of a check asked for (or still running) once the run is stopping (Ctrl-C, SIGTERM).
INTERRUPTED = "interrupted: the run is stopping"


class Transport(Protocol):
    """Asks one node at a time. A transport that can do better for many nodes at once (one
    multiplexed session, one remote call for a whole group) also has `run_many(nodes, request,
    timeout)`, yielding `(index in nodes, answer)` as answers come, one per node; the walk then
    sends it each group of nodes at the same step in one call (see `run_many` below)."""

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer: ...

    def close(self) -> None: ...


def run_many(transport: Transport, nodes: Sequence[Node], request: dict[str, Any], timeout: float,
             threads: int = 64) -> Iterator[tuple[int, ProbeAnswer]]:
    """The batch API: `(index, answer)` for every node, in the order the answers come. A transport
    with its own `run_many` answers the whole batch itself; any other is asked node by node from
    up to `threads` threads (each check gets its own copy of the request: a check may change it)."""
    own = getattr(transport, "run_many", None)
    if own is not None:
        yield from own(nodes, request, timeout)
        return
    landed: SimpleQueue[tuple[int, ProbeAnswer]] = SimpleQueue()
    indexes = iter(range(len(nodes)))  # shared by the threads: next() on it is atomic

    def ask() -> None:
        for index in indexes:
            try:
                answer = transport.run_check(nodes[index], own_request(request), timeout)
            except Exception as exc:  # one node's failure is that node's answer
                answer = ProbeAnswer("error", error=f"{type(exc).__name__}: {exc}")
            landed.put((index, answer))

    for _ in range(max(1, min(threads, len(nodes)))):
        threading.Thread(target=ask, name="runbook-run-many", daemon=True).start()
    for _ in range(len(nodes)):
        yield landed.get()


def own_request(request: dict[str, Any]) -> dict[str, Any]:
    """A request whose parameters share nothing changeable with the one it was copied from (one
    rendered request serves a whole group of nodes; most values are text, copied for free)."""
    params = request.get("with")
    if not params:
        return dict(request)
    return {**request, "with": {k: copy.deepcopy(v) if isinstance(v, (dict, list, set)) else v
                                for k, v in params.items()}}


def get_transport(name: str, **options: Any) -> Transport:
    module_name, _, attr = TRANSPORTS[name].partition(":")
    return getattr(importlib.import_module(module_name), attr)(**options)  # type: ignore[no-any-return]


class NodeTransports:
    """Dispatches each node to its own transport (local, ssh, ray), created on first use."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self._made: dict[str, Transport] = {}
        self._lock = threading.Lock()
        self.closed = False

    def _get(self, name: str) -> Transport | None:
        with self._lock:  # checks of many nodes ask at once; make each transport only once
            if self.closed:  # after close() (Ctrl-C) nothing new starts
                return None
            if name not in self._made:
                self._made[name] = get_transport(name, **self.options.get(name, {}))
            return self._made[name]

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        transport = self._get(node.transport)
        if transport is None:
            return ProbeAnswer("error", error=INTERRUPTED)
        return transport.run_check(node, request, timeout)

    def batcher(self, nodes: Sequence[Node]) -> Transport | None:
        """The transport of `nodes` when they all have the same one and it answers a group itself
        (`run_many`); None when they must be asked node by node."""
        names = {node.transport for node in nodes}
        if len(names) != 1:
            return None
        transport = self._get(names.pop())
        return transport if getattr(transport, "run_many", None) is not None else None

    def close(self) -> None:
        """Close every transport made; one that fails to close does not keep the others open."""
        with self._lock:
            self.closed = True
            made = list(self._made.values())
        for transport in made:
            try:
                transport.close()
            except Exception as exc:  # still stop the probes of the other transports
                print(f"runbook: closing a transport: {type(exc).__name__}: {exc}", file=sys.stderr)
