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
import time
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


def default_python(needs: str | None = None, ctx: CheckContext | None = None) -> str:
    """The training environment's interpreter, so checks import the job's own torch and ray.

    Candidates are the node's training-like Python processes (a launcher gave them
    RANK/WORLD_SIZE, then libtorch loaded, then Ray's `_raylet` loaded), then the Python
    running the probe. With `needs`, the first candidate that can import that module wins:
    on a node where a plain torch job and a Ray cluster both run, the Ray check must use
    Ray's interpreter, not the job's. Without a candidate that has it, the first one.
    """
    candidates = list(dict.fromkeys([*training_pythons(), sys.executable or "python3"]))
    if needs:
        for python in candidates:
            if can_import(python, needs, ctx):
                return python
    return candidates[0]


def can_import(python: str, module: str, ctx: CheckContext | None = None) -> bool:
    """Whether `python` finds `module`, without importing it (no start-up cost of torch or ray)."""
    if python == sys.executable:
        import importlib.util

        return importlib.util.find_spec(module) is not None
    argv = [python, "-c", f"import importlib.util as u, sys; sys.exit(u.find_spec({module!r}) is None)"]
    outcome = (ctx or CheckContext(deadline=time.monotonic() + 15)).run_command(argv, timeout=10)
    return outcome.returncode == 0


def training_python() -> str | None:
    """The interpreter of the most training-like Python process here (see training_pythons)."""
    found = training_pythons()
    return found[0] if found else None


def training_pythons() -> list[str]:
    """Interpreters of the training-like Python processes here, most training-like first.

    A launcher's RANK/WORLD_SIZE ranks first, then libtorch, then Ray's `_raylet`. The
    path comes from the command line when it names a Python: a virtualenv's `python3` is
    a symlink, and /proc/PID/exe would point past the venv to the base interpreter.
    """
    from runbook.checks import _procfs

    skip = _procfs.ancestors(os.getpid()) | {os.getpid()}
    ranked: list[tuple[int, str]] = []
    for pid in _procfs.pids():
        if pid in skip:
            continue
        try:
            found = _training_rank(pid, _procfs)
        except (OSError, ValueError):
            continue
        if found:
            ranked.append(found)
    ranked.sort(key=lambda item: item[0])  # stable: same rank keeps /proc order
    return list(dict.fromkeys(python for _, python in ranked))


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
    needs: str | None = None,
) -> WorkerOutcome:
    """Run `worker`'s source under `python` (default: one that can import `needs`); never raises."""
    python = python or default_python(needs, ctx)
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
