"""A serving probe's pipes: a request line in, an answer line out, under a deadline.

The transports that keep a serving probe (`python BUNDLE --serve --stop-at-eof`) talk to it
through one of these: the SSH transport over each node's `ssh` process (_session.py), the
Ray transport from its actor on each node (_ray_actor.py). Lines are read with poll() on the
process's stdout and stderr and on a cancel pipe that the transport makes readable when it
stops, so a thread waiting for an answer costs no CPU and wakes at once on Ctrl-C, even where
a command of the probe still holds the output open.

Standard library only, and nothing of runbook: the Ray transport ships this module to its
nodes by value, beside _ray_actor.py, and runbook need not be installed there.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time

STDERR_KEPT = 4096  # bytes of the process's stderr kept: its last line is the reason shown
KILL_WAIT_S = 2.0  # after SIGKILL, how long to wait for the process to be reaped


def spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    """Start `argv` with pipes on its input and output, in a session of its own: a Ctrl-C at
    the terminal reaches only us, and its whole process group can be killed."""
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, bufsize=0, start_new_session=True)


def kill_group(pid: int, signum: int = signal.SIGKILL) -> None:
    """Signal the process group led by `pid`, ignoring a group that is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


class ProbePipe:
    """A process that answers request lines with answer lines on its stdout."""

    def __init__(self, proc: subprocess.Popen[bytes], cancel_fd: int) -> None:
        self.proc = proc
        self.cancel_fd = cancel_fd
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.in_fd, self.out_fd, self.err_fd = (proc.stdin.fileno(), proc.stdout.fileno(),
                                                proc.stderr.fileno())
        self.buffer = bytearray()
        self.stderr = bytearray()
        self.started = time.monotonic()
        self.ended = False  # its output ended: the process is gone or going

    def send(self, data: bytes) -> bool:
        """Write all of data to its stdin; False when it is gone."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.in_fd, view):]
        except OSError:  # EPIPE: it exited
            return False
        return True

    def ask(self, line: bytes, deadline: float) -> bytes | None:
        """Send one request line and read the answer line; None as for `read_line`, or when
        the request cannot be sent."""
        return self.read_line(deadline) if self.send(line) else None

    def read_line(self, deadline: float) -> bytes | None:
        """The next line of output; None at the deadline, on cancel, or when the output ends."""
        poller = select.poll()
        for fd in (self.out_fd, self.err_fd, self.cancel_fd):
            poller.register(fd, select.POLLIN)
        err_open = True
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if self.ended or left <= 0:
                return None
            for fd, _ in poller.poll(left * 1000):
                if fd == self.cancel_fd:
                    return None
                chunk = os.read(fd, 65536)
                if fd == self.out_fd:
                    self.ended = self.ended or not chunk
                    self.buffer.extend(chunk)
                elif chunk:
                    self._keep_stderr(chunk)
                elif err_open:  # stderr closed (stdout may still have data): stop polling it
                    poller.unregister(self.err_fd)
                    err_open = False
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line

    def exit_code(self, wait: float) -> int | None:
        """Its exit status, None if it is still running after `wait` seconds. What is left
        on stderr is read first."""
        try:
            code = self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return None
        with contextlib.suppress(OSError):
            os.set_blocking(self.err_fd, False)
            while chunk := os.read(self.err_fd, 65536):
                self._keep_stderr(chunk)
        return code

    def _keep_stderr(self, chunk: bytes) -> None:
        self.stderr = (self.stderr + chunk)[-STDERR_KEPT:]

    def stderr_text(self) -> str:
        return bytes(self.stderr).decode(errors="replace")

    def end_input(self) -> None:
        """Close its stdin: a probe run with `--stop-at-eof` stops the check under way and exits."""
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()

    def kill(self, term_wait: float = 0.0) -> None:
        """Kill its process group: SIGKILL at once, or SIGTERM first and SIGKILL after
        `term_wait` seconds (a probe that gets SIGTERM kills its commands' groups)."""
        first = [(signal.SIGTERM, term_wait)] if term_wait > 0 else []
        for signum, wait in (*first, (signal.SIGKILL, KILL_WAIT_S)):
            kill_group(self.proc.pid, signum)
            try:
                self.proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def release(self) -> None:
        """Close our ends of its pipes (after it exited or was killed)."""
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
