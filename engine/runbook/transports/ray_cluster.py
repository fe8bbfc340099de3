"""The Ray transport: one long-lived probe actor pinned to each node of a running cluster.

The driver connects to the cluster (it never starts one) and puts the probe bundle in the
object store once. On a node's first check it creates that node's actor (zero CPUs, a hard
node affinity); the actor writes the bundle to the node's cache directory and keeps one
serving probe, run with the Ray worker's own Python (the training environment's), for the
whole run. Each check is then one actor call: no task to schedule and no worker to start per
check. A check past its timeout gets the probe's process group killed on the node. The
actor's code is shipped by value (runbook.transports._ray_actor, and the probe pipe it shares
with the SSH transport: _probe_pipe), so nodes need Ray, not runbook.

A node whose Ray node dies (before or during a check) is `unreachable`, never an exception.
`ray` is an optional dependency, imported only when this transport is used.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from functools import lru_cache
from typing import Any

from runbook.transports import INTERRUPTED, Node, ProbeAnswer
from runbook.transports.bundle import bundle_bytes, bundle_name
from runbook.transports.local import parse_answer

# How long past the check's timeout the actor waits before killing the probe (on the node).
KILL_GRACE_S = 0.5
# How long past that the driver waits for the actor's answer: the kill, the call's round trip.
CALL_SLACK_S = 5.0
# How long a node's actor may take to start: a Ray worker process starts on a busy node.
ACTOR_START_S = 60.0
# After an actor dies, how long to wait for the cluster to mark its node dead (health checks).
NODE_DEATH_WAIT_S = 5.0
# The TCP pre-check of the cluster's GCS port: ray.init itself blocks for minutes on a bad address.
CONNECT_CHECK_S = 2.0

_connect_lock = threading.Lock()
_connected_here = False  # this module called ray.init, so close() may disconnect


def _ray() -> Any:
    """The `ray` module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RuntimeError("the Ray executor needs ray on this machine: pip install 'runbook[ray]'") from None
    return ray


# -- connecting and discovering --


def discover_nodes(address: str | None = None) -> list[Node]:
    """Connect to the cluster at `address` ("auto" when None) and name one Node per alive Ray node.

    Nodes are named by hostname, or `hostname-<first 6 chars of node id>` where several
    share a hostname; ordered by hostname, then node id. Raises ValueError when no
    cluster is reachable.
    """
    _connect(address)
    alive = sorted(_alive_nodes(), key=lambda n: (n["NodeManagerHostname"], n["NodeID"]))
    counts: dict[str, int] = {}
    for info in alive:
        counts[info["NodeManagerHostname"]] = counts.get(info["NodeManagerHostname"], 0) + 1
    return [_node(info, shared=counts[info["NodeManagerHostname"]] > 1) for info in alive]


def _node(info: dict[str, Any], shared: bool) -> Node:
    hostname, node_id = info["NodeManagerHostname"], info["NodeID"]
    name = f"{hostname}-{node_id[:6]}" if shared else hostname
    return Node(name, "ray", {"ray_node_id": node_id, "address": info["NodeManagerAddress"],
                              "hostname": hostname})


def _alive_nodes() -> list[dict[str, Any]]:
    return [info for info in _ray().nodes() if info.get("Alive")]


def _connect(address: str | None) -> None:
    """ray.init once per process (a no-op inside an existing Ray driver or job)."""
    global _connected_here
    ray = _ray()
    with _connect_lock:
        if ray.is_initialized():
            return
        target = address or "auto"
        _check_reachable(target)
        try:
            ray.init(address=target, ignore_reinit_error=True, logging_level=logging.ERROR,
                     log_to_driver=False)
        except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
            raise ValueError(f"no Ray cluster at {target}: {_first_line(exc)} (start one with"
                             " `ray start --head`, or pass --ray-address HOST:PORT)") from None
        _connected_here = True


def _check_reachable(target: str) -> None:
    """Fail fast, with a clear message, where nothing listens at the cluster's address."""
    resolved = _resolve_address(target)
    host, _, port = (resolved or "").removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # nothing recorded, or a form we do not parse: ray.init reports it itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_CHECK_S).close()
    except OSError as exc:
        raise ValueError(f"no Ray cluster at {target} (cannot connect to {host}:{port}:"
                         f" {exc.strerror or exc}); check --ray-address, or start one with"
                         " `ray start --head`") from None


def _resolve_address(target: str) -> str | None:
    """"auto": RAY_ADDRESS or the cluster this machine last started, if any; other forms as given."""
    if target != "auto":
        return target
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(target)  # type: ignore[no-any-return]
    except Exception:  # a private helper: without it, ray.init does the finding
        return None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


# -- the actor that runs on the node --


