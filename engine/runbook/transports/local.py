"""The local transport: the probe as a child process of this machine's (or a chosen) Python.

Each check is one probe process in a session of its own (a Ctrl-C at the terminal reaches
only us); `close()` stops the probes still running, with the commands they started, so a
Ctrl-C never waits for a check's own timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from runbook.checks.base import kill_process_group
from runbook.transports import INTERRUPTED, Node, ProbeAnswer
from runbook.transports.bundle import local_bundle

# The probe stops its own check at the timeout; this is how long we wait past that
# before killing the whole process group ourselves.
KILL_GRACE_S = 0.5
TERM_WAIT_S = 0.3  # after SIGTERM, before SIGKILL: the probe kills its commands' groups


def default_python() -> str:
    return shutil.which("python3") or sys.executable


class LocalTransport:
    def __init__(self, python: str | None = None, env: dict[str, str] | None = None) -> None:
        self.python = python
        self.env = env
        self.closed = False
        self._running: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        python = str(node.vars.get("python") or self.python or default_python())
        env = {**(self.env or os.environ), **{k: str(v) for k, v in
                                              (node.vars.get("env") or {}).items()}}
        start = time.monotonic()
        proc = self._start(python, env)
        if isinstance(proc, ProbeAnswer):
            return proc
        payload = json.dumps({**request, "timeout": timeout}).encode()
        try:
            out, err = proc.communicate(payload, timeout=timeout + KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            stop_probe(proc)
            elapsed = time.monotonic() - start
            return ProbeAnswer("ok", {"timed_out": True, "reason": f"no answer within {timeout:g}s;"
                                      " the check's processes were killed"}, duration_s=elapsed)
        finally:
            with self._lock:
                self._running.discard(proc)
        if self.closed:  # close() stopped it: what it printed is not an answer
            return ProbeAnswer("error", error=INTERRUPTED, duration_s=time.monotonic() - start)
        return parse_answer(out, err, proc.returncode, time.monotonic() - start)

    def _start(self, python: str, env: dict[str, str]) -> subprocess.Popen[bytes] | ProbeAnswer:
        """The probe process, registered for close(); or why there is none."""
        with self._lock:  # close() either sees this probe or it is never started
            if self.closed:
                return ProbeAnswer("error", error=INTERRUPTED)
            try:
                proc = subprocess.Popen(
                    [python, str(local_bundle())], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, start_new_session=True, env=env,
                )
            except OSError as exc:
                return ProbeAnswer("error", error=f"cannot start {python}: {exc.strerror or exc}")
            self._running.add(proc)
        return proc

    def close(self) -> None:
        """Stop every probe still running, and the commands it started (Ctrl-C)."""
        with self._lock:
            self.closed = True
            running = {proc: _children(proc.pid) for proc in self._running}
        for proc in running:
            _signal_probe(proc, signal.SIGTERM)
        deadline = time.monotonic() + TERM_WAIT_S
        while any(p.poll() is None for p in running) and time.monotonic() < deadline:
            time.sleep(0.02)
        for proc, kids in running.items():
            # A probe too busy to handle SIGTERM must not leave its commands behind.
            for group in ([proc.pid] if proc.poll() is None else []) + kids:
                kill_process_group(group)


def _signal_probe(proc: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as fh:
                kids.extend(int(x) for x in fh.read().split())
    return kids


def stop_probe(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM first (the probe then kills its commands' groups), SIGKILL the group after."""
    kids = _children(proc.pid)
    _signal_probe(proc, signal.SIGTERM)
    try:
        proc.communicate(timeout=TERM_WAIT_S)
    except subprocess.TimeoutExpired:
        for group in (proc.pid, *kids):
            kill_process_group(group)
        proc.communicate()


def parse_answer(out: bytes, err: bytes, returncode: int | None, elapsed: float) -> ProbeAnswer:
    """Turn the probe's stdout into an answer; anything else is a one-line error."""
    text = out.decode("utf-8", "replace")
    try:
        answer = json.loads(text)
    except ValueError:
        last = (err.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
        return ProbeAnswer("error", error=f"probe exited {returncode}: {last[:300]}",
                           duration_s=elapsed)
    if "error" in answer:
        return ProbeAnswer("error", error=str(answer["error"]), duration_s=elapsed)
    return ProbeAnswer("ok", answer.get("result") or {}, duration_s=elapsed, text=text.strip())
