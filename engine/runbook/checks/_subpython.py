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
    """The interpreter running the probe: on a node, usually the training environment's."""
    return sys.executable or "python3"


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
