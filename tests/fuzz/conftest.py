"""Hypothesis profiles for the fuzz tests, and a wall-clock limit that turns a hang into a failure.

`ci` (the default, what `make test` runs): few examples, derandomized, so a run is fast and
repeatable. `fuzz` (`make fuzz`, HYPOTHESIS_PROFILE=fuzz): a hundred times more, random; a
failure prints the `@reproduce_failure` blob that replays it. Tests size their own share as a
multiple of the profile's `max_examples`.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture,
          HealthCheck.filter_too_much]
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True, database=None,
                          suppress_health_check=_QUIET)
settings.register_profile("fuzz", max_examples=2500, deadline=None, database=None, print_blob=True,
                          suppress_health_check=_QUIET)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


class Hang(AssertionError):
    """The code under test ran past its wall-clock limit."""


@contextmanager
def _limit(seconds: float, what: str) -> Iterator[None]:
    def fire(_signum: int, _frame: Any) -> None:
        raise Hang(f"{what} ran longer than {seconds}s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def time_limit() -> Callable[[float, str], AbstractContextManager[None]]:
    """`with time_limit(5, "evaluating x"):` fails the test, with that text, after 5 seconds."""
    return _limit
