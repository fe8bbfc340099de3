"""A real multi-node Ray cluster on this machine: a head and N-1 worker nodes, each a raylet of its own.

Standard library only at import time (ray is imported when a cluster starts). Each node is
small: one CPU, a 78 MiB object store, no dashboard, and a custom resource naming it
(``node01`` ... ``nodeNN``), so that tests and benchmarks can tell the nodes apart. All nodes
share this machine (its hostname, processes and files), so each sees the same training job.

Ray starts its nodes' processes itself (``ray.cluster_utils.Cluster``); the cluster is a
`DaemonGroup` (group.py) whose daemons are those processes, adopted (`Daemon.adopt`): start
with retries, `stop()` and the context manager are the group's, and whatever of a node
outlives Ray's own shutdown is killed with its descendants.

    from scenarios.clusters.ray import RayCluster
    with RayCluster.start(8) as rc:
        rc.address                    # for `runbook run --executor ray --ray-address ...`
        rc.kill(rc.worker_ids()[-1])  # that node's raylet dies, with its workers

From pytest: ``tests/ray_fixture.py`` has the fixtures ``ray_cluster`` (3 nodes, module scope)
and ``make_ray_cluster`` (a factory).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import threading
from pathlib import Path
from typing import Any

from scenarios.clusters.daemon import Daemon
from scenarios.clusters.group import DaemonGroup
from scenarios.clusters.net import host_name
from scenarios.clusters.procs import descendants

OBJECT_STORE_BYTES = 78 * 1024 * 1024  # Ray's minimum is 75 MiB
LOOPBACK = "127.0.0.2"  # every node and the GCS listen on loopback (Ray turns 127.0.0.1 into a public IP)
SHUTDOWN_WAIT_S = 30.0  # Cluster.shutdown can hang on a node that is already gone


def node_args(index: int) -> dict[str, Any]:
    """The arguments of node `index` (0: the head)."""
    return {"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES, "node_ip_address": LOOPBACK,
            "resources": {host_name(index): 1}}


def requirements_missing() -> list[str]:
    """Why a Ray cluster cannot be started here (empty list: it can)."""
    return [] if importlib.util.find_spec("ray") else ["`ray` is not importable (pip install 'ray[default]')"]


class RayCluster(DaemonGroup):
    """A started ray.cluster_utils.Cluster; the driver that started it is not connected to it."""

    retry_on = (Exception,)  # ray raises a bare Exception for a node that did not start
    what = "Ray"

    def __init__(self, n: int) -> None:
        super().__init__(None)
        self.n = n
        self.cluster: Any = None
        self.removed: list[str] = []  # the ids of the nodes kill() killed
        self._daemons: list[Daemon] = []

    @classmethod
    def start(cls, n: int, attempts: int = 2) -> RayCluster:
        """Head + n-1 workers, waited for until every node is alive. On a loaded machine a
        raylet may give up waiting for its agents (Ray's fixed 15 s): then all of it again."""
        if n < 1:
            raise ValueError("a Ray cluster needs at least one node")
        return cls._start(lambda: cls(n), attempts)

    def _boot(self) -> None:
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True,
                               head_node_args={**node_args(0), "include_dashboard": False})
        self._adopt(self.cluster.head_node, 0)
        for index in range(1, self.n):
            self._adopt(self.cluster.add_node(wait=False, **node_args(index)), index)
        self.cluster.wait_for_nodes()

    def _adopt(self, node: Any, index: int) -> None:
        """Record every process Ray started for node `index`, with its log files."""
        for kind, infos in node.all_processes.items():
            for info in infos:
                logs = [Path(f) for f in (info.stdout_file, info.stderr_file) if isinstance(f, str)]
                self._daemons.append(Daemon.adopt(f"{host_name(index)} {kind}", info.process.pid, logs))

    def daemons(self) -> list[Daemon]:
        return list(self._daemons)

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
        on_node = descendants(raylet)
        self.cluster.remove_node(node, allow_graceful=False)
        for pid in on_node:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.removed.append(node_id)

    def _shutdown(self) -> None:
        """Cluster.shutdown, in a thread that is not waited for past SHUTDOWN_WAIT_S."""
        if self.cluster is None:
            return
        stopper = threading.Thread(target=self.cluster.shutdown, name="ray-cluster-stop", daemon=True)
        stopper.start()
        stopper.join(timeout=SHUTDOWN_WAIT_S)
