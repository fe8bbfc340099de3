"""Pytest fixtures for the real multi-node Ray cluster of scenarios/clusters/ray.py.

Not a conftest, like tests/cluster_fixture.py: a test module takes the fixtures it uses by
assignment (an assignment, not `from ... import`, keeps ruff's F811 quiet)::

    from tests import ray_fixture

    ray_cluster = ray_fixture.ray_cluster

    def test_something(ray_cluster):
        run("--executor", "ray", "--ray-address", ray_cluster.address)

Fixtures:
    ray_cluster         3 nodes (a head and two workers; one CPU and a 78 MiB object store
                        each, on loopback), module scope: a RayCluster, started before the
                        module's first test and stopped after its last.
    make_ray_cluster    factory make_ray_cluster(n, **RayCluster.start kwargs) -> RayCluster,
                        module scope; every cluster it made is stopped after the module.

They skip the test when `ray` cannot be imported, except in CI, where they fail
(tests/daemon_fixture.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.daemon_fixture import Availability, Factory, factory_fixture, started_fixture

# after tests.daemon_fixture, which makes sure `scenarios` is the repository's package
from scenarios.clusters.ray import RayCluster, requirements_missing  # isort: skip

RAY = Availability("Ray", tuple(requirements_missing()))

MakeRayCluster = Callable[..., RayCluster]


def _factory(tmp_path_factory: pytest.TempPathFactory) -> Factory[RayCluster]:
    return Factory(RayCluster.start, RAY, tmp_path_factory, "ray")


make_ray_cluster = factory_fixture("make_ray_cluster", _factory, scope="module",
                                   doc="make_ray_cluster(n, **kwargs) -> a started RayCluster, "
                                       "stopped after the module.")
ray_cluster = started_fixture("ray_cluster", _factory, 3,
                              doc="Three nodes, node01..node03, shared by a test module.")
