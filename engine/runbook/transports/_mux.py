"""The client side of OpenSSH's control-master protocol (OpenSSH's PROTOCOL.mux), without `ssh`.

What `ssh -o ControlPath=P host cmd` does when a master listens on P, done here in a few
system calls: connect to the master's Unix socket, exchange hellos, ask for a session that
runs `cmd`, and hand the master our ends of three pipes (SCM_RIGHTS) as the session's stdin,
stdout and stderr. The master opens a channel on the SSH connection it already holds, so a
node costs no `ssh` process (about 9 ms of CPU each) and no key exchange. `MuxProcess` stands
for the session where a `subprocess.Popen` would be: its exit status arrives as a message on
the control socket, and closing that socket ends the session's channel.

Every read has a deadline: a master that is stopped, or whose connection no longer answers,
is a MuxError within that time, never a hang.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import subprocess
import time

VERSION = 4
C_HELLO = 0x00000001
C_NEW_SESSION = 0x10000002
C_ALIVE_CHECK = 0x10000004
C_TERMINATE = 0x10000005
S_OK = 0x80000001
S_PERMISSION_DENIED = 0x80000002
S_FAILURE = 0x80000003
S_EXIT_MESSAGE = 0x80000004
S_ALIVE = 0x80000005
S_SESSION_OPENED = 0x80000006
NO_ESCAPE_CHAR = 0xFFFFFFFF
MAX_MESSAGE = 256 * 1024  # a master's replies are tens of bytes; more is not a master
SSH_FAILED_EXIT = 255  # as `ssh`: the connection ended without the command's exit status


class MuxError(Exception):
    """The master cannot be used: gone, stopped, refusing, or not answering in time."""


class MuxRefused(MuxError):
    """The master answered, but no: the node refused one more session (sshd's MaxSessions)."""


class MuxTimeout(MuxError):
    """No whole message before the deadline (or, without one, none there yet)."""


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _message(kind: int, body: bytes = b"") -> bytes:
    return _string(struct.pack(">I", kind) + body)


class MuxConnection:
    """One connection to a master's control socket, hellos exchanged."""

    def __init__(self, path: str, deadline: float) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._buffer = bytearray()
        self._next_id = 1
        try:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            self.sock.connect(path)
            self.sock.sendall(_message(C_HELLO, struct.pack(">I", VERSION)))
            kind, body = self.read(deadline)
            if kind != C_HELLO or struct.unpack(">I", body[:4])[0] != VERSION:
                raise MuxError(f"not an OpenSSH master (hello {kind:#x})")
        except (OSError, struct.error, EOFError) as exc:
            self.close()
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise MuxError(f"master at {path}: {text or type(exc).__name__}") from None
        except MuxError:
            self.close()
            raise

    def request_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def read(self, deadline: float | None) -> tuple[int, bytes]:
        """The next message (type, body): MuxTimeout at the deadline, EOFError when the socket
        ends. deadline None: only what is already there, MuxTimeout if a whole one is not."""
        while True:
            if len(self._buffer) >= 4:
                size = struct.unpack(">I", self._buffer[:4])[0]
                if not 4 <= size <= MAX_MESSAGE:
                    raise MuxError(f"a message of {size} bytes from the master")
                if len(self._buffer) >= 4 + size:
                    payload = bytes(self._buffer[4:4 + size])
                    del self._buffer[:4 + size]
                    return struct.unpack(">I", payload[:4])[0], payload[4:]
            left = 0.0 if deadline is None else deadline - time.monotonic()
            if deadline is not None and left <= 0:
                raise MuxTimeout("the master did not answer in time")
            ready, _, _ = select.select([self.sock], [], [], max(0.0, left))
            if not ready:
                if deadline is None:
                    raise MuxTimeout("nothing yet")
                continue
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the master closed the control connection")
            self._buffer.extend(chunk)

    def alive_check(self, deadline: float) -> int:
        """The master's pid (`ssh -O check`)."""
        self.sock.sendall(_message(C_ALIVE_CHECK, struct.pack(">I", self.request_id())))
        kind, body = self._reply(deadline)
        if kind != S_ALIVE:
            raise MuxError(f"alive check answered {kind:#x}")
        return int(struct.unpack(">I", body[4:8])[0])

    def terminate(self, deadline: float) -> None:
        """Ask the master to exit (`ssh -O exit`)."""
        self.sock.sendall(_message(C_TERMINATE, struct.pack(">I", self.request_id())))
        kind, body = self._reply(deadline)
        if kind != S_OK:
            raise MuxError(_reason(kind, body) or f"terminate answered {kind:#x}")

    def _reply(self, deadline: float) -> tuple[int, bytes]:
        try:
            return self.read(deadline)
        except EOFError as exc:
            raise MuxError(str(exc)) from None
        except OSError as exc:
            raise MuxError(exc.strerror or str(exc)) from None

    def open_session(self, command: str, deadline: float) -> MuxProcess:
        """Run `command` in a new session over the master's connection. The master answers
        once the node's sshd has opened the channel: a connection that no longer answers is
        a MuxError at the deadline."""
        body = (struct.pack(">I", self.request_id()) + _string(b"")
                + struct.pack(">5I", 0, 0, 0, 0, NO_ESCAPE_CHAR)  # no tty, X11, agent, subsystem
                + _string(b"") + _string(command.encode()))
        pipes = [os.pipe() for _ in range(3)]
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]  # the session's stdin, stdout, stderr
        ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
        try:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            self.sock.sendall(_message(C_NEW_SESSION, body))
            for fd in theirs:
                socket.send_fds(self.sock, [b"\0"], [fd])
        except OSError as exc:
            _close_all(theirs + ours)
            raise MuxError(f"cannot ask the master for a session: {exc.strerror or exc}") from None
        _close_all(theirs)  # the master holds them now
        try:
            kind, reply = self._reply(deadline)
        except MuxError:
            _close_all(ours)
            raise
        if kind != S_SESSION_OPENED:
            _close_all(ours)
            if kind in (S_PERMISSION_DENIED, S_FAILURE):
                raise MuxRefused(_reason(kind, reply) or "session refused")
            raise MuxError(f"session request answered {kind:#x}")
        return MuxProcess(self, *ours)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def _reason(kind: int, body: bytes) -> str:
    """The text of a PERMISSION_DENIED or FAILURE reply (request id, then a string)."""
    if kind in (S_PERMISSION_DENIED, S_FAILURE) and len(body) >= 8:
        size = struct.unpack(">I", body[4:8])[0]
        return body[8:8 + size].decode(errors="replace").strip()[:200]
    return ""


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class MuxProcess:
    """A session on a master, with the parts of `subprocess.Popen` a probe pipe uses: stdin,
    stdout, stderr, poll(), wait(). It has no pid of its own: `kill()` closes the control
    connection, which makes the master close the session's channel."""

    def __init__(self, conn: MuxConnection, stdin_fd: int, stdout_fd: int, stderr_fd: int) -> None:
        self.conn = conn
        self.stdin = os.fdopen(stdin_fd, "wb", buffering=0)
        self.stdout = os.fdopen(stdout_fd, "rb", buffering=0)
        self.stderr = os.fdopen(stderr_fd, "rb", buffering=0)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read_exit(None)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._read_exit(time.monotonic() + (timeout if timeout is not None else 1e9))
        if self.returncode is None:
            raise subprocess.TimeoutExpired("ssh (control master session)", timeout or 0.0)
        return self.returncode

    def _read_exit(self, deadline: float | None) -> None:
        """Read the control socket for the exit message; its end without one is ssh's 255."""
        try:
            while True:
                kind, body = self.conn.read(deadline)
                if kind == S_EXIT_MESSAGE and len(body) >= 8:
                    self.returncode = int(struct.unpack(">I", body[4:8])[0])
                    self.conn.close()
                    return
        except MuxTimeout:  # still running
            return
        except (MuxError, EOFError, OSError, ValueError):  # the master broke off, or it is gone
            self.returncode = SSH_FAILED_EXIT
            self.conn.close()

    def kill(self) -> None:
        """End the session: the master closes its channel, sshd closes the command's pipes."""
        self.conn.close()
        if self.returncode is None:
            self.returncode = -9

    def close(self) -> None:
        self.conn.close()
