"""The Ray transport against a real local three-node Ray cluster (no mocks): one long-lived probe
actor per node."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from runbook.transports import Node, get_transport, ray_cluster  # noqa: E402
from runbook.transports.ray_cluster import RayTransport, discover_nodes  # noqa: E402
from scenarios.clusters.ray import RayCluster  # noqa: E402
from tests import ray_fixture  # noqa: E402

SYSTEM = {"check": "system", "with": {}}


make_ray_cluster = ray_fixture.make_ray_cluster


@pytest.fixture(scope="module")
def cluster(make_ray_cluster: ray_fixture.MakeRayCluster) -> Iterator[Cluster]:
    """Three nodes on loopback, one CPU and a small object store each; this driver leaves
    before the cluster stops."""
    rc: RayCluster = make_ray_cluster(3)
    try:
        yield rc.cluster
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def transport(cluster: Cluster) -> Iterator[RayTransport]:
    transport = RayTransport(address=cluster.address)
    yield transport
    transport.close()
    assert not ray.is_initialized()


@pytest.fixture(scope="module")
def nodes(cluster: Cluster, transport: RayTransport) -> list[Node]:
    return discover_nodes(cluster.address)


def test_no_cluster_at_an_address_is_a_clear_value_error_quickly() -> None:
    # First in this file: before the cluster fixture connects this process to a cluster.
    if ray.is_initialized():
        pytest.skip("this process is already a Ray driver; the address would not be used")
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"no Ray cluster at 127\.0\.0\.1:1 .*ray start --head"):
        discover_nodes("127.0.0.1:1")
    assert time.monotonic() - start < 5
    assert not ray.is_initialized()


def test_the_transport_is_found_by_name_and_connects_only_when_used() -> None:
    assert isinstance(get_transport("ray", address="127.0.0.1:1"), RayTransport)
    assert not ray.is_initialized()


def test_discovery_names_every_alive_node_once(nodes: list[Node]) -> None:
    assert len(nodes) == 3
    assert len({n.name for n in nodes}) == 3
    assert len({n.vars["ray_node_id"] for n in nodes}) == 3
    assert all(n.transport == "ray" and n.vars["address"] and n.vars["hostname"] for n in nodes)
    # All three share this machine's hostname, so each name carries its node id's start.
    assert all(n.name == f"{n.vars['hostname']}-{n.vars['ray_node_id'][:6]}" for n in nodes)
    assert nodes == sorted(nodes, key=lambda n: (n.vars["hostname"], n.vars["ray_node_id"]))
    assert RayTransport.discover_nodes is discover_nodes


def test_a_check_runs_on_the_node_it_is_pinned_to(transport: RayTransport, nodes: list[Node]) -> None:
    for node in nodes:
        actor = transport._actor(node, node.vars["ray_node_id"])
        assert ray.get(actor.node_id.remote(), timeout=30) == node.vars["ray_node_id"]
        answer = transport.run_check(node, SYSTEM, 10)
        assert answer.status == "ok", answer.error
        assert answer.result["timed_out"] is False and answer.result


def test_one_probe_per_node_answers_every_check(transport: RayTransport, nodes: list[Node]) -> None:
    # The command's parent is the serving probe: the same process for every check of a node.
    parent = {"check": "command", "with": {"run": "echo $PPID"}}
    per_node = [{transport.run_check(node, parent, 10).result["stdout"].strip() for _ in range(3)}
                for node in nodes]
    assert all(len(pids) == 1 for pids in per_node), per_node
    assert len({pid for pids in per_node for pid in pids}) == len(nodes)
    assert len(transport._actors) == len(nodes)


def test_a_node_named_by_hostname_or_address_alone_is_found(transport: RayTransport,
                                                            nodes: list[Node]) -> None:
    answer = transport.run_check(Node(nodes[0].vars["address"], "ray"), SYSTEM, 10)
    assert answer.status == "ok", answer.error
    answer = transport.run_check(Node("no-such-host", "ray"), SYSTEM, 10)
    assert answer.status == "unreachable" and "no-such-host" in answer.error


def test_a_missing_python_on_the_node_is_an_error(transport: RayTransport, nodes: list[Node]) -> None:
    node = Node(nodes[0].name, "ray", {**nodes[0].vars, "python": "/nonexistent/python3"})
    answer = transport.run_check(node, SYSTEM, 10)
    assert answer.status == "error" and "cannot start /nonexistent/python3" in answer.error


def test_a_hanging_command_is_killed_within_the_timeout(transport: RayTransport,
                                                         nodes: list[Node]) -> None:
    start = time.monotonic()
    answer = transport.run_check(nodes[1], {"check": "command", "with": {"run": "sleep 30.25"}}, 1.5)
    assert time.monotonic() - start < 5
    assert answer.status == "ok" and answer.result["timed_out"] is True
    assert _wait_until_gone(b"sleep\x0030.25")


def test_a_probe_that_outlives_its_timeout_is_killed_on_the_node(
        transport: RayTransport, nodes: list[Node], monkeypatch: pytest.MonkeyPatch) -> None:
    # The probe believes it has 60 s; the task on the node stops it after 1 s (60 - 59).
    monkeypatch.setattr(ray_cluster, "KILL_GRACE_S", -59.0)
    request = {"check": "command", "with": {"run": "exec sleep 60.25"}}
    start = time.monotonic()
    answer = transport.run_check(nodes[2], request, 60)
    assert time.monotonic() - start < 5
    assert answer.status == "ok" and answer.result["timed_out"] is True
    assert _wait_until_gone(b"sleep\x0060.25")


def test_the_actors_code_needs_no_runbook_on_the_node(tmp_path: Path) -> None:
    data = ray.cloudpickle.dumps(ray_cluster._actor_class().__ray_metadata__.modified_class)
    script = ("import sys; sys.modules['runbook'] = None; import ray.cloudpickle as cp;"
              " print(cp.loads(sys.stdin.buffer.read()).__name__)")
    done = subprocess.run([sys.executable, "-c", script], input=data, capture_output=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-500:]
    assert done.stdout.strip() == b"ProbeServer"


def test_a_check_after_a_killed_probe_starts_a_fresh_one(
        transport: RayTransport, nodes: list[Node], monkeypatch: pytest.MonkeyPatch) -> None:
    parent = {"check": "command", "with": {"run": "echo $PPID"}}
    before = transport.run_check(nodes[0], parent, 10).result["stdout"].strip()
    monkeypatch.setattr(ray_cluster, "KILL_GRACE_S", -29.0)  # the actor kills the probe after 1 s
    hung = transport.run_check(nodes[0], {"check": "command", "with": {"run": "sleep 30.5"}}, 30)
    assert hung.status == "ok" and hung.result["timed_out"] is True
    monkeypatch.setattr(ray_cluster, "KILL_GRACE_S", 0.5)
    after = transport.run_check(nodes[0], parent, 10)
    assert after.status == "ok" and after.result["stdout"].strip() != before


def test_a_removed_node_is_unreachable_while_the_others_answer(
        cluster: Cluster, transport: RayTransport, nodes: list[Node]) -> None:
    here = ray.get_runtime_context().get_node_id()  # the node this driver is attached to stays
    workers = {n.node_id: n for n in cluster.worker_nodes if n.node_id != here}
    victim = [n for n in nodes if n.vars["ray_node_id"] in workers][-1]
    cluster.remove_node(workers[victim.vars["ray_node_id"]])
    start = time.monotonic()
    answer = transport.run_check(victim, SYSTEM, 5)
    assert answer.status == "unreachable", answer
    assert victim.name in answer.error and "\n" not in answer.error
    assert time.monotonic() - start < 10
    for node in nodes:
        if node is not victim:
            assert transport.run_check(node, SYSTEM, 10).status == "ok"


def _wait_until_gone(cmdline: bytes, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _processes_with(cmdline):
            return True
        time.sleep(0.1)
    return False


def _processes_with(cmdline: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes().rstrip(b"\0") == cmdline and not _is_zombie(entry):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _is_zombie(entry: Path) -> bool:
    try:
        return (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


# -- the actor's class alone, in this process (no cluster): how it keeps and stops its probe --


def test_the_probe_server_keeps_one_probe_and_kills_a_hung_one(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from runbook.transports._ray_actor import ProbeServer
    from runbook.transports.bundle import bundle_bytes, bundle_name

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    server = ProbeServer(bundle_bytes(), bundle_name())
    assert server.path.startswith(str(tmp_path)) and not server.install_error
    try:
        ask = b'{"check": "command", "with": {"run": "echo $PPID"}, "timeout": 5}\n'
        first, again = (_parent(server.check(ask, None, 5, 0.5)) for _ in range(2))
        assert first == again  # the same serving probe
        pid = server.probe.proc.pid  # type: ignore[union-attr]
        hung = b'{"check": "command", "with": {"run": "sleep 40.25"}, "timeout": 60}\n'
        start = time.monotonic()
        assert server.check(hung, None, 1, 0) == {"timed_out": True}  # the probe thinks it has 60 s
        assert time.monotonic() - start < 5 and server.probe is None
        assert _wait_until_gone(b"sleep\x0040.25")
        assert _parent(server.check(ask, None, 5, 0.5)) != first  # a fresh probe
        assert server.probe is not None and server.probe.proc.pid != pid
    finally:
        server.stop()
    assert server.probe is None


def _parent(out: dict[str, Any]) -> str:
    return str(json.loads(out["stdout"])["result"]["stdout"]).strip()


def test_the_probe_server_reports_a_missing_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runbook.transports._ray_actor import ProbeServer
    from runbook.transports.bundle import bundle_bytes, bundle_name

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    server = ProbeServer(bundle_bytes(), bundle_name())
    out = server.check(b'{"check": "system"}\n', "/nonexistent/python3", 5, 0.5)
    assert out["error"].startswith("cannot start /nonexistent/python3")


def test_stop_ends_a_check_waiting_on_a_busy_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runbook.transports._ray_actor import ProbeServer
    from runbook.transports.bundle import bundle_bytes, bundle_name

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    server = ProbeServer(bundle_bytes(), bundle_name())
    busy = b'{"check": "command", "with": {"run": "sleep 40.5"}, "timeout": 60}\n'
    out: list[dict[str, Any]] = []
    waiting = threading.Thread(target=lambda: out.append(server.check(busy, None, 60, 0.5)))
    waiting.start()
    deadline = time.monotonic() + 20
    while not _processes_with(b"sleep\x0040.5") and time.monotonic() < deadline:
        time.sleep(0.05)
    began = time.monotonic()
    server.stop()  # as the actor's second thread does while check() waits
    waiting.join(timeout=10)
    assert not waiting.is_alive() and time.monotonic() - began < 5
    assert "timed_out" not in out[0] and server.probe is None
    assert _wait_until_gone(b"sleep\x0040.5")


# The actor as Ray ships it to a node: pickled by value, then run where runbook cannot be imported.
_NO_RUNBOOK = """
import json, pickle, sys

