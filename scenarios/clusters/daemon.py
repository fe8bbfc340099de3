"""One daemon of a test cluster, from start to stop: standard library only, Linux.

Every daemon the test clusters run (each host's sshd; munged, slurmctld and each slurmd; the
processes of each Ray node) goes through the same steps, here once:

* **start** (`Daemon.spawn`): detached in its own session, stdin closed, stdout and stderr
  appended to its `.out` file, working directory /. A namespaced daemon's argv is an
  ``unshare --pid --fork ...``: the child of that `unshare` is the namespace's pid 1, and the
  daemon and everything it starts live in that namespace. A process something else started
  (Ray starts its own) is recorded with `Daemon.adopt`.
* **ready** (`wait_ready`): a bounded poll until the cluster's own test of readiness passes;
  a daemon that exits meanwhile is an error at once, with the tail of its logs (`PortTaken`
  when it could not bind its port, so that the cluster starts again on other ports).
* **recorded**: `pid` (what was started), `ns_init_pid` (its namespace's pid 1), the start
  time of each (so that a reused pid is never killed), its logs; `to_json` for a state file.
* **stop** (`stop_all`): SIGKILL to the namespace's pid 1 (the kernel kills every process in
  the namespace, even ones that did setsid or double-forked), to the process group of what
  was started, and to an adopted process with its descendants; then a bounded wait until
  none of it is left. `kill_recorded` does the same from a state file, for a cluster whose
  owner was itself killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenarios.clusters.procs import (
    children,
    cmdline,
    descendants,
    namespace_pids,
    pid_alive,
    start_ticks,
    tail,
)

POLL_S = 0.05
KILL_WAIT_S = 5.0
REAP_WAIT_S = 2.0  # for an `unshare` to exit by itself once its namespace is killed
PORT_IN_USE = ("Address already in use", "address already in use", "Cannot bind any address")  # C, Go


class DaemonError(RuntimeError):
    """A daemon could not be started, or did not get ready in time."""


class PortTaken(DaemonError):
    """A daemon could not bind its port (another process has it): start again on other ports."""


@dataclass
class Daemon:
    """One daemon process, and every process it starts."""

    name: str  # for messages: "sshd node02", "slurmctld", ...
    out: Path | None = None  # its stdout and stderr, appended
    logs: tuple[Path, ...] = ()  # the logs it writes itself: their tails explain a failure
    pid: int = 0  # the process started here (an `unshare` when namespaced); 0 before spawn
    ns_init_pid: int = 0  # the namespace's pid 1, as seen from this machine; 0 until found
    namespaced: bool = False
    adopted: bool = False  # started by something else, in no group of its own
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)
    _ticks: dict[int, int | None] = field(default_factory=dict, init=False, repr=False,
                                          compare=False)  # pid -> start time, against pid reuse

    @classmethod
    def adopt(cls, name: str, pid: int, logs: Iterable[Path] = ()) -> Daemon:
        """A process something else started and stops (Ray's), recorded so that it can be
        checked on and, should it outlive its owner's stop, killed with its descendants."""
        daemon = cls(name, logs=tuple(logs), pid=pid, adopted=True)
        daemon._ticks[pid] = start_ticks(pid)
        return daemon

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              namespaced: bool = False) -> None:
        """Start `argv` detached in its own session; stdout and stderr appended to `out`.

        namespaced: argv is an ``unshare --fork ...`` whose child is the namespace's pid 1.
        """
        if self.out is None:
            raise ValueError(f"{self.name}: spawn needs an out file")
        self.namespaced = namespaced
        with open(self.out, "ab") as out:
            self.proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                         env=None if env is None else dict(env),
                                         start_new_session=True, close_fds=True, cwd="/")
        self.pid = self.proc.pid
        self._ticks[self.pid] = start_ticks(self.pid)

    # -- while it runs ----------------------------------------------------------------

    def find_ns_init(self) -> int:
        """The namespace's pid 1 (the `unshare`'s child) once it exists; 0 before, or when
        the daemon is not namespaced."""
        if self.namespaced and not self.ns_init_pid and self.pid:
            kids = children(self.pid)
            if kids:
                self.ns_init_pid = kids[0]
                self._ticks[self.ns_init_pid] = start_ticks(self.ns_init_pid)
        return self.ns_init_pid

    def exit_code(self) -> int | None:
        """The exit status of the process started here once it has exited, else None."""
        return self.proc.poll() if self.proc is not None else None

    def log_tail(self, n: int = 2000) -> str:
        """The tails of its logs and of its out file, for an error message."""
        paths = [*self.logs, *([self.out] if self.out is not None else [])]
        return " ".join(text for text in (tail(p, n) for p in paths) if text)

    def check_running(self) -> None:
        """Raise PortTaken or DaemonError, with its logs, when the daemon has exited."""
        code = self.exit_code()
        if code is None:
            return
        text = self.log_tail()
        if any(marker in text for marker in PORT_IN_USE):
            raise PortTaken(f"{self.name}: {text}")
        raise DaemonError(f"{self.name} exited (rc={code}): {text}")

    def _ours(self, pid: int) -> bool:
        """Whether `pid` is still the process recorded (alive, and not a reused pid)."""
        if not pid_alive(pid):
            return False
        recorded = self._ticks.get(pid)
        return recorded is None or start_ticks(pid) == recorded

    def is_alive(self) -> bool:
        """Whether the daemon's namespace (or, without one, its process) is still there."""
        return self._ours(self.ns_init_pid) if self.ns_init_pid else self._ours(self.pid)

    def pids(self) -> set[int]:
        """Every live process of the daemon: what was started, and its namespace's processes."""
        out = {pid for pid in (self.pid, self.ns_init_pid) if pid and self._ours(pid)}
        if self.ns_init_pid and self._ours(self.ns_init_pid):
            out.update(namespace_pids(self.ns_init_pid))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "ns_init_pid": self.ns_init_pid}

    # -- stopping ---------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL all of it, without waiting: the namespace's pid 1 (the kernel kills every
        process in the namespace; `unshare` then reaps it and exits), an adopted process and
        its descendants, or else the process group of what was started here."""
        if self.ns_init_pid and self._ours(self.ns_init_pid):
            _signal(os.kill, self.ns_init_pid)
        elif self.adopted:
            if self._ours(self.pid):
                for pid in [*descendants(self.pid), self.pid]:
                    _signal(os.kill, pid)
        elif self.pid:
            _signal(os.killpg, self.pid)  # its own session: everything it started

    def wait_gone(self, deadline: float) -> bool:
        """Reap what was started here (its process group killed if it does not exit within
        REAP_WAIT_S) and wait, until `deadline` (monotonic), for its namespace's pid 1 or the
        adopted process to go. True once all of it is gone."""
        if self.proc is not None and self.proc.poll() is None:
            try:  # `unshare` reaps the namespace's pid 1, then exits
                self.proc.wait(timeout=max(0.05, min(REAP_WAIT_S, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                _signal(os.killpg, self.pid)
                try:
                    self.proc.wait(timeout=max(0.05, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    return False
        for pid in (self.ns_init_pid, self.pid if self.adopted else 0):
            while pid and self._ours(pid):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
        return True


def _signal(send: Callable[[int, int], None], pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        send(pid, signal.SIGKILL)


def stop_all(daemons: Iterable[Daemon], wait: float = KILL_WAIT_S) -> bool:
    """Kill every daemon at once, then wait (one deadline, `wait` s) until each is gone.

    True when nothing of any of them is left."""
    daemons = list(daemons)
    for daemon in daemons:
        daemon.find_ns_init()
        daemon.kill()
    deadline = time.monotonic() + wait
    ok = True
    for daemon in daemons:
        ok = daemon.wait_gone(deadline) and ok
    return ok


def wait_ready(daemons: Sequence[Daemon], ready: Callable[[], bool], timeout: float,
               explain: Callable[[], str], *, poll: float = POLL_S) -> None:
    """Poll, at most `timeout` s, until every namespaced daemon's pid 1 exists and `ready()`.

    A daemon that exits meanwhile raises at once (`Daemon.check_running`); at the deadline,
    DaemonError says what `explain()` says.
    """
    deadline = time.monotonic() + timeout
    while True:
        for daemon in daemons:
            daemon.find_ns_init()
            daemon.check_running()
        if all(d.ns_init_pid for d in daemons if d.namespaced) and ready():
            return
        if time.monotonic() > deadline:
            raise DaemonError(f"not ready after {timeout:g}s: {explain()}")
        time.sleep(poll)


def kill_recorded(pids: Iterable[int], marker: str, wait: float = KILL_WAIT_S) -> int:
    """SIGKILL each recorded pid (and the group it leads) whose command line still names
    `marker` (so a reused pid is left alone), then wait until they are gone. For a cluster
    whose owner was killed before it could stop it. Returns how many were killed."""
    ours = [pid for pid in pids if pid > 0 and marker in cmdline(pid)]
    killed = 0
    for pid in ours:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
        _signal(os.killpg, pid)  # a group leader's children
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(pid_alive(pid) for pid in ours):
        time.sleep(POLL_S)
    return killed
