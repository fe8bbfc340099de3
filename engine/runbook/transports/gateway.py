"""The gateway transport: a tree fan-out, the client -> a few gateways -> their share of the nodes.

One client that opens an SSH connection to every node does not reach 100,000 nodes; as
ClusterShell's gateways and Slurm's hierarchical launch do, the client here talks to a few
gateways (`--gateways gw[1-4]`), and each gateway fans out to its part of the cluster.

What runs where:
* the client opens ONE SSH session per gateway, with the SSH transport's own connection code
  (its options, known_hosts, masters reused across runs, connect slots, failure reasons):
  `_RelaySsh` is the SSH transport with the relay's zipapp as its payload instead of the
  probe bundle. It is content-hashed and sent only when the gateway lacks it (relay_bytes);
* the gateway runs the relay (_relay.py, standard library only), which reaches each of its
  nodes with its own OpenSSH exactly as the SSH transport does from a client: one `ssh` per
  node for the run, the probe bundle (carried inside the relay's zipapp) copied once per
  version, a serving probe per node. At most --gateway-fanout handshakes run at once on a
  gateway;
* requests and answers are JSON lines tagged with an id, so every node's checks share the
  gateway's one connection, and answers stream back as they arrive.

Node assignment (assign()): an inventory `gateway:` var names a node's gateway; the others are
split over the gateways in contiguous blocks of the sorted node names (deterministic, and
neighbours, often a rack, share a gateway).

Failures: a gateway that cannot be reached, or whose connection (or relay) dies, answers every
pending and later check of its nodes `unreachable`, "through gateway gw1: <why>"; the other
gateways' nodes go on. A node its gateway cannot reach is `unreachable` with the reason the
SSH transport would give (the gateway's ssh's words, read the same way), naming the gateway.
close() (Ctrl-C, the end of the run) ends each gateway's input: the relay ends its nodes'
inputs (each probe stops its check and exits), kills what is left and exits.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import math
import threading
import time
import zipfile
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from queue import Empty, SimpleQueue
from typing import Any

from runbook.transports import INTERRUPTED, Node, ProbeAnswer
from runbook.transports import ssh as ssh_transport
from runbook.transports._session import Session
from runbook.transports.bundle import bundle_bytes
from runbook.transports.local import parse_answer
from runbook.transports.ssh import ProbeFailure, SshError, SshTransport

DEFAULT_FANOUT = 64  # handshakes under way at once on one gateway
READ_WAIT_S = 3600.0  # a relay's reader wakes this often when nothing is asked
ANSWER_MARGIN_S = 15.0  # past a check's own limits, a relay that says nothing is given up on
_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_RELAY_MODULES = ("__init__.py", "transports/__init__.py", "transports/_probe_pipe.py",
                  "transports/_relay.py")
_MAIN = "import sys\nfrom runbook.transports._relay import main\nsys.exit(main())\n"


# -- the relay's zipapp ------------------------------------------------------------------------


@lru_cache(maxsize=1)
def relay_bytes() -> bytes:
    """The relay's zipapp: the relay, the probe pipe, and the probe bundle it gives its nodes;
    fixed timestamps, so the same sources give the same hash."""
    from runbook.transports._relay import PROBE_MEMBER

    files = [(f"runbook/{name}", (_PACKAGE_DIR / name).read_bytes()) for name in _RELAY_MODULES]
    files += [(PROBE_MEMBER, bundle_bytes()), ("__main__.py", _MAIN.encode())]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            # the bundle is a zip already: storing it keeps the relay's start cheap
            info.compress_type = zipfile.ZIP_STORED if name == PROBE_MEMBER else zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return buffer.getvalue()


@lru_cache(maxsize=1)
def relay_name() -> str:
    return f"runbook-relay-{hashlib.sha256(relay_bytes()).hexdigest()[:16]}.pyz"


class _RelaySsh(SshTransport):
    """The SSH transport's connection to a gateway, whose payload is the relay, not the probe."""

    PAYLOAD_ARGS = ""

    @staticmethod
    def _payload() -> tuple[str, bytes]:
        return relay_name(), relay_bytes()

    def open(self, gateway: Node) -> Session:
        """The gateway's session, its relay started (raises SshError or ProbeFailure)."""
        with self._lock(gateway.name):
            return self._session(gateway)


# -- node assignment -------------------------------------------------------------------------


