"""Pytest fixtures for the real Alertmanager of scenarios/clusters/alertmanager.py.

Not a conftest, like tests/cluster_fixture.py: a test module takes the fixtures it uses by
assignment::

    from tests import alertmanager_fixture

    make_alertmanager = alertmanager_fixture.make_alertmanager

    def test_something(make_alertmanager, tmp_path):
        am = make_alertmanager(webhook_url="http://127.0.0.1:9095/alerts", token_file=token)
        am.post_alerts([{"labels": {"alertname": "X", "instance": "node01:9100"}}])

Fixtures:
    make_alertmanager  factory make_alertmanager(webhook_url=..., token_file=..., **kwargs)
                       -> a started Alertmanager on a free loopback port, module scope: one
                       per test module, stopped after its last test (it starts in well
                       under a second).

They skip the test, with the reason shown in the skip and as a warning, when Alertmanager is
not installed, except in CI (the CI variable set), where scripts/system-packages.sh installs
it: there they fail (tests/daemon_fixture.py).
"""

from __future__ import annotations

import pytest

from tests.daemon_fixture import Availability, Factory, factory_fixture

# after tests.daemon_fixture, which makes sure `scenarios` is the repository's package
from scenarios.clusters.alertmanager import Alertmanager, requirements_missing  # isort: skip

ALERTMANAGER = Availability("Alertmanager", tuple(requirements_missing()))
needs_alertmanager = ALERTMANAGER.mark


def _factory(tmp_path_factory: pytest.TempPathFactory) -> Factory[Alertmanager]:
    return Factory(Alertmanager.start, ALERTMANAGER, tmp_path_factory, "alertmanager", base_arg="base")


make_alertmanager = factory_fixture(
    "make_alertmanager", _factory, scope="module",
    doc="make_alertmanager(webhook_url=..., token_file=...) -> a started Alertmanager, one module long.")
