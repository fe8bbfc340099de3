"""The registry of check types: type name -> module import path.

Check modules are grouped by domain in subpackages (general/, files/, gpu/, host/, log/,
distributed/), each domain's private helpers beside them. Here at the top: this registry, the
contract every check satisfies (`base.py`), and the helpers several domains share: /proc
readers (`_procfs.py`), the kernel log (`_kernel_log.py`) and the child-process runner for
checks that need torch, pyarrow or ray (`_subpython.py`).

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
    "command": "runbook.checks.general.command",
    "process": "runbook.checks.host.process",
    "log": "runbook.checks.log.log",
    "gpu": "runbook.checks.gpu.gpu",
    "env": "runbook.checks.general.env",
    "port": "runbook.checks.host.port",
    "file": "runbook.checks.files.file",
    "system": "runbook.checks.host.system",
    "network": "runbook.checks.host.network",
    "python": "runbook.checks.general.python_snippet",
    "host": "runbook.checks.host.host",
    "ray": "runbook.checks.distributed.ray_state",
    "checkpoint": "runbook.checks.files.checkpoint",
    "dataset": "runbook.checks.files.dataset",
    "stack": "runbook.checks.distributed.stack",
    "torch": "runbook.checks.distributed.torch_info",
    "nccl": "runbook.checks.distributed.nccl",
    "flight_recorder": "runbook.checks.distributed.flight_recorder",
    "pcie": "runbook.checks.host.pcie",
    "limits": "runbook.checks.host.limits",
    "known_issues": "runbook.checks.distributed.known_issues",
    "cuda_libs": "runbook.checks.gpu.cuda_libs",
    "gpu_arch": "runbook.checks.gpu.gpu_arch",
    "checkpoint_writers": "runbook.checks.files.checkpoint_writers",
    "ray_tempdir": "runbook.checks.distributed.ray_tempdir",
    "ray_limits": "runbook.checks.distributed.ray_limits",
}


def load_check(name: str) -> CheckModule:
    """Import and return the module implementing check type `name` (KeyError if unknown)."""
    return importlib.import_module(CHECK_TYPES[name])  # type: ignore[return-value]
