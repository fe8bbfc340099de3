"""The `scenario` fixture the end-to-end tests share: start real faulty jobs, always stop them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scenarios.jobs import Scenario, start


@pytest.fixture
def scenario(tmp_path: Path) -> Iterator[Callable[..., Scenario]]:
    """scenario(name, speed=1.0, tag="", extra_args=None) starts one job in its own directory;
    every job started is stopped at teardown, even when the test failed."""
    started: list[Scenario] = []

    def run(name: str, speed: float = 1.0, tag: str = "",
            extra_args: list[str] | None = None) -> Scenario:
        handle = start(name, tmp_path / (name + tag), speed=speed, extra_args=extra_args)
        started.append(handle)
        return handle

    yield run
    for handle in started:
        handle.stop()
