"""What every check module provides, and the helpers checks share on the node.

A check module is imported inside the probe, on the node, by whatever Python
the node runs (often the training environment's). So this file and every check
module import only the standard library at module level; heavy libraries
(pynvml, torch, ray) are imported inside `run`, when a check needs them.

A check module defines, at module level:

    NAME: str                       the type name used in runbooks (`check: {type: NAME}`)
    SUMMARY: dict[str, str]         {"en": ..., "zh": ...} one line on what it checks
    PARAMS: dict                    JSON Schema (type: object) for its `with:` parameters
    RESULT_FIELDS: dict[str, dict]  field -> {"type": json-type, "en": ..., "zh": ...}
    DEFAULT_TIMEOUT: float          seconds, when the step gives no `timeout:`
    def run(params: dict, ctx: CheckContext) -> dict

`run` returns a JSON-serialisable dict whose keys are documented in
RESULT_FIELDS. It never prints. A failure the check can describe (tool
missing, permission denied, a command that hung) is a field of the result,
not an exception: `available: false` + `reason`, or `timed_out: true`.
An exception escaping `run` becomes a check error for that node.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

# Process groups of commands running right now: the probe kills them when it is told to stop,
# so a killed probe never leaves a hanging `nvidia-smi` behind.
ACTIVE_GROUPS: set[int] = set()

# Fields the probe adds to every result, so trees can always branch on them.
COMMON_RESULT_FIELDS: dict[str, dict[str, str]] = {
    "timed_out": {
        "type": "boolean",
        "en": "The check ran past its timeout and was killed (a hang is a finding)",
        "zh": "检查超过超时时间被终止（卡住本身就是一个发现）",
    },
}


class CheckModule(Protocol):
    NAME: str
    SUMMARY: dict[str, str]
    PARAMS: dict[str, Any]
    RESULT_FIELDS: dict[str, dict[str, str]]
    DEFAULT_TIMEOUT: float

    def run(self, params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]: ...


@dataclass
class CommandOutcome:
    """What a command did: exit code, output, and whether it had to be killed."""

    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    not_found: bool = False
    stdout_bytes: int = 0  # what the command wrote in all, kept or not
    stderr_bytes: int = 0
    truncated: bool = False  # more than max_output: the middle of stdout or stderr was dropped

    def as_dict(self) -> dict[str, Any]:
        return {
            "argv": self.argv,
            "exit_code": self.returncode,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "timed_out": self.timed_out,
            "duration_s": round(self.duration_s, 3),
            "not_found": self.not_found,
            "stdout_bytes": self.stdout_bytes,
            "stderr_bytes": self.stderr_bytes,
            "truncated": self.truncated,
        }


class OutputCapture:
    """The first and the last `limit // 2` bytes of a stream and its size, in bounded memory:
    a command that prints gigabytes costs `limit` bytes, and its last line (where a worker
    writes its answer, or a tool its verdict) is still there."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        if not self.truncated:
            return (self.head + self.tail).decode("utf-8", "replace")
        dropped = self.total - len(self.head) - len(self.tail)
        return (self.head.decode("utf-8", "replace")
                + f"\n[runbook: output truncated: {self.total:,} bytes in all, "
                  f"{dropped:,} in the middle not kept]\n"
                + self.tail.decode("utf-8", "replace"))


@dataclass
class CheckContext:
    """Per-check facilities on the node: the deadline and a safe way to run commands."""

    deadline: float  # time.monotonic() value after which the check must have returned
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def remaining(self, margin: float = 0.25) -> float:
        """Seconds left before the deadline, keeping `margin` to report back."""
        return max(0.05, self.deadline - time.monotonic() - margin)

    def run_command(
        self, argv: list[str] | str, timeout: float | None = None, shell: bool = False,
        max_output: int = 256_000,
    ) -> CommandOutcome:
        """Run a command in its own process group; kill the whole group on timeout.

        Never raises for a missing program or a hang: both are outcomes.
        """
        limit = self.remaining() if timeout is None else min(timeout, self.remaining())
        shown = [argv] if isinstance(argv, str) else list(argv)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv, shell=shell, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=self.env, start_new_session=True,
            )
        except (FileNotFoundError, PermissionError) as exc:
            return CommandOutcome(shown, None, "", str(exc), False, 0.0, not_found=True)
        ACTIVE_GROUPS.add(proc.pid)
        try:
            out, err, timed_out = _read_output(proc, limit, max_output)
            if timed_out:
                kill_process_group(proc.pid)
        finally:
            ACTIVE_GROUPS.discard(proc.pid)
            _close(proc)
        return CommandOutcome(
            shown, None if timed_out else proc.returncode, out.text(), err.text(), timed_out,
            time.monotonic() - start, stdout_bytes=out.total, stderr_bytes=err.total,
            truncated=out.truncated or err.truncated,
        )


def _read_output(proc: subprocess.Popen[bytes], limit: float,
                 max_output: int) -> tuple[OutputCapture, OutputCapture, bool]:
    """(stdout, stderr, timed out): read both pipes as they fill, until the command exits or
    `limit` seconds pass; memory stays within max_output per stream whatever it prints."""
    assert proc.stdout is not None and proc.stderr is not None
    streams = {proc.stdout.fileno(): OutputCapture(max_output),
               proc.stderr.fileno(): OutputCapture(max_output)}
    out, err = streams.values()
    deadline = time.monotonic() + limit
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return out, err, True
            for key, _ in selector.select(timeout=left):
                data = os.read(key.fd, 1 << 16)
                if data:
                    streams[key.fd].add(data)
                else:
                    selector.unregister(key.fd)
    try:  # both pipes closed: the command is exiting (or left children holding nothing)
        proc.wait(timeout=max(0.05, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return out, err, True
    return out, err, False


def _close(proc: subprocess.Popen[bytes]) -> None:
    """Close the pipes and reap the process, never waiting long for one stuck in the kernel."""
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1.0)


def kill_process_group(pid: int) -> None:
    """SIGKILL the process group led by `pid`, ignoring a group that is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def unavailable(reason: str, **fields: Any) -> dict[str, Any]:
    """The result of a check whose tool or library is missing on this node."""
    return {"available": False, "reason": reason, **fields}