@lru_cache(maxsize=1)
def _actor_class() -> Any:
    """The probe actor class. Its modules travel by value, so the nodes need no runbook;
    two calls at once, so that stop() reaches a probe a check is waiting on."""
    ray = _ray()
    from runbook.transports import _probe_pipe, _ray_actor

    for module in (_probe_pipe, _ray_actor):  # the actor's module and the pipe it talks through
        ray.cloudpickle.register_pickle_by_value(module)
    return ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0,
                      max_concurrency=2)(_ray_actor.ProbeServer)


class _Gone(Exception):
    """The check cannot run: str() is the one-line reason; `status` the answer's status."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status


STOP_WAIT_S = 3.0  # close(): how long the actors may take together to kill their probes


# -- the transport --


class RayTransport:
    """One probe actor per Ray node, created on the node's first check; one actor call per check."""

    def __init__(self, address: str | None = None, python: str | None = None, **_: Any) -> None:
        self.address = address
        self.python = python
        self.closed = False
        self._bundle_ref: Any = None
        self._lock = threading.Lock()
        self._actors: dict[str, Any] = {}  # Ray node id -> its probe actor
        self._node_locks: dict[str, threading.Lock] = {}
        self._dead: dict[str, str] = {}  # Ray node id -> why it is unreachable: asked no more

    discover_nodes = staticmethod(discover_nodes)

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        """Run one check on `node`; a node Ray cannot reach is `unreachable`, never an exception."""
        start = time.monotonic()
        try:
            _connect(self.address)
            node_id = self._node_id(node)
            if node_id in self._dead:
                raise _Gone("unreachable", self._dead[node_id])
            actor = self._actor(node, node_id)
            line = json.dumps({**request, "timeout": timeout}).encode() + b"\n"
            python = node.vars.get("python") or self.python
            ref = actor.check.remote(line, python, timeout, KILL_GRACE_S)
            out = self._get(node, node_id, ref, timeout + max(KILL_GRACE_S, 0.0) + CALL_SLACK_S)
        except ValueError as exc:
            return ProbeAnswer("unreachable", error=str(exc), duration_s=time.monotonic() - start)
        except RuntimeError as exc:  # no ray here
            return ProbeAnswer("error", error=str(exc), duration_s=time.monotonic() - start)
        except _Gone as exc:
            status, reason = (exc.status, str(exc)) if not self.closed else ("error", INTERRUPTED)
            return ProbeAnswer(status, error=reason, duration_s=time.monotonic() - start)
        except TimeoutError:
            return self._timed_out(node, node_id, timeout, start)
        elapsed = time.monotonic() - start
        if self.closed:  # close() stopped the probe: what came back is not an answer
            return ProbeAnswer("error", error=INTERRUPTED, duration_s=elapsed)
        return _answer(out, timeout, elapsed)

    def close(self) -> None:
        """Stop every node's probe and actor; disconnect only where this module connected
        (never stop a cluster)."""
        global _connected_here
        self.closed = True
        ray = _ray()
        with self._lock:
            actors = list(self._actors.values())
            self._actors.clear()
        if actors and ray.is_initialized():
            with contextlib.suppress(Exception):  # best effort while shutting down
                ray.wait([a.stop.remote() for a in actors], num_returns=len(actors), timeout=STOP_WAIT_S)
            for actor in actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
        with _connect_lock:
            if _connected_here and ray.is_initialized():
                ray.shutdown()
            _connected_here = False
            self._bundle_ref = None

    # -- helpers --

    def _node_id(self, node: Node) -> str:
        """The node's Ray id: from discovery, else the alive node whose hostname or address matches."""
        if node.vars.get("ray_node_id"):
            return str(node.vars["ray_node_id"])
        wanted = {node.name, str(node.vars.get("address") or ""), str(node.vars.get("hostname") or "")}
        for info in _alive_nodes():
            if wanted & {info["NodeManagerHostname"], info["NodeManagerAddress"]}:
                return str(info["NodeID"])
        raise ValueError(f"no alive Ray node has hostname or address {node.name!r}")

    def _bundle(self) -> Any:
        with self._lock:
            if self._bundle_ref is None:
                self._bundle_ref = _ray().put(bundle_bytes())
            return self._bundle_ref

    def _actor(self, node: Node, node_id: str) -> Any:
        """The node's probe actor, created (and checked to sit on that node) on first use."""
        with self._lock:
            lock = self._node_locks.setdefault(node_id, threading.Lock())
        with lock:  # one actor per node, even where two nodes' names resolve to one Ray node
            if self.closed:
                raise _Gone("error", INTERRUPTED)
            if node_id in self._actors:
                return self._actors[node_id]
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            actor = _actor_class().options(scheduling_strategy=strategy).remote(self._bundle(), bundle_name())
            try:
                where = self._get(node, node_id, actor.node_id.remote(), ACTOR_START_S)
            except TimeoutError:
                _kill(actor)
                if _node_gone(node_id):
                    self._dead[node_id] = _died(node, "died before its probe actor started")
                    raise _Gone("unreachable", self._dead[node_id]) from None
                raise _Gone("error", f"the probe actor on Ray node {node.name} did not start within"
                                     f" {ACTOR_START_S:g}s (is the node overloaded? see `ray status`)"
                            ) from None
            if where != node_id:
                _kill(actor)
                raise _Gone("error", f"ran on the wrong node: {node.name} is {node_id[:12]}, its"
                                     f" probe actor started on {str(where)[:12]}")
            with self._lock:
                self._actors[node_id] = actor
            return actor

    def _get(self, node: Node, node_id: str, ref: Any, wait: float) -> Any:
        """ray.get; TimeoutError past `wait`; _Gone when the actor or its node is gone."""
        ray = _ray()
        try:
            return ray.get(ref, timeout=wait)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError from None
        except ray.exceptions.RayError as exc:
            self._forget(node_id)
            gone = _failure(node, node_id, exc)
            if gone.status == "unreachable":
                self._dead[node_id] = str(gone)
            raise gone from None

    def _forget(self, node_id: str) -> Any:
        with self._lock:
            return self._actors.pop(node_id, None)

    def _timed_out(self, node: Node, node_id: str, timeout: float, start: float) -> ProbeAnswer:
        """No answer from the actor at all (it kills a hung probe itself): drop the actor, and
        tell a dead node from a stuck call."""
        actor = self._forget(node_id)
        if actor is not None:
            _kill(actor)
        elapsed = time.monotonic() - start
        if _node_gone(node_id):
            self._dead[node_id] = _died(node, "stopped answering during the check")
            return ProbeAnswer("unreachable", error=self._dead[node_id], duration_s=elapsed)
        return ProbeAnswer("ok", {"timed_out": True, "reason": f"no answer from the node's probe actor"
                                  f" within {elapsed:.1f}s (check timeout {timeout:g}s); the actor was"
                                  " killed, the next check starts a fresh one"}, duration_s=elapsed)


