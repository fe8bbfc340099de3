"""The actor the Ray transport keeps on each Ray node for a whole run: one serving probe per node.

Standard library only, and shipped to the nodes by value (ray_cluster registers this module
with cloudpickle), so the nodes need Ray but not runbook. The actor writes the probe bundle to
the node's cache directory once, starts `python BUNDLE --serve` in a session of its own and
answers one check per call: a request line in, an answer line out. A check that outlives its
timeout gets the probe's whole process group killed; the next check starts a fresh probe.

It is a threaded actor (two calls at once), so that `stop()` can kill a busy probe while
`check()` waits on it; checks themselves run one at a time under a lock.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

TERM_WAIT_S = 0.3  # after SIGTERM, before SIGKILL: the probe kills its commands' groups
KILL_WAIT_S = 2.0


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


class _Probe:
    """One serving probe process; its stdout lines arrive on a queue (None: it exited)."""

    def __init__(self, argv: list[str]) -> None:
        # --stop-at-eof: should this worker die (ray.kill, a crash), the end of the probe's input
        # stops the check under way with its commands (a probe without the flag ignores it).
        self.proc = subprocess.Popen(argv + ["--serve", "--stop-at-eof"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr: collections.deque[bytes] = collections.deque(maxlen=20)
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put, True),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append, False),
                         daemon=True).start()

    @staticmethod
    def _pump(stream: Any, sink: Any, mark_end: bool) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in iter(stream.readline, b""):
                sink(line)
            stream.close()  # here, not in stop(): a command left holding the pipe would block it
        if mark_end:  # stdout ended: the probe exited
            sink(None)

    def ask(self, line: bytes, wait: float) -> bytes | None:
        """The answer line; None when the probe exited. Raises queue.Empty past `wait`."""
        self.proc.stdin.write(line)  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return self.lines.get(timeout=wait)

    def stop(self) -> None:
        """SIGTERM the group (the probe kills its commands' groups), then SIGKILL it."""
        for signum, wait in ((signal.SIGTERM, TERM_WAIT_S), (signal.SIGKILL, KILL_WAIT_S)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signum)
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]


class ProbeServer:
    """Lives on one Ray node for a run and answers its checks through one serving probe."""

    def __init__(self, bundle: bytes, name: str) -> None:
        self.path, self.install_error = "", ""
        try:
            self.path = install(bundle, name)
        except OSError as exc:  # reported by each check, not as a failed actor
            self.install_error = str(exc)
        self.probe: _Probe | None = None
        self.python = ""
        self.lock = threading.Lock()

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def check(self, request_line: bytes, python: str | None, timeout: float, grace: float) -> dict[str, Any]:
        """{"stdout": answer line} or {"timed_out": True} or {"error"} or the exit of a dead probe."""
        with self.lock:
            if self.install_error:
                return {"error": self.install_error}
            python = python or sys.executable
            probe = self.probe
            if probe is None or probe.proc.poll() is not None or python != self.python:
                if probe is not None:
                    probe.stop()
                try:
                    probe = self.probe = _Probe([python, self.path])
                except OSError as exc:
                    self.probe = None
                    return {"error": f"cannot start {python}: {exc.strerror or exc}"}
                self.python = python
            try:
                line = probe.ask(request_line, max(0.1, timeout + grace))
            except queue.Empty:
                self._drop(probe)
                return {"timed_out": True}
            except (OSError, ValueError):  # its stdin is closed: the probe is gone
                line = None
            if line is not None:
                return {"stdout": line}
            self._drop(probe)
            return {"returncode": probe.proc.returncode, "stderr": b"".join(probe.stderr)}

    def stop(self) -> None:
        """Kill the probe, busy or not (the run is stopping); runs beside a waiting check()."""
        probe, self.probe = self.probe, None
        if probe is not None:
            probe.stop()

    def _drop(self, probe: _Probe) -> None:
        probe.stop()
        if self.probe is probe:
            self.probe = None
