"""Pytest fixtures for the real Slurm of scenarios/slurm.py (munged, slurmctld, N slurmd).

Not a conftest, like tests/cluster_fixture.py: a test module takes the fixtures it uses by
assignment (an assignment, not `from ... import`, keeps ruff's F811 quiet)::

    from tests import slurm_fixture

    slurm = slurm_fixture.slurm
    make_slurm = slurm_fixture.make_slurm

    def test_something(slurm):
        job = slurm.sbatch("srun hostname\\n", "--nodes=2", "--ntasks-per-node=1")
        slurm.wait_state(job, "COMPLETED")

Fixtures:
    slurm       2 nodes (node01, node02; 2 CPUs each, partition `debug`), module scope:
                a SlurmCluster, started before the module's first test (about 1-2 s) and
                stopped, every daemon and job process with it, after its last.
    make_slurm  factory make_slurm(n, **SlurmCluster.start kwargs) -> SlurmCluster, function
                scope; every cluster it made is stopped at teardown.

They skip the test, with the reason shown in the skip and as a warning, when this machine
cannot run Slurm (slurmctld, slurmd or munged not installed, no unshare, not root), except
in CI (the CI variable set), where `make setup` installs them: there they fail.
"""

from __future__ import annotations

import os
import sys
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

from scenarios.slurm import SlurmCluster, requirements_missing  # noqa: E402

UNAVAILABLE = "; ".join(requirements_missing())
SKIP_REASON = f"Slurm unavailable on this machine: {UNAVAILABLE}"
needs_slurm = pytest.mark.skipif(bool(UNAVAILABLE) and not os.environ.get("CI"),
                                 reason=SKIP_REASON)

MakeSlurm = Callable[..., SlurmCluster]


def _skip_if_unavailable() -> None:
    if UNAVAILABLE and os.environ.get("CI"):
        # CI installs slurm-wlm and munge itself (make setup): a missing Slurm there is a
        # broken set-up, and skipping would hide every Slurm test.
        pytest.fail(f"{SKIP_REASON} (CI must run these tests)")
    if UNAVAILABLE:
        warnings.warn(SKIP_REASON, stacklevel=2)
        pytest.skip(SKIP_REASON)


class _Factory:
    def __init__(self, tmp_factory: pytest.TempPathFactory) -> None:
        self.tmp_factory = tmp_factory
        self.made: list[SlurmCluster] = []

    def __call__(self, n: int = 2, **kwargs: Any) -> SlurmCluster:
        _skip_if_unavailable()
        base = kwargs.pop("base_dir", None) or self.tmp_factory.mktemp("slurm")
        cluster = SlurmCluster.start(n, base, **kwargs)
        self.made.append(cluster)
        return cluster

    def close(self) -> None:
        left = [cl for cl in self.made if not cl.stop()]
        self.made.clear()
        if left:
            warnings.warn(f"Slurm processes still alive after stop(): {left}", stacklevel=2)


@pytest.fixture
def make_slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeSlurm]:
    """make_slurm(n, **kwargs) -> a started SlurmCluster, stopped at teardown."""
    factory = _Factory(tmp_path_factory)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """Two idle nodes, node01 and node02, shared by a test module."""
    factory = _Factory(tmp_path_factory)
    try:
        yield factory(2)
    finally:
        factory.close()


def until(predicate: Callable[[], Any], timeout: float, what: str, step: float = 0.2) -> Any:
    """Poll `predicate` (<= timeout s, so <= timeout/step tries); its first truthy value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} after {timeout}s")
        time.sleep(step)
