"""The actor the Ray transport keeps on each Ray node for a whole run: one serving probe per node.

Standard library only, and shipped to the nodes by value with the probe pipe it talks through
(ray_cluster registers both modules with cloudpickle), so the nodes need Ray but not runbook.
The actor writes the probe bundle to the node's cache directory once, starts `python BUNDLE
--serve --stop-at-eof` in a session of its own and answers one check per call: a request line
in, an answer line out (_probe_pipe.py). A check that outlives its timeout gets the probe's
whole process group killed; the next check starts a fresh probe.

It is a threaded actor (two calls at once), so that `stop()` can kill a busy probe while
`check()` waits on it (the cancel pipe wakes that wait at once); checks themselves run one at
a time under a lock.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from runbook.transports._probe_pipe import ProbePipe, spawn

TERM_WAIT_S = 0.3  # after SIGTERM, before SIGKILL: the probe kills its commands' groups


def install(bundle: bytes, name: str) -> str:
    """Write the bundle under the cache directory (once per content hash); its path."""
    for base in (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"),
                 Path(tempfile.gettempdir()) / f"runbook-{os.getuid()}"):
        target = base / "runbook" / name
        try:
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f"{name}.tmp{os.getpid()}")
                tmp.write_bytes(bundle)
                tmp.replace(target)
            return str(target)
        except OSError:
            continue
    raise OSError(f"cannot write the probe bundle under ~/.cache or {tempfile.gettempdir()}")


class ProbeServer:
    """Lives on one Ray node for a run and answers its checks through one serving probe."""

    def __init__(self, bundle: bytes, name: str) -> None:
        self.path, self.install_error = "", ""
        try:
            self.path = install(bundle, name)
        except OSError as exc:  # reported by each check, not as a failed actor
            self.install_error = str(exc)
        self.probe: ProbePipe | None = None
        self.python = ""
        self.lock = threading.Lock()
        self.cancel_r, self.cancel_w = os.pipe()  # readable once stop() runs: a waiting check returns
        os.set_blocking(self.cancel_r, False)

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def check(self, request_line: bytes, python: str | None, timeout: float, grace: float) -> dict[str, Any]:
        """{"stdout": answer line} or {"timed_out": True} or {"error"} or the exit of a dead probe."""
        with self.lock:
            if self.install_error:
                return {"error": self.install_error}
            python = python or sys.executable
            try:
                probe = self._probe(python)
            except OSError as exc:
                return {"error": f"cannot start {python}: {exc.strerror or exc}"}
            deadline = time.monotonic() + max(0.1, timeout + grace)
            line = probe.ask(request_line, deadline)
            if line is not None:
                return {"stdout": line}
            self._drop(probe)
            if not probe.ended and time.monotonic() >= deadline:
                return {"timed_out": True}
            return {"returncode": probe.proc.returncode, "stderr": bytes(probe.stderr)}

    def stop(self) -> None:
        """Kill the probe, busy or not (the run is stopping); runs beside a waiting check()."""
        with contextlib.suppress(OSError):
            os.write(self.cancel_w, b"x")
        probe, self.probe = self.probe, None
        if probe is None:
            return
        probe.kill(TERM_WAIT_S)
        if self.lock.acquire(blocking=False):  # no check() holds it: its pipes are closed here
            try:
                probe.release()
            finally:
                self.lock.release()

    def _probe(self, python: str) -> ProbePipe:
        """The serving probe, started afresh where there is none, it exited or `python` changed."""
        probe = self.probe
        if probe is not None and probe.proc.poll() is None and python == self.python:
            return probe
        if probe is not None:
            self._drop(probe)
        with contextlib.suppress(OSError):  # a stop() before this probe is not for it
            while os.read(self.cancel_r, 4096):
                pass
        # --stop-at-eof: should this worker die (ray.kill, a crash), the end of the probe's input
        # stops the check under way with its commands.
        self.probe = ProbePipe(spawn([python, self.path, "--serve", "--stop-at-eof"]), self.cancel_r)
        self.python = python
        return self.probe

    def _drop(self, probe: ProbePipe) -> None:
        """Kill the probe's group, keep what is left of its stderr and close its pipes."""
        probe.kill(TERM_WAIT_S)
        probe.exit_code(0)
        probe.release()
        if self.probe is probe:
            self.probe = None
