"""The Ray transport: the probe bundle runs as a Ray task pinned to each node of a running cluster.

The driver connects to the cluster (it never starts one), puts the probe bundle
in the object store once, and runs one zero-CPU task per check, pinned with a
hard node affinity. On the node the task writes the bundle to the cache
directory (once per content hash) and runs it with the Ray worker's own Python,
which is the training environment's, in a new session; on timeout it kills the
probe's whole process group. The task's code is shipped by value, so the nodes
need Ray but not runbook.

`ray` is an optional dependency: it is imported here, and only when this
transport is used.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from runbook.transports import Node, ProbeAnswer
from runbook.transports.bundle import bundle_bytes, bundle_name
from runbook.transports.local import parse_answer

# How long past the check's timeout the task waits before killing the probe (on the node).
KILL_GRACE_S = 0.5
# How long past the check's timeout the driver waits for the task: scheduling, worker start.
SCHEDULING_SLACK_S = 3.0
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


# -- the task that runs on the node --


def _node_helpers() -> tuple[Callable[[bytes, str], str], Callable[[Any], None]]:
    """(install, stop) for the remote task. Nested, so Ray ships their code by value with the
    task that closes over them: nodes need no runbook installed."""

    def install(bundle: bytes, name: str) -> str:
        import os
        import tempfile
        from pathlib import Path

        for base in (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"),
                     Path(tempfile.gettempdir()) / f"runbook-{os.getuid()}"):
            target = base / "runbook" / name
            try:
                if not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    tmp = target.with_name(f"{name}.tmp{os.getpid()}")
                    tmp.write_bytes(bundle)
                    tmp.replace(target)
                return str(target)
            except OSError:
                continue
        raise OSError(f"cannot write the probe bundle under ~/.cache or {tempfile.gettempdir()}")

    def stop(proc: Any) -> None:
        import contextlib
        import os
        import signal
        import subprocess

        for signum, wait in ((signal.SIGTERM, 0.3), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signum)
            try:
                proc.communicate(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    return install, stop


@lru_cache(maxsize=1)
def _probe_task() -> Any:
    """The remote task. Nested (as are its helpers), so Ray ships its code by value."""
    install, stop = _node_helpers()

    def _run_probe(bundle: bytes, name: str, request_json: str, python: str | None,
                   timeout: float, grace: float = 0.5) -> dict[str, Any]:
        import subprocess
        import sys

        import ray

        node_id = ray.get_runtime_context().get_node_id()
        answer: dict[str, Any] = {"node_id": node_id, "stdout": b"", "stderr": b"",
                                  "returncode": None, "timed_out": False}
        argv = [python or sys.executable, install(bundle, name)]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            return {**answer, "error": f"cannot start {argv[0]}: {exc.strerror or exc}"}
        try:
            out, err = proc.communicate(request_json.encode(), timeout=max(0.1, timeout + grace))
        except subprocess.TimeoutExpired:
            stop(proc)
            return {**answer, "timed_out": True}
        except BaseException:  # ray.cancel() interrupts the task: take the probe with it
            stop(proc)
            raise
        return {**answer, "stdout": out, "stderr": err, "returncode": proc.returncode}

    return _ray().remote(num_cpus=0, max_retries=0)(_run_probe)


# -- the transport --


class RayTransport:
    """Runs each check as a Ray task pinned to the node's Ray node id."""

    def __init__(self, address: str | None = None, python: str | None = None, **_: Any) -> None:
        self.address = address
        self.python = python
        self._bundle_ref: Any = None
        self._lock = threading.Lock()
        self._running: set[Any] = set()

    discover_nodes = staticmethod(discover_nodes)

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        """Run one check on `node`; a node Ray cannot reach is `unreachable`, never an exception."""
        start = time.monotonic()
        try:
            _connect(self.address)
            node_id = self._node_id(node)
            ref = self._submit(node, node_id, request, timeout)
        except ValueError as exc:
            return ProbeAnswer("unreachable", error=str(exc), duration_s=time.monotonic() - start)
        except RuntimeError as exc:  # no ray here
            return ProbeAnswer("error", error=str(exc), duration_s=time.monotonic() - start)
        try:
            return self._collect(node, node_id, ref, timeout, start)
        finally:
            self._running.discard(ref)

    def close(self) -> None:
        """Stop tasks still running; disconnect only where this module connected (never stop a cluster)."""
        global _connected_here
        ray = _ray()
        for ref in list(self._running):
            with contextlib.suppress(Exception):  # best effort while shutting down
                ray.cancel(ref)  # the task kills its probe's process group on the way out
        self._running.clear()
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

    def _submit(self, node: Node, node_id: str, request: dict[str, Any], timeout: float) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        python = node.vars.get("python") or self.python
        strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        payload = json.dumps({**request, "timeout": timeout})
        ref = _probe_task().options(scheduling_strategy=strategy, name=f"runbook-probe:{node.name}").remote(
            self._bundle(), bundle_name(), payload, python, timeout, KILL_GRACE_S)
        self._running.add(ref)
        return ref

    def _collect(self, node: Node, node_id: str, ref: Any, timeout: float, start: float) -> ProbeAnswer:
        ray = _ray()
        try:
            out = ray.get(ref, timeout=timeout + max(KILL_GRACE_S, 0.0) + SCHEDULING_SLACK_S)
        except ray.exceptions.GetTimeoutError:
            return self._timed_out(node, node_id, ref, timeout, start)
        except ray.exceptions.RayError as exc:
            return _failure(node, exc, time.monotonic() - start)
        elapsed = time.monotonic() - start
        if out.get("node_id") != node_id:
            return ProbeAnswer("error", error=f"ran on the wrong node: {node.name} is {node_id[:12]},"
                               f" the task ran on {str(out.get('node_id'))[:12]}", duration_s=elapsed)
        if out.get("error"):
            return ProbeAnswer("error", error=str(out["error"]), duration_s=elapsed)
        if out.get("timed_out"):
            return ProbeAnswer("ok", {"timed_out": True, "reason": f"no answer within {timeout:g}s;"
                                      " the check's processes were killed"}, duration_s=elapsed)
        return parse_answer(out["stdout"], out["stderr"], out["returncode"], elapsed)

    def _timed_out(self, node: Node, node_id: str, ref: Any, timeout: float, start: float) -> ProbeAnswer:
        ray = _ray()
        with contextlib.suppress(Exception):  # the task may have finished, or its worker be gone
            ray.cancel(ref, force=True)
        elapsed = time.monotonic() - start
        if not _is_alive(node_id):
            return ProbeAnswer("unreachable", error=f"Ray node {node.name} is no longer alive",
                               duration_s=elapsed)
        return ProbeAnswer("ok", {"timed_out": True, "reason": f"no answer from the Ray task within"
                                  f" {elapsed:.1f}s (check timeout {timeout:g}s); the task was cancelled"},
                           duration_s=elapsed)


def _is_alive(node_id: str) -> bool:
    try:
        return node_id in {info["NodeID"] for info in _alive_nodes()}
    except Exception:  # cannot ask the cluster: do not claim the node is gone
        return True


# Ray errors that mean the node (or its worker) is gone, and how the report says it.
_GONE = {
    "TaskUnschedulableError": "is not alive in the Ray cluster any more",
    "NodeDiedError": "died while running the check",
    "WorkerCrashedError": "lost its Ray worker while running the check",
    "LocalRayletDiedError": "cannot be reached: this machine's raylet died",
}


def _failure(node: Node, exc: BaseException, elapsed: float) -> ProbeAnswer:
    """A Ray error: `unreachable` where the node or its worker is gone, else a one-line `error`."""
    ray = _ray()
    shown = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) and exc.cause else exc
    for name, phrase in _GONE.items():
        gone = getattr(ray.exceptions, name, None)
        if gone is not None and isinstance(shown, gone):
            return ProbeAnswer("unreachable", error=f"Ray node {node.name} {phrase} ({name})",
                               duration_s=elapsed)
    return ProbeAnswer("error", error=f"Ray task failed: {type(shown).__name__}: {_first_line(shown)}",
                       duration_s=elapsed)
