"""Shared fixtures for the check-module tests: a CheckContext with a real deadline."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "engine"
if str(ENGINE) not in sys.path:  # works with or without `pip install -e .`
    sys.path.insert(0, str(ENGINE))

from runbook.checks.base import CheckContext  # noqa: E402


@pytest.fixture
def make_ctx() -> Callable[..., CheckContext]:
    """make_ctx(timeout=5.0, env=None) -> a CheckContext whose deadline starts now."""

    def make(timeout: float = 5.0, env: dict[str, str] | None = None) -> CheckContext:
        return CheckContext(deadline=time.monotonic() + timeout,
                            env=dict(os.environ) if env is None else env)

    return make
