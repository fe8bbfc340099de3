"""One `ssh` client process per node, running the serving probe over its stdin and stdout.

Lines are read with poll() on the process's pipes and on a cancel pipe that close() makes
readable, so a thread waiting for an answer costs no CPU and wakes at once on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time

from runbook.checks.base import kill_process_group

STDERR_KEPT = 4096


class Session:
    """A node's `ssh` process: requests go in as lines, answers come back as lines."""

    def __init__(self, proc: subprocess.Popen[bytes], cancel_fd: int) -> None:
        self.proc = proc
        self.cancel_fd = cancel_fd
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.in_fd, self.out_fd, self.err_fd = (proc.stdin.fileno(), proc.stdout.fileno(),
                                                proc.stderr.fileno())
        self.buffer = bytearray()
        self.stderr = bytearray()
        self.started = time.monotonic()
        self.pid = 0  # the probe's pid on the node (its first line)
        self.ended = False  # its output ended: ssh, and with it the probe, is gone or going

    def send(self, data: bytes) -> bool:
        """Write all of data to ssh's stdin; False when ssh is gone."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.in_fd, view):]
        except OSError:  # EPIPE: ssh exited (the connection or the probe ended)
            return False
        return True

    def read_line(self, deadline: float) -> bytes | None:
        """The next line of output; None at the deadline, on cancel, or when the output ends."""
        poller = select.poll()
        for fd in (self.out_fd, self.err_fd, self.cancel_fd):
            poller.register(fd, select.POLLIN)
        err_open = True
        while b"\n" not in self.buffer:
            if self.ended:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            for fd, _ in poller.poll(left * 1000):
                if fd == self.cancel_fd:
                    return None
                chunk = os.read(fd, 65536)
                if fd == self.out_fd:
                    if not chunk:
                        self.ended = True
                    self.buffer.extend(chunk)
                elif chunk:
                    self.stderr = (self.stderr + chunk)[-STDERR_KEPT:]
                elif err_open:  # stderr closed (stdout may still have data): stop polling it
                    poller.unregister(self.err_fd)
                    err_open = False
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line

    def exit_code(self, wait: float) -> int | None:
        """ssh's exit status (the remote command's, or 255 for its own failures), None if it
        is still running after `wait` seconds. What is left on stderr is read first."""
        try:
            code = self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return None
        with contextlib.suppress(OSError):
            os.set_blocking(self.err_fd, False)
            while chunk := os.read(self.err_fd, 65536):
                self.stderr = (self.stderr + chunk)[-STDERR_KEPT:]
        return code

    def stderr_text(self) -> str:
        return bytes(self.stderr).decode(errors="replace")

    def end_input(self) -> None:
        """Close ssh's stdin: the probe on the node sees the end of its input, stops the check
        under way (`--stop-at-eof`) and exits, and ssh exits after it."""
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()

    def kill(self) -> None:
        """Kill the local ssh (its connection drops: the probe sees the end of its input)."""
        kill_process_group(self.proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)

    def release(self) -> None:
        """Close our ends of its pipes (after it exited or was killed)."""
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
