"""Pytest fixtures for the real Slurm of scenarios/clusters/slurm.py (munged, slurmctld, N slurmd).

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
in CI (the CI variable set), where `make setup` installs them: there they fail
(tests/daemon_fixture.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.daemon_fixture import Availability, Factory, factory_fixture, started_fixture

# after tests.daemon_fixture, which makes sure `scenarios` is the repository's package
from scenarios.clusters.slurm import SlurmCluster, requirements_missing  # isort: skip

SLURM = Availability("Slurm", tuple(requirements_missing()))
needs_slurm = SLURM.mark

MakeSlurm = Callable[..., SlurmCluster]


def _factory(tmp_path_factory: pytest.TempPathFactory) -> Factory[SlurmCluster]:
    return Factory(SlurmCluster.start, SLURM, tmp_path_factory, "slurm", base_arg="base_dir")


make_slurm = factory_fixture("make_slurm", _factory,
                             doc="make_slurm(n, **kwargs) -> a started SlurmCluster, stopped at teardown.")
slurm = started_fixture("slurm", _factory, 2,
                        doc="Two idle nodes, node01 and node02, shared by a test module.")


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
