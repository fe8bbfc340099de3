"""Pytest fixtures for the fake multi-host cluster of scenarios/clusters/ssh.py.

Not a conftest (tests/conftest.py is left alone): a test module imports the fixtures it
uses by assignment (an assignment, not `from ... import`, keeps ruff's F811 quiet when a
test argument has the fixture's name)::

    from tests import cluster_fixture

    make_cluster = cluster_fixture.make_cluster
    cluster = cluster_fixture.cluster

    def test_something(make_cluster):
        cl = make_cluster(4, python_missing={"node04"}, wrong_host_key={"node03"})
        assert cl.ssh("node01", "hostname").stdout.strip() == "node01"

Fixtures:
    make_cluster  factory make_cluster(n, **Cluster.start kwargs) -> Cluster; every cluster
                  it made is stopped at teardown. Each gets its own directory and, unless
                  port= is given, a free port, so parallel test runs do not collide.
    cluster       3 plain hosts (node01..node03), function scope.
    cluster8      8 hosts, module scope; node07 has no python3.
    delay_proxy   factory delay_proxy(address, port, delay_s) -> DelayProxy: a TCP proxy on
                  127.0.0.1 that waits delay_s before forwarding each connection (a slow link
                  or a slow sshd); stopped at teardown. Pair it with Cluster.add_alias.

Every fixture skips the test, with the reason shown in the skip and as a warning, when the
machine cannot run one (no /usr/sbin/sshd, no util-linux tools, or not root), except in CI,
where it fails (tests/daemon_fixture.py).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.daemon_fixture import Availability, Factory, factory_fixture

# after tests.daemon_fixture, which makes sure `scenarios` is the repository's package
from scenarios.clusters.ssh import Cluster, requirements_missing  # isort: skip

SSH = Availability("fake cluster", tuple(requirements_missing()))
needs_cluster = SSH.mark

MakeCluster = Callable[..., Cluster]


def _factory(tmp_path_factory: pytest.TempPathFactory) -> Factory[Cluster]:
    # port=None: a free port, retried on collision
    return Factory(Cluster.start, SSH, tmp_path_factory, "cluster", base_arg="base",
                   defaults={"port": None})


make_cluster = factory_fixture("make_cluster", _factory,
                               doc="make_cluster(n, **kwargs) -> a started Cluster, stopped at teardown.")
_module_cluster_factory = factory_fixture("_module_cluster_factory", _factory, scope="module")


@pytest.fixture
def cluster(make_cluster: MakeCluster) -> Cluster:
    """Three hosts, node01..node03, with python3, the right host keys."""
    return make_cluster(3)


@pytest.fixture(scope="module")
def cluster8(_module_cluster_factory: MakeCluster) -> Cluster:
    """Eight hosts, node01..node08, shared by a test module; node07 has no python3."""
    return _module_cluster_factory(8, python_missing={"node07"})


class DelayProxy:
    """A TCP proxy on 127.0.0.1: each connection is held `delay_s` seconds, then forwarded to
    `target` both ways. Its threads are daemons and every blocking call has a timeout, so
    stop() returns within about a second."""

    def __init__(self, target: tuple[str, int], delay_s: float) -> None:
        self.target, self.delay_s = target, delay_s
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.address, self.port = self._listener.getsockname()[:2]
        self.accepted = 0
        threading.Thread(target=self._accept, name="delay-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:  # the 0.2 s timeout, or the listener closed by stop()
                continue
            self.accepted += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            if self._stop.wait(self.delay_s):
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                return
            with upstream:
                pump = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
                pump.start()
                self._pump(client, upstream)
                pump.join(timeout=1)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        source.settimeout(0.2)
        while not self._stop.is_set():
            try:
                data = source.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            try:
                sink.sendall(data)
            except OSError:
                break
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        time.sleep(0.3)  # the pumps see the stop within their 0.2 s timeout


@pytest.fixture
def delay_proxy() -> Iterator[Callable[[str, int, float], DelayProxy]]:
    """delay_proxy(address, port, delay_s) -> a started DelayProxy, stopped at teardown."""
    made: list[DelayProxy] = []

    def start(address: str, port: int, delay_s: float) -> DelayProxy:
        made.append(DelayProxy((address, port), delay_s))
        return made[-1]

    yield start
    for proxy in made:
        proxy.stop()
