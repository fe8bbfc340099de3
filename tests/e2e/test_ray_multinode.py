"""`runbook run training-hang --executor ray` on eight real Ray nodes: a head and seven workers.

One cluster for the module (scenarios/clusters/ray.py: one CPU and a 78 MiB object store per
node, everything on loopback). The nodes share this machine, so each sees the same faulty
job and must reach the same conclusion. Then worker nodes die: one between two checks of a
walk, one in the middle of a check; each is `unreachable` with a reason, and the rest go on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from runbook.transports import Node, ProbeAnswer
from scenarios.clusters.ray import RayCluster
from scenarios.jobs import Scenario, start
from tests import ray_fixture

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.e2e

NODES = 8
EXPECTED = "dataloader-accumulating"


make_ray_cluster = ray_fixture.make_ray_cluster


@pytest.fixture(scope="module")
def cluster(make_ray_cluster: ray_fixture.MakeRayCluster) -> RayCluster:
    return make_ray_cluster(NODES)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    # Speed 0.5: it stays in its loader (about 240 s) for the whole module.
    job = start("loader_accumulating", tmp_path_factory.mktemp("ray8") / "job", speed=0.5)
    try:
        assert job.wait_for_log(r"Token buffer:", timeout=60)
        yield job
    finally:
        job.stop()


def _alive(cluster: RayCluster) -> int:
    return NODES - len(cluster.removed)


def _victim(cluster: RayCluster, nodes: list[Node]) -> Node:
    """A worker node still up, and not the one this process's Ray driver is attached to."""
    here = ray.get_runtime_context().get_node_id()
    return next(n for n in reversed(nodes) if n.vars["ray_node_id"] in cluster.worker_ids()
                and n.vars["ray_node_id"] not in [*cluster.removed, here])


def test_every_ray_node_concludes(cluster: RayCluster, job: Scenario) -> None:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "runbook", "run", "training-hang", "--executor", "ray",
         "--ray-address", cluster.address, "--set", f"log={job.log}", "--set", f"pid={job.pid}",
         "--format", "json"],
        capture_output=True, text=True, timeout=180, env={**os.environ, "RUNBOOK_LANG": "en"})
    report = json.loads(out.stdout)
    nodes = report["nodes"]
    assert len(nodes) == NODES and len({n["node"] for n in nodes}) == NODES, out.stderr[-2000:]
    assert {n["status"] for n in nodes} == {"concluded"}, nodes
    assert {n["conclusion"]["id"] for n in nodes} == {EXPECTED}
    print(f"\n8 Ray nodes concluded in {time.monotonic() - started:.1f}s (the run, as a subprocess)")


def test_a_node_killed_between_two_checks_is_unreachable(cluster: RayCluster, job: Scenario) -> None:
    from runbook.library.runbooks import load_library
    from runbook.run.params import parse_sets
    from runbook.run.walk import Evidence, NodeOutcome, Walk, WalkOptions
    from runbook.transports.ray_cluster import RayTransport, discover_nodes

    library = load_library()
    runbook = library.get("training-hang")
    assert runbook is not None
    transport = RayTransport(address=cluster.address)
    try:
        nodes = discover_nodes(cluster.address)
        assert len(nodes) == _alive(cluster)
        victim = _victim(cluster, nodes)

        class KillAfterFirstStep:
            """The victim's node dies once its first check is decided, before its second runs."""

            def on_step(self, outcome: NodeOutcome, evidence: Evidence) -> None:
                if outcome.node is victim and victim.vars["ray_node_id"] not in cluster.removed:
                    cluster.kill(victim.vars["ray_node_id"])

            def on_node_done(self, outcome: NodeOutcome) -> None:
                pass

        params = parse_sets(runbook, [f"log={job.log}", f"pid={job.pid}"])
        outcomes = Walk(library, runbook, nodes, transport, params, WalkOptions(forks=NODES, deadline_s=120),
                        [KillAfterFirstStep()]).run()
    finally:
        transport.close()
    lost = next(o for o in outcomes if o.node is victim)
    assert lost.status == "unreachable", (lost.status, lost.reason)
    assert victim.name in (lost.reason or "") and "ray status" in (lost.reason or "")
    assert "\n" not in (lost.reason or "")
    print(f"\nkilled between two checks: {lost.reason}")
    others = [o for o in outcomes if o is not lost]
    assert len(others) == len(nodes) - 1
    assert all(o.status == "concluded" and o.conclusion and o.conclusion.id == EXPECTED for o in others), \
        [(o.node.name, o.status, o.reason) for o in others]


def test_a_node_killed_during_a_check_is_unreachable(cluster: RayCluster) -> None:
    from runbook.transports.ray_cluster import RayTransport, discover_nodes

    transport = RayTransport(address=cluster.address)
    system = {"check": "system", "with": {}}

    def ask_all(nodes: list[Node]) -> list[ProbeAnswer]:
        with ThreadPoolExecutor(len(nodes)) as pool:
            return list(pool.map(lambda n: transport.run_check(n, system, 10), nodes))

    try:
        nodes = discover_nodes(cluster.address)
        victim = _victim(cluster, nodes)
        # The victim and two nodes still up (the cluster may not know yet of an earlier death)
        # get their actors first, as in a run: each starts a Ray worker, seconds of CPU here.
        up = [n for n in nodes if n is not victim and n.vars["ray_node_id"] not in cluster.removed][:2]
        assert [a.status for a in ask_all([victim, *up])] == ["ok"] * 3
        killer = threading.Timer(1.5, cluster.kill, args=(victim.vars["ray_node_id"],))
        killer.start()
        started = time.monotonic()
        answer = transport.run_check(victim, {"check": "command", "with": {"run": "sleep 20.75"}}, 15)
        took = time.monotonic() - started
        killer.join()
        assert answer.status == "unreachable", answer
        assert victim.name in (answer.error or "") and "\n" not in (answer.error or "")
        assert took < 15, took  # it did not wait for the check's own timeout
        answers = ask_all(up)
        assert [a.status for a in answers] == ["ok"] * len(up), [a.error for a in answers]
        again = transport.run_check(victim, system, 10)  # asked no more: the same reason at once
        assert again.status == "unreachable" and again.error == answer.error and again.duration_s < 1
    finally:
        transport.close()
    print(f"\nkilled during a check: reported unreachable {took - 1.5:.1f}s after it died: {answer.error};"
          f" the others answered in {[round(a.duration_s, 2) for a in answers]}s")
