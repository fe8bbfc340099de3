"""Pytest fixtures for the fake multi-host cluster of scenarios/cluster.py.

Not a conftest (tests/conftest.py is left alone): a test module imports the fixtures it
uses by assignment (an assignment, not `from ... import`, keeps ruff's F811 quiet when a
test argument has the fixture's name)::

    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/
    import cluster_fixture  # noqa: E402

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
machine cannot run one (no /usr/sbin/sshd, no util-linux tools, or not root).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the repository root, for `scenarios`
    sys.path.insert(0, str(ROOT))
_mod = sys.modules.get("scenarios")
if _mod is not None and getattr(_mod, "__file__", None) is None:
    # tests/scenarios/ (no __init__.py) was imported as a namespace package `scenarios`
    del sys.modules["scenarios"]

from scenarios.cluster import Cluster, requirements_missing  # noqa: E402

UNAVAILABLE = "; ".join(requirements_missing())
SKIP_REASON = f"fake cluster unavailable on this machine: {UNAVAILABLE}"
needs_cluster = pytest.mark.skipif(bool(UNAVAILABLE), reason=SKIP_REASON)

MakeCluster = Callable[..., Cluster]


def _skip_if_unavailable() -> None:
    if UNAVAILABLE and os.environ.get("CI"):
        # CI installs sshd itself (make setup): a missing cluster there is a broken set-up,
        # and skipping would hide every SSH test.
        pytest.fail(f"{SKIP_REASON} (CI must run these tests)")
    if UNAVAILABLE:
        warnings.warn(SKIP_REASON, stacklevel=2)
        pytest.skip(SKIP_REASON)


class _Factory:
    def __init__(self, tmp_factory: pytest.TempPathFactory) -> None:
        self.tmp_factory = tmp_factory
        self.made: list[Cluster] = []

    def __call__(self, n: int, **kwargs: Any) -> Cluster:
        _skip_if_unavailable()
        kwargs.setdefault("port", None)  # a free port, retried on collision
        base = kwargs.pop("base", None) or self.tmp_factory.mktemp("cluster")
        cl = Cluster.start(n, base, **kwargs)
        self.made.append(cl)
        return cl

    def close(self) -> None:
        errors = [cl for cl in self.made if not cl.stop()]
        self.made.clear()
        if errors:
            warnings.warn(f"fake cluster hosts still alive after stop(): {errors}", stacklevel=2)


@pytest.fixture
def make_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeCluster]:
    """make_cluster(n, **kwargs) -> a started Cluster, stopped at teardown."""
    factory = _Factory(tmp_path_factory)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture(scope="module")
def _module_cluster_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeCluster]:
    factory = _Factory(tmp_path_factory)
    try:
        yield factory
    finally:
        factory.close()


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
