"""A real multi-node Ray cluster on this machine: a head and N-1 worker nodes, each a raylet of its own.

Standard library only at import time (ray is imported when a cluster starts). Each node is
small: one CPU, a 78 MiB object store, no dashboard, and a custom resource naming it
(``node01`` ... ``nodeNN``), so that tests and benchmarks can tell the nodes apart. All nodes
share this machine (its hostname, processes and files), so each sees the same training job.

    from scenarios.ray_cluster import RayCluster
    with RayCluster.start(8) as rc:
        rc.address                    # for `runbook run --executor ray --ray-address ...`
        rc.kill(rc.worker_ids()[-1])  # that node's raylet dies, with its workers
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from scenarios._procs import children
from scenarios.cluster import host_name

OBJECT_STORE_BYTES = 78 * 1024 * 1024  # Ray's minimum is 75 MiB
LOOPBACK = "127.0.0.2"  # every node and the GCS listen on loopback (Ray turns 127.0.0.1 into a public IP)
SHUTDOWN_WAIT_S = 30.0  # Cluster.shutdown can hang on a node that is already gone


def node_args(index: int) -> dict[str, Any]:
    """The arguments of node `index` (0: the head)."""
    return {"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES, "node_ip_address": LOOPBACK,
            "resources": {host_name(index): 1}}


@dataclass
class RayCluster:
    """A started ray.cluster_utils.Cluster; the driver that started it is not connected to it."""

    cluster: Any
    started_s: float = 0.0  # how long the cluster took to come up
    removed: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, n: int, attempts: int = 2) -> RayCluster:
        """Head + n-1 workers, waited for until every node is alive. On a loaded machine a
        raylet may give up waiting for its agents (Ray's fixed 15 s): then all of it again."""
        if n < 1:
            raise ValueError("a Ray cluster needs at least one node")
        for attempt in range(1, attempts + 1):
            begin = time.monotonic()
            try:
                return cls(_start(n), time.monotonic() - begin)
            except Exception:  # ray raises a bare Exception for a node that did not start
                if attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def node_ids(self) -> list[str]:
        """Every node's Ray id, the head's first."""
        return [self.cluster.head_node.node_id] + self.worker_ids()

    def worker_ids(self) -> list[str]:
        return [node.node_id for node in self.cluster.worker_nodes]

    def kill(self, node_id: str) -> None:
        """The node dies as a machine would, with every process on it: its raylet and Ray's own
        processes, and the workers and their children (a worker outlives its raylet a while)."""
        node = next(node for node in self.cluster.worker_nodes if node.node_id == node_id)
        raylet = node.all_processes["raylet"][0].process.pid
        on_node = _descendants(raylet)
        self.cluster.remove_node(node, allow_graceful=False)
        for pid in on_node:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.removed.append(node_id)

    def stop(self) -> None:
        _shutdown(self.cluster)

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _start(n: int) -> Any:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={**node_args(0), "include_dashboard": False})
    try:
        for index in range(1, n):
            cluster.add_node(wait=False, **node_args(index))
        cluster.wait_for_nodes()
    except BaseException:
        _shutdown(cluster)
        raise
    return cluster


def _descendants(pid: int) -> list[int]:
    found, todo = [], children(pid)
    while todo:
        kid = todo.pop()
        found.append(kid)
        todo.extend(children(kid))
    return found


def _shutdown(cluster: Any) -> None:
    """Cluster.shutdown, in a thread that is not waited for past SHUTDOWN_WAIT_S."""
    stopper = threading.Thread(target=cluster.shutdown, name="ray-cluster-stop", daemon=True)
    stopper.start()
    stopper.join(timeout=SHUTDOWN_WAIT_S)