class NoRunbook:
    def find_spec(self, name, path=None, target=None):
        if name == "runbook" or name.startswith("runbook."):
            raise ImportError("runbook is not installed on this node")

sys.meta_path.insert(0, NoRunbook())
server_class = pickle.loads(open(sys.argv[1], "rb").read())
server = server_class(open(sys.argv[2], "rb").read(), sys.argv[3])
try:
    out = server.check(b'{"check": "system"}\\n', None, 20, 0.5)
finally:
    server.stop()
print(json.dumps({"answer": json.loads(out["stdout"]), "imported": sorted(
    m for m in sys.modules if m.split(".")[0] == "runbook")}))
"""


def test_the_actor_runs_where_runbook_is_not_installed(tmp_path: Path) -> None:
    from runbook.transports import _ray_actor
    from runbook.transports.bundle import bundle_bytes, bundle_name

    ray_cluster._actor_class()  # registers the actor's modules to travel by value
    (tmp_path / "actor.pkl").write_bytes(ray.cloudpickle.dumps(_ray_actor.ProbeServer))
    (tmp_path / "bundle").write_bytes(bundle_bytes())
    done = subprocess.run([sys.executable, "-c", _NO_RUNBOOK, str(tmp_path / "actor.pkl"),
                           str(tmp_path / "bundle"), bundle_name()], capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["imported"] == [] and "hostname" in out["answer"]["result"], out
