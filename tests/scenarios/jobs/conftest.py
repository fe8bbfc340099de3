"""Fixtures for the scenario tests: start real scenario jobs and always stop them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scenarios.jobs import Scenario, start  # noqa: E402

Launcher = Callable[..., Scenario]


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launcher]:
    """start(name, speed=..., env=...) in a fresh work dir; every job is killed at teardown."""
    started: list[Scenario] = []

    def _launch(name: str, speed: float = 1.0, env: dict[str, str] | None = None) -> Scenario:
        workdir = tmp_path / f"{name}-{len(started)}"
        scenario = start(name, workdir, speed=speed, env=env)
        started.append(scenario)
        return scenario

    yield _launch
    for scenario in started:
        scenario.stop()
