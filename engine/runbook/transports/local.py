"""The local transport: the probe as a child process of this machine's (or a chosen) Python."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

from runbook.checks.base import kill_process_group
from runbook.transports import Node, ProbeAnswer
from runbook.transports.bundle import local_bundle

# The probe stops its own check at the timeout; this is how long we wait past that
# before killing the whole process group ourselves.
KILL_GRACE_S = 0.5


def default_python() -> str:
    return shutil.which("python3") or sys.executable


class LocalTransport:
    def __init__(self, python: str | None = None, env: dict[str, str] | None = None) -> None:
        self.python = python
        self.env = env

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        python = str(node.vars.get("python") or self.python or default_python())
        argv = [python, str(local_bundle())]
        env = {**(self.env or os.environ), **{k: str(v) for k, v in
                                              (node.vars.get("env") or {}).items()}}
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, env=env,
            )
        except OSError as exc:
            return ProbeAnswer("error", error=f"cannot start {python}: {exc.strerror or exc}")
        payload = json.dumps({**request, "timeout": timeout}).encode()
        try:
            out, err = proc.communicate(payload, timeout=timeout + KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            stop_probe(proc)
            elapsed = time.monotonic() - start
            return ProbeAnswer("ok", {"timed_out": True, "reason": f"no answer within {timeout:g}s;"
                                      " the check's processes were killed"}, duration_s=elapsed)
        return parse_answer(out, err, proc.returncode, time.monotonic() - start)

    def close(self) -> None:
        pass


def stop_probe(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM first (the probe then kills its commands' groups), SIGKILL the group after."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.communicate(timeout=0.3)
    except subprocess.TimeoutExpired:
        kill_process_group(proc.pid)
        proc.communicate()


def parse_answer(out: bytes, err: bytes, returncode: int | None, elapsed: float) -> ProbeAnswer:
    """Turn the probe's stdout into an answer; anything else is a one-line error."""
    try:
        answer = json.loads(out.decode("utf-8", "replace"))
    except ValueError:
        last = (err.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
        return ProbeAnswer("error", error=f"probe exited {returncode}: {last[:300]}",
                           duration_s=elapsed)
    if "error" in answer:
        return ProbeAnswer("error", error=str(answer["error"]), duration_s=elapsed)
    return ProbeAnswer("ok", answer.get("result") or {}, duration_s=elapsed)
