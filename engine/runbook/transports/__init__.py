"""Transports get a probe request to a node and a JSON answer back, with a hard timeout.

Each one is named by import string and imported only when used, so the SSH and
Ray libraries load only for runs that need them.
"""

from __future__ import annotations

import importlib
import sys
import threading
from dataclasses import dataclass, field
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


# The error of a check asked for (or still running) once the run is stopping (Ctrl-C, SIGTERM).
INTERRUPTED = "interrupted: the run is stopping"


class Transport(Protocol):
    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer: ...

    def close(self) -> None: ...


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
