"""Running a worker module in a child of the node's Python, for checks that need torch or pyarrow.

Such checks never import the heavy library into the probe: a huge checkpoint, an import that
hangs on a network filesystem or an extension that crashes then costs one killed child (its
whole process group, under the check's deadline), not the probe. A worker module (`_*_worker.py`)
imports only the standard library at module level and nothing from runbook, so its source runs
as `python -c SOURCE PAYLOAD_JSON` even when the probe itself runs from a zipapp. It writes its
answer as one JSON line after MARK, last, on stdout.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from runbook.checks.base import CheckContext

MARK = "RUNBOOK-WORKER-RESULT "
_MAX_OUTPUT = 64 * 1024 * 1024  # key/shape maps of large models run to megabytes


@dataclass
class WorkerOutcome:
    """The worker's JSON answer, or why there is none."""

    data: dict[str, Any] | None
    error: str | None
    timed_out: bool
    duration_s: float
    python: str


def default_python() -> str:
    """The training environment's interpreter, so checks import the job's own torch and ray.

    That is the executable of a Python process on this node that a launcher gave
    RANK/WORLD_SIZE, or that has libtorch or Ray's `_raylet` loaded; when there is
    none, the Python running the probe.
    """
    return training_python() or sys.executable or "python3"


def training_python() -> str | None:
    """The interpreter of the most training-like Python process here, as it was invoked.

    A launcher's RANK/WORLD_SIZE ranks first, then libtorch, then Ray's `_raylet`. The
    path comes from the command line when it names a Python: a virtualenv's `python3` is
    a symlink, and /proc/PID/exe would point past the venv to the base interpreter.
    """
    from runbook.checks import _procfs

    skip = _procfs.ancestors(os.getpid()) | {os.getpid()}
    best: tuple[int, str] | None = None
    for pid in _procfs.pids():
        if pid in skip:
            continue
        try:
            found = _training_rank(pid, _procfs)
        except (OSError, ValueError):
            continue
        if found and (best is None or found[0] < best[0]):
            best = found
            if found[0] == 0:
                break
    return best[1] if best else None


def _training_rank(pid: int, procfs: Any) -> tuple[int, str] | None:
    """(0 launcher env | 1 libtorch | 2 raylet, interpreter path) for a Python process."""
    exe = procfs.exe(pid) or ""
    argv = procfs.cmdline(pid)
    invoked = argv[0] if argv and os.path.isabs(argv[0]) else ""
    if not os.path.basename(invoked).startswith("python"):
        invoked = ""
    if not (invoked or os.path.basename(exe).startswith("python")):
        return None
    python = invoked or exe
    if any(name in procfs.environ(pid) for name in procfs.RANK_VARS):
        return 0, python
    if procfs.maps_contain(pid, b"libtorch"):
        return 1, python
    if procfs.maps_contain(pid, b"_raylet"):
        return 2, python
    return None


def run_worker(
    ctx: CheckContext, worker: ModuleType, payload: dict[str, Any], python: str | None = None,
) -> WorkerOutcome:
    """Run `worker`'s source under `python` with `payload`; never raises."""
    python = python or default_python()
    source = worker.__loader__.get_source(worker.__name__)  # type: ignore[union-attr]
    argv = [python, "-c", source or "", json.dumps(payload)]
    outcome = ctx.run_command(argv, max_output=_MAX_OUTPUT)
    if outcome.not_found:
        return WorkerOutcome(None, f"cannot run {python}: {outcome.stderr}", False, 0.0, python)
    duration = round(outcome.duration_s, 3)
    if outcome.timed_out:
        return WorkerOutcome(None, f"{python} did not finish within {outcome.duration_s:.1f}s (killed)",
                             True, duration, python)
    data = parse_answer(outcome.stdout)
    if data is None:
        why = last_line(outcome.stderr) or f"exit status {outcome.returncode}"
        return WorkerOutcome(None, f"{python} gave no answer: {why}", False, duration, python)
    return WorkerOutcome(data, None, False, duration, python)


def parse_answer(stdout: str) -> dict[str, Any] | None:
    """The JSON object on the last MARK line of a worker's stdout (None when there is none)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            try:
                data = json.loads(line[len(MARK):])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
