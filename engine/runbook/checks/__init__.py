"""The registry of check types: type name -> module import path.

Modules are imported only when a check of that type is linted, shown or run,
and every module here is stdlib-only at import time (see `base.py`), so the
same registry serves the engine and the probe on a node. The runbook schema's
list of allowed check types is generated from this dict.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runbook.checks.base import CheckModule

CHECK_TYPES: dict[str, str] = {
    "command": "runbook.checks.command",
    "process": "runbook.checks.process",
    "log": "runbook.checks.log",
    "gpu": "runbook.checks.gpu",
    "env": "runbook.checks.env",
    "port": "runbook.checks.port",
    "file": "runbook.checks.file",
    "system": "runbook.checks.system",
    "network": "runbook.checks.network",
    "python": "runbook.checks.python_snippet",
    "host": "runbook.checks.host",
    "ray": "runbook.checks.ray_state",
    "checkpoint": "runbook.checks.checkpoint",
    "dataset": "runbook.checks.dataset",
    "stack": "runbook.checks.stack",
    "torch": "runbook.checks.torch_info",
    "nccl": "runbook.checks.nccl",
    "flight_recorder": "runbook.checks.flight_recorder",
}


def load_check(name: str) -> CheckModule:
    """Import and return the module implementing check type `name` (KeyError if unknown)."""
    return importlib.import_module(CHECK_TYPES[name])  # type: ignore[return-value]