def _answer(out: dict[str, Any], timeout: float, elapsed: float) -> ProbeAnswer:
    """What the actor sent back, as a ProbeAnswer."""
    if out.get("error"):
        return ProbeAnswer("error", error=str(out["error"]), duration_s=elapsed)
    if out.get("timed_out"):
        return ProbeAnswer("ok", {"timed_out": True, "reason": f"no answer within {timeout:g}s;"
                                  " the check's processes were killed"}, duration_s=elapsed)
    return parse_answer(out.get("stdout") or b"", out.get("stderr") or b"", out.get("returncode"), elapsed)


def _kill(actor: Any) -> None:
    with contextlib.suppress(Exception):  # it may be gone already
        _ray().kill(actor)


def _node_gone(node_id: str) -> bool:
    """Dead for the cluster, or its raylet no longer accepts connections: the cluster's health
    checks take many seconds to notice a raylet that was killed, its port is closed at once."""
    try:
        info = next((n for n in _ray().nodes() if n["NodeID"] == node_id), None)
    except Exception:  # cannot ask the cluster: do not claim the node is gone
        return False
    if info is None or not info.get("Alive"):
        return True
    try:
        socket.create_connection((info["NodeManagerAddress"], int(info["NodeManagerPort"])),
                                 timeout=CONNECT_CHECK_S).close()
    except (OSError, KeyError, ValueError):
        return True
    return False


def _died(node: Node, what: str) -> str:
    return (f"Ray node {node.name} {what}: its raylet is gone (the machine or Ray on it died; see"
            " `ray status` and that node's /tmp/ray/session_latest/logs/raylet.out)")


def _failure(node: Node, node_id: str, exc: BaseException) -> _Gone:
    """A Ray error: `unreachable` where the node is gone, else a one-line `error`."""
    ray = _ray()
    shown = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) and exc.cause else exc
    deadline = time.monotonic() + NODE_DEATH_WAIT_S
    while True:  # a dead actor often comes before the cluster's word that its node is dead
        if _node_gone(node_id):
            return _Gone("unreachable", _died(node, "died" if isinstance(shown, ray.exceptions.RayActorError)
                                              else "is not alive in the Ray cluster any more"))
        if time.monotonic() >= deadline or not isinstance(shown, ray.exceptions.RayActorError):
            break
        time.sleep(0.2)
    if isinstance(shown, getattr(ray.exceptions, "ActorUnschedulableError", ())):
        return _Gone("unreachable", f"Ray cannot place the probe actor on node {node.name}"
                                    f" ({_first_line(shown)}); see `ray status`")
    if isinstance(shown, ray.exceptions.RayActorError):
        return _Gone("error", f"the probe actor on Ray node {node.name} died: {_first_line(shown)}"
                              " (the next check starts a fresh one)")
    return _Gone("error", f"Ray call failed: {type(shown).__name__}: {_first_line(shown)}")
