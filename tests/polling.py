"""Waiting in tests for something another process does: polled, bounded in time, and failing
with what was seen when it does not happen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(condition: Callable[[], Any], timeout: float = 15.0,
             what: Callable[[], Any] | None = None, interval: float = 0.05) -> None:
    """Return once `condition()` is true; raise AssertionError after `timeout` seconds, saying
    `what()` (the state that was seen) when given."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s" + (f": {what()}" if what else ""))
