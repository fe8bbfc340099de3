"""What the test-cluster fixtures share (tests/cluster_fixture.py, tests/slurm_fixture.py,
tests/ray_fixture.py): skipping where a cluster cannot run, and a factory that stops every
cluster it started.

    SSH = Availability("fake cluster", tuple(requirements_missing()))
    needs_cluster = SSH.mark

    def _factory(tmp_path_factory):
        return Factory(Cluster.start, SSH, tmp_path_factory, "cluster", base_arg="base")

    make_cluster = factory_fixture("make_cluster", _factory)     # make_cluster(n, **kwargs)
    cluster3 = started_fixture("cluster3", _factory, 3)          # one cluster for a module

A cluster is a `DaemonGroup` (scenarios/clusters/group.py): `stop()` kills every daemon it
started and says whether anything is left, which the factory turns into a warning.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the repository root, for `scenarios`
    sys.path.insert(0, str(ROOT))
_mod = sys.modules.get("scenarios")
if _mod is not None and getattr(_mod, "__file__", None) is None:
    # tests/scenarios/ (no __init__.py) was imported as a namespace package `scenarios`
    del sys.modules["scenarios"]

from scenarios.clusters.group import DaemonGroup  # noqa: E402

G = TypeVar("G", bound=DaemonGroup)
Scope = Literal["function", "module", "session"]


@dataclass(frozen=True)
class Availability:
    """Whether this machine can run one kind of cluster, and what a test does when it cannot:
    skip, with the reason shown in the skip and as a warning, except in CI (the CI variable
    set), where `make setup` installs what it needs: there it fails."""

    what: str  # "fake cluster", "Slurm", "Ray"
    missing: tuple[str, ...]  # the cluster module's requirements_missing()

    @property
    def reason(self) -> str:
        return f"{self.what} unavailable on this machine: {'; '.join(self.missing)}"

    @property
    def mark(self) -> pytest.MarkDecorator:
        """A skipif marker for a whole module (not in CI, where the fixture fails instead)."""
        return pytest.mark.skipif(bool(self.missing) and not os.environ.get("CI"), reason=self.reason)

    def require(self) -> None:
        """Skip the test (or fail it in CI) when the cluster cannot run here."""
        if self.missing and os.environ.get("CI"):
            # A missing cluster in CI is a broken set-up, and skipping would hide its tests.
            pytest.fail(f"{self.reason} (CI must run these tests)")
        if self.missing:
            warnings.warn(self.reason, stacklevel=3)
            pytest.skip(self.reason)


class Factory(Generic[G]):
    """Starts clusters of one kind, each in a directory of its own; `close()` stops them all.

    start: the cluster's `start(n, ...)`; base_arg: the name of its base directory argument
    (None: it takes none); defaults: keyword arguments every cluster gets unless given.
    """

    def __init__(self, start: Callable[..., G], availability: Availability,
                 tmp_factory: pytest.TempPathFactory, prefix: str, *, base_arg: str | None = None,
                 defaults: dict[str, Any] | None = None) -> None:
        self.start, self.availability = start, availability
        self.tmp_factory, self.prefix, self.base_arg = tmp_factory, prefix, base_arg
        self.defaults = defaults or {}
        self.made: list[G] = []

    def __call__(self, *args: Any, **kwargs: Any) -> G:
        self.availability.require()
        kwargs = {**self.defaults, **kwargs}
        if self.base_arg is not None:
            kwargs[self.base_arg] = kwargs.get(self.base_arg) or self.tmp_factory.mktemp(self.prefix)
        cluster = self.start(*args, **kwargs)
        self.made.append(cluster)
        return cluster

    def close(self) -> None:
        left = [cluster for cluster in self.made if not cluster.stop()]
        self.made.clear()
        if left:
            warnings.warn(f"{self.availability.what} processes still alive after stop(): {left}",
                          stacklevel=2)

    def __enter__(self) -> Factory[G]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


MakeFactory = Callable[[pytest.TempPathFactory], Factory[G]]


def wait_for(predicate: Callable[[], object], timeout: float, step: float = 0.05) -> bool:
    """Poll `predicate` (at most `timeout` s, every `step` s) until it is true; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def factory_fixture(name: str, make: MakeFactory[G], *, scope: Scope = "function",
                    doc: str = "") -> Any:
    """A fixture `name` that gives the test `make(tmp_path_factory)`, a Factory, closed (every
    cluster it started stopped) at the end of `scope`."""

    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Factory[G]]:
        with make(tmp_path_factory) as factory:
            yield factory

    fixture.__doc__ = doc or f"{name}(n, **kwargs) -> a started cluster, stopped at teardown."
    return pytest.fixture(scope=scope, name=name)(fixture)


def started_fixture(name: str, make: MakeFactory[G], *args: Any, scope: Scope = "module",
                    doc: str = "", **kwargs: Any) -> Any:
    """A fixture `name` that gives the test one cluster, started with `args` and `kwargs` by
    `make(tmp_path_factory)` and stopped at the end of `scope`."""

    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[G]:
        with make(tmp_path_factory) as factory:
            yield factory(*args, **kwargs)

    fixture.__doc__ = doc
    return pytest.fixture(scope=scope, name=name)(fixture)


def group_gone(pgid: int, timeout: float = 5.0) -> bool:
    """True once os.killpg(pgid, 0) raises ProcessLookupError (bounded wait)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