def assign(nodes: list[Node], gateways: list[str]) -> None:
    """Route every SSH node through a gateway: its inventory `gateway:` var, or else its block
    of the sorted names (contiguous blocks, as even as they go). Local nodes stay local."""
    routed = [n for n in nodes if n.transport == "ssh"]
    free = sorted((n for n in routed if not n.vars.get("gateway")), key=lambda n: n.name)
    share = math.ceil(len(free) / len(gateways)) if free else 1
    for index, node in enumerate(free):
        node.vars["gateway"] = gateways[index // share]
    for node in routed:
        node.transport = "gateway"


# -- the client side -------------------------------------------------------------------------


class _Waiter:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.message: dict[str, Any] = {}

    def settle(self, message: dict[str, Any]) -> None:
        if not self.done.is_set():
            self.message = message
            self.done.set()


class _Landing:
    """A waiter of a batch (`run_many`): its answer lands on the batch's queue, tagged."""

    __slots__ = ("landed", "index", "settled")

    def __init__(self, landed: SimpleQueue[tuple[int, dict[str, Any]]], index: int) -> None:
        self.landed, self.index, self.settled = landed, index, False

    def settle(self, message: dict[str, Any]) -> None:
        if not self.settled:  # once: a late answer after the relay was given up on is dropped
            self.settled = True
            self.landed.put((self.index, message))


class _Link:
    """One gateway's connection: requests out, answers in by id, read by a thread of its own."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.session: Session | None = None
        self.dead: str | None = None  # why this gateway no longer answers
        self.pending: dict[int, _Waiter] = {}
        self.introduced: set[str] = set()  # nodes whose reach (host, script) the relay holds
        self.lock = threading.Lock()
        self.send_lock = threading.Lock()  # one request line at a time on the connection
        self.ready = threading.Event()  # set once connected, or known dead

    def fail(self, reason: str) -> None:
        """Every pending and later check of this gateway's nodes is unreachable for `reason`."""
        with self.lock:
            self.dead = self.dead or reason
            waiting, self.pending = list(self.pending.values()), {}
        self.ready.set()
        for waiter in waiting:
            waiter.settle({"dead": self.dead})

    def first_time(self, node: str) -> bool:
        """True once per node: its first request carries how to reach it. (A node's requests
        come one at a time, so the one that carries it is read by the relay first.)"""
        with self.lock:
            if node in self.introduced:
                return False
            self.introduced.add(node)
            return True

    def send(self, ident: int, message: dict[str, Any]) -> _Waiter:
        waiter = _Waiter()
        self.send_all([(ident, message, waiter)])
        return waiter

    def send_all(self, requests: list[tuple[int, dict[str, Any], Any]]) -> None:
        """Send each (id, message, waiter) in one write; each waiter is settled with its answer,
        or at once with `dead` when this gateway no longer answers."""
        data = "".join(json.dumps(message) + "\n" for _, message, _ in requests).encode()
        with self.lock:
            if self.dead is not None or self.session is None:
                for _, _, waiter in requests:
                    waiter.settle({"dead": self.dead})
                return
            for ident, _, waiter in requests:
                self.pending[ident] = waiter
            session = self.session
        # Not under self.lock: a write that waits for the relay to read must not keep the
        # reader thread from settling answers.
        with self.send_lock:
            sent = session.send(data)
        if not sent:
            self.fail("connection lost")

    def forget(self, ident: int) -> None:
        """Drop a request given up on: a late answer to it is not waited for."""
        with self.lock:
            self.pending.pop(ident, None)

    def read(self, transport: GatewayTransport, gateway: Node) -> None:
        """Dispatch the relay's answers until its output ends; then it is dead, with why."""
        assert self.session is not None
        while True:
            line = self.session.read_line(time.monotonic() + READ_WAIT_S)
            if line is None:
                if self.session.ended or transport.closed:
                    break
                continue  # a quiet hour: nothing asked
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a chatty login shell
            with self.lock:
                waiter = self.pending.pop(message.get("id"), None) if "id" in message else None
            if waiter is not None:
                waiter.settle(message)
        self.fail(INTERRUPTED if transport.closed else transport.lost_reason(gateway, self.session))


class GatewayTransport:
    """Checks of every node through its gateway's relay; see the module docstring."""

    def __init__(self, python: str | None = None, connect_timeout: float = 10.0,
                 accept_new_host_keys: bool = False, persist: float = 60.0,
                 gateways: dict[str, dict[str, Any]] | None = None,
                 fanout: int = DEFAULT_FANOUT, **_: Any) -> None:
        self.python = python
        self.connect_timeout = max(1.0, connect_timeout)
        self.accept_new_host_keys = accept_new_host_keys
        self.fanout = max(1, fanout)
        self.gateway_vars = gateways or {}  # name -> how to reach it (the inventory's vars)
        # The gateway's Python is its own (python3, or its inventory `python:`), not --python:
        # that one is the nodes'.
        self._ssh = _RelaySsh(connect_timeout=connect_timeout,
                              accept_new_host_keys=accept_new_host_keys, persist=persist)
        self._links: dict[str, _Link] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.closed = False

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        start = time.monotonic()
        refused = self._refused(node)
        if refused is not None:
            return refused
        gateway = str(node.vars["gateway"])
        link = self._link(gateway)
        ident, message = self._message(link, node, request, timeout)
        waiter = link.send(ident, message)
        limit = self._limit(timeout)
        if not waiter.done.wait(limit):
            link.forget(ident)
            waiter.settle(_no_answer(limit))
        return self._answer(node, waiter.message, time.monotonic() - start)

    def run_many(self, nodes: list[Node], request: dict[str, Any],
                 timeout: float) -> Iterator[tuple[int, ProbeAnswer]]:
        """The walk's batch API (transports/__init__.py): every node's request goes down its
        gateway's connection in one write per gateway, and each answer is yielded as it comes.
        No thread waits per node, which is what lets one client walk 100,000 nodes."""
        start = time.monotonic()
        landed: SimpleQueue[tuple[int, dict[str, Any]]] = SimpleQueue()
        by_link: dict[str, list[int]] = {}
        for index, node in enumerate(nodes):
            refused = self._refused(node)
            if refused is not None:
                yield index, refused
            else:
                by_link.setdefault(str(node.vars["gateway"]), []).append(index)
        links = self._links_of(list(by_link))  # the first batch connects each gateway, at once
        sent: dict[int, tuple[_Link, int]] = {}
        for gateway, indexes in by_link.items():
            requests = []
            for index in indexes:
                ident, message = self._message(links[gateway], nodes[index], request, timeout)
                requests.append((ident, message, _Landing(landed, index)))
                sent[index] = (links[gateway], ident)
            links[gateway].send_all(requests)
        yield from self._landed(nodes, sent, landed, start + self._limit(timeout), start)

    def _landed(self, nodes: list[Node], sent: dict[int, tuple[_Link, int]],
                landed: SimpleQueue[tuple[int, dict[str, Any]]], deadline: float,
                start: float) -> Iterator[tuple[int, ProbeAnswer]]:
        """A batch's answers as they land; past the deadline, the rest given up on."""
        try:
            while sent:
                try:
                    index, message = landed.get(timeout=max(0.0, deadline - time.monotonic()))
                except Empty:
                    break
                if sent.pop(index, None) is not None:
                    yield index, self._answer(nodes[index], message, time.monotonic() - start)
            limit = deadline - start
            for index in sorted(sent):
                yield index, self._answer(nodes[index], _no_answer(limit), limit)
        finally:  # given up on, or the walk stopped asking: the relays' late answers are dropped
            for link, ident in sent.values():
                link.forget(ident)

    def _refused(self, node: Node) -> ProbeAnswer | None:
        if self.closed:
            return ProbeAnswer("error", error=INTERRUPTED)
        if not node.vars.get("gateway"):
            return ProbeAnswer("error", error="no gateway for this node (--gateways)")
        return None

    def _python(self, node: Node) -> str:
        return str(node.vars.get("python") or self.python or "python3")

    def _limit(self, timeout: float) -> float:
        """How long a check may take through a gateway before its relay is given up on."""
        return timeout + 2 * self.connect_timeout + ssh_transport.COPY_TIMEOUT_S + ANSWER_MARGIN_S

    def _message(self, link: _Link, node: Node, request: dict[str, Any],
                 timeout: float) -> tuple[int, dict[str, Any]]:
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "node": node.name, "request": request, "timeout": timeout}
        if link.first_time(node.name):  # the relay keeps how to reach a node for the run
            message.update(host=node.vars.get("host") or node.name, port=node.vars.get("port"),
                           user=node.vars.get("user"), script=SshTransport._script(node, self._python(node)))
        return ident, message

    def _links_of(self, gateways: list[str]) -> dict[str, _Link]:
        """Each gateway's link; those not yet connected connect in parallel."""
        with self._lock:
            links = {name: link for name in gateways
                     if (link := self._links.get(name)) is not None and link.ready.is_set()}
        threads = []
        for gateway in gateways:
            if gateway in links:
                continue

            def connect(name: str = gateway) -> None:
                links[name] = self._link(name)

            thread = threading.Thread(target=connect, name=f"gateway {gateway} connect", daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        return links

    def _answer(self, node: Node, message: dict[str, Any], elapsed: float) -> ProbeAnswer:
        gateway, python = str(node.vars.get("gateway")), self._python(node)
        if self.closed or message.get("dead") == INTERRUPTED:
            return ProbeAnswer("error", error=INTERRUPTED, duration_s=elapsed)
        if "dead" in message:
            return ProbeAnswer("unreachable", error=f"through gateway {gateway}: {message['dead']}",
                               duration_s=elapsed)
        if "line" in message:
            return parse_answer(str(message["line"]).encode(), b"", 0, elapsed)
        if message.get("timed_out"):
            return ProbeAnswer("ok", {"timed_out": True, "reason": "no answer within the check's "
                                      "timeout; the probe was killed on the node"}, duration_s=elapsed)
        if "failed" in message:
            failure = _node_failure(message, python, self.connect_timeout)
            status = "error" if isinstance(failure, ProbeFailure) else "unreachable"
            return ProbeAnswer(status, error=f"{failure} (through gateway {gateway})", duration_s=elapsed)
        return ProbeAnswer("error", error=f"through gateway {gateway}: {message.get('error')}",
                           duration_s=elapsed)

    def _link(self, name: str) -> _Link:
        """The gateway's link; the first check of its nodes connects it, the others wait."""
        with self._lock:
            link = self._links.get(name)
            first = link is None
            if first:
                link = self._links[name] = _Link(name)
        assert link is not None
        if first:
            self._connect(link)
        else:
            while not link.ready.wait(0.2) and not self.closed:
                pass
        return link

    def _connect(self, link: _Link) -> None:
        gateway = Node(link.name, "ssh", dict(self.gateway_vars.get(link.name) or {}))
        try:
            session = self._ssh.open(gateway)
            config = {"ssh": self.node_ssh_options(), "connect_timeout": self.connect_timeout,
                      "fanout": self.fanout}
            if not session.send((json.dumps({"config": config}) + "\n").encode()):
                raise SshError("connection lost")
        except (SshError, ProbeFailure) as exc:
            link.fail(INTERRUPTED if self.closed else str(exc))
            return
        link.session = session
        threading.Thread(target=link.read, args=(self, gateway), name=f"gateway {link.name}",
                         daemon=True).start()
        link.ready.set()

    def node_ssh_options(self) -> list[str]:
        """What the gateway's ssh gets from the client; the rest is the gateway's ~/.ssh."""
        return ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={math.ceil(self.connect_timeout)}",
                "-o", "StrictHostKeyChecking=" + ("accept-new" if self.accept_new_host_keys else "yes"),
                "-o", "LogLevel=ERROR"]

    def lost_reason(self, gateway: Node, session: Session) -> str:
        """Why a gateway's relay stopped answering, in the SSH transport's words."""
        failure = self._ssh._failure("check", gateway, session)
        return str(failure) if isinstance(failure, SshError) else f"its relay ended: {failure}"

    def close(self) -> None:
        """Stop the tree: every gateway's input ends (its relay stops its nodes' probes and
        exits); checks still waiting answer `interrupted`."""
        with self._lock:
            self.closed = True
            links = list(self._links.values())
        for link in links:  # the checks waiting on a gateway return at once
            link.fail(INTERRUPTED)
        self._ssh.close()  # ends each relay's input, waits for them together, kills the slow


def _no_answer(limit: float) -> dict[str, Any]:
    """The message of a check whose relay did not answer in time."""
    return {"dead": f"no answer from its relay within {limit:g}s"}


def _node_failure(message: dict[str, Any], python: str, limit: float) -> Exception:
    """The SSH transport's reason for a node its gateway's ssh could not get to serve."""
    phase = str(message.get("failed"))
    code = message.get("code")
    where = message.get("where") or ["?", 22, "?"]
    host, port, user = str(where[0]), int(where[1]), str(where[2])
    ended = ssh_transport._Ended(code, str(message.get("stderr") or ""), float(message.get("elapsed") or 0),
                                 limit, python, lambda: (host, port, user))
    with contextlib.suppress(Exception):  # the relay's message is data from another host
        return ssh_transport.explain(phase, ended)
    return SshError(f"{phase} failed: ssh exited {code}")
