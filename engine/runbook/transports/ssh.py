"""The SSH transport: the probe bundle runs in each node's own Python, over one connection per node.

Connections come from fabric, so `~/.ssh/config` (aliases, HostName, User, Port,
IdentityFile, ProxyJump) applies. Host keys are checked against known_hosts;
an unknown or changed key is refused unless `accept_new_host_keys` is set. The
bundle is shipped once per node, keyed by content hash. Each node runs one
serving probe for the whole run (a request per line in, an answer per line out),
so a node pays for one Python start, not one per check. The probe prints its PID
first, so a check that outlives its timeout (or a Ctrl-C) kills the remote
process group instead of leaving it behind; the next check starts a fresh probe.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
import time
from typing import Any

from runbook.transports import Node, ProbeAnswer
from runbook.transports.bundle import bundle_bytes, bundle_name
from runbook.transports.local import parse_answer

REMOTE_DIR = "$HOME/.cache/runbook"
KILL_GRACE_S = 0.5
_NO_PYTHON_EXIT = 127
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class _Session:
    """A serving probe on one node: requests go in as lines, answers come back as lines."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.pid = 0
        self.busy = False
        self.buffer = bytearray()
        self.stderr = bytearray()
        channel.settimeout(0.02)

    def alive(self) -> bool:
        return not self.channel.closed and not self.channel.exit_status_ready()

    def read_line(self, deadline: float, cancelled: Any) -> bytes | None:
        """The next line of stdout, or None at the deadline, on cancel or when the probe ends."""
        while b"\n" not in self.buffer:
            if time.monotonic() > deadline or cancelled():
                return None
            if self.channel.recv_stderr_ready():
                self.stderr = (self.stderr + self.channel.recv_stderr(65536))[-4096:]
            try:
                chunk = self.channel.recv(65536)
            except TimeoutError:
                continue
            if not chunk:  # end of output: the probe exited
                return None
            self.buffer.extend(chunk)
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.channel.shutdown_write()  # end of input: a serving probe exits by itself
            self.channel.close()


class SshError(Exception):
    """A node that cannot be reached; `str()` is the one-line reason for the report."""


class SshTransport:
    def __init__(self, python: str | None = None, connect_timeout: float = 10.0,
                 accept_new_host_keys: bool = False, **_: Any) -> None:
        self.python = python
        self.connect_timeout = connect_timeout
        self.accept_new_host_keys = accept_new_host_keys
        self._connections: dict[str, Any] = {}
        self._shipped: set[str] = set()
        self._locks: dict[str, threading.Lock] = {}
        self._registry_lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}  # node -> its serving probe
        self.closed = False

    # -- the transport protocol --

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        start = time.monotonic()
        try:
            connection = self._connection(node)
            bundle = self._ensure_bundle(node, connection)
            return self._probe(node, connection, bundle, request, timeout, start)
        except SshError as exc:
            return ProbeAnswer("unreachable", error=str(exc), duration_s=time.monotonic() - start)

    def close(self) -> None:
        """Kill probes still busy on any node, end the idle ones, close every connection."""
        self.closed = True
        for name, session in list(self._sessions.items()):
            connection = self._connections.get(name)
            if session.busy and connection is not None:
                self._kill_remote(connection, session.pid)
            session.close()
        self._sessions.clear()
        for connection in self._connections.values():
            with contextlib.suppress(Exception):
                connection.close()
        self._connections.clear()

    # -- connections --

    def _lock(self, name: str) -> threading.Lock:
        with self._registry_lock:
            return self._locks.setdefault(name, threading.Lock())

    def _connection(self, node: Node) -> Any:
        with self._lock(node.name):
            if node.name not in self._connections:
                self._connections[node.name] = self._open(node)
            connection = self._connections[node.name]
        transport = connection.client.get_transport()
        if transport is None or not transport.is_active():
            raise SshError("connection lost")
        return connection

    def _open(self, node: Node) -> Any:
        from fabric import Connection
        from paramiko import AutoAddPolicy, RejectPolicy

        options: dict[str, Any] = {"connect_timeout": int(max(1, self.connect_timeout))}
        host = str(node.vars.get("host") or node.name)
        if node.vars.get("user"):
            options["user"] = str(node.vars["user"])
        if node.vars.get("port"):
            options["port"] = int(node.vars["port"])
        connection = Connection(host, **options)
        client = connection.client
        client.set_missing_host_key_policy(
            AutoAddPolicy() if self.accept_new_host_keys else RejectPolicy())
        _load_known_hosts(client, connection.ssh_config)
        if str(connection.ssh_config.get("identitiesonly", "no")).lower() == "yes":
            # As OpenSSH: only the configured IdentityFile, no agent or default keys.
            connection.connect_kwargs.update(look_for_keys=False, allow_agent=False)
        try:
            connection.open()
        except Exception as exc:
            raise SshError(_describe_connect_error(exc, connection)) from None
        return connection

    # -- the probe --

    def _ensure_bundle(self, node: Node, connection: Any) -> str:
        """The bundle's remote path; sent only when that node lacks this exact version."""
        path = f"{REMOTE_DIR}/{bundle_name()}"
        if node.name in self._shipped:
            return path
        script = (f'f="{path}"; if [ -f "$f" ]; then echo present; else mkdir -p "{REMOTE_DIR}"'
                  f' && cat > "$f.$$" && mv "$f.$$" "$f" && echo sent; fi')
        # Ask first: a node that already has this version is sent nothing.
        out, _, _ = self._exec(connection, f'[ -f "{path}" ] && echo present || echo absent',
                               b"", self.connect_timeout)
        if out.strip() != b"present":
            out, err, code = self._exec(connection, script, bundle_bytes(), 60)
            if code != 0:
                raise SshError(f"cannot copy the probe to the node: "
                               f"{err.decode(errors='replace').strip()[:200]}")
        self._shipped.add(node.name)
        return path

    def _probe(self, node: Node, connection: Any, bundle: str, request: dict[str, Any],
               timeout: float, start: float) -> ProbeAnswer:
        python = str(node.vars.get("python") or self.python or "python3")
        session = self._sessions.get(node.name)
        if session is None or not session.alive():
            session = self._start_session(node, connection, bundle, python)
        payload = json.dumps({**request, "timeout": timeout}).encode() + b"\n"
        session.busy = True
        try:
            session.channel.sendall(payload)
            line = session.read_line(time.monotonic() + timeout + KILL_GRACE_S, lambda: self.closed)
        except OSError:
            line = None
        finally:
            session.busy = False
        elapsed = time.monotonic() - start
        if line is not None:
            return parse_answer(line, b"", 0, elapsed)
        return self._session_ended(node, connection, session, python, timeout, elapsed)

    def _start_session(self, node: Node, connection: Any, bundle: str, python: str) -> _Session:
        """One serving probe per node for the whole run; its first line is its PID."""
        exports = "".join(f"export {k}={_shell_quote(str(v))}; "
                          for k, v in (node.vars.get("env") or {}).items() if _ENV_NAME.match(k))
        command = (f'echo "$$"; {exports}command -v {_shell_quote(python)} >/dev/null 2>&1 '
                   f'|| exit {_NO_PYTHON_EXIT}; exec {_shell_quote(python)} "{bundle}" --serve')
        try:
            channel = connection.client.get_transport().open_session(timeout=self.connect_timeout)
            channel.exec_command(command)
        except Exception as exc:
            raise SshError(f"connection lost: {exc or type(exc).__name__}") from None
        session = _Session(channel)
        first = session.read_line(time.monotonic() + self.connect_timeout, lambda: self.closed)
        session.pid = int(first) if first and first.strip().isdigit() else 0
        self._sessions[node.name] = session
        return session

    def _session_ended(self, node: Node, connection: Any, session: _Session, python: str,
                       timeout: float, elapsed: float) -> ProbeAnswer:
        """No answer line: the check hung (kill the probe) or the probe or connection died."""
        self._sessions.pop(node.name, None)
        transport = connection.client.get_transport()
        if transport is None or not transport.is_active():
            session.close()
            raise SshError("connection lost while the check ran")
        if not session.channel.exit_status_ready():
            self._kill_remote(connection, session.pid)
            session.close()
            return ProbeAnswer("ok", {"timed_out": True, "reason": f"no answer within {timeout:g}s;"
                                      " the probe was killed on the node"}, duration_s=elapsed)
        code = session.channel.recv_exit_status()
        session.close()
        if code == _NO_PYTHON_EXIT:
            return ProbeAnswer("error", error=f"{python} not found on the node's PATH (set "
                               "`python:` for this node in the inventory, or --python)",
                               duration_s=elapsed)
        if code == -1:
            raise SshError("connection lost while the check ran")
        last = (bytes(session.stderr).decode(errors="replace").strip().splitlines() or [""])[-1]
        return ProbeAnswer("error", error=f"probe exited {code}: {last[:300]}", duration_s=elapsed)

    def _exec(self, connection: Any, command: str, stdin: bytes,
              timeout: float) -> tuple[bytes, bytes, int | None]:
        """Run one short command on a fresh channel: (stdout, stderr, exit code or None)."""
        try:
            channel = connection.client.get_transport().open_session(timeout=self.connect_timeout)
            channel.exec_command(command)
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
        except Exception as exc:
            raise SshError(f"connection lost: {exc or type(exc).__name__}") from None
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        channel.settimeout(0.05)
        try:
            while not (channel.exit_status_ready() and not channel.recv_ready()
                       and not channel.recv_stderr_ready()):
                if time.monotonic() > deadline:
                    return bytes(out), bytes(err), None
                _drain(channel, out, err)
            _drain(channel, out, err)
            code = channel.recv_exit_status()
            if code == -1:  # paramiko: the channel closed without an exit status
                raise SshError("connection lost")
            return bytes(out), bytes(err), code
        finally:
            channel.close()

    def _kill_remote(self, connection: Any, pid: int) -> None:
        """SIGTERM the probe's process group (it kills its own commands), then SIGKILL it and
        the groups of its commands: each runs in a group of its own, and a probe too busy to
        handle SIGTERM in time must not leave a hung `nvidia-smi` behind."""
        if pid <= 1:
            return
        with contextlib.suppress(Exception):
            channel = connection.client.get_transport().open_session(timeout=2)
            # The children are listed first: once the probe is gone they have a new parent.
            channel.exec_command(f"kids=$(pgrep -P {pid} 2>/dev/null | sed 's/^/-/'); "
                                 f"kill -TERM -- -{pid} {pid} 2>/dev/null; sleep 0.3; "
                                 f"kill -KILL -- -{pid} {pid} $kids 2>/dev/null; true")
            channel.settimeout(3)
            channel.recv_exit_status()
            channel.close()


def _drain(channel: Any, out: bytearray, err: bytearray) -> None:
    with contextlib.suppress(socket.timeout):
        while channel.recv_ready():
            out.extend(channel.recv(65536))
        while channel.recv_stderr_ready():
            err.extend(channel.recv_stderr(65536))
        if not channel.recv_ready() and not channel.exit_status_ready():
            chunk = channel.recv(65536)  # blocks up to the channel timeout (0.1 s)
            out.extend(chunk)


def _shell_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _load_known_hosts(client: Any, ssh_config: Any) -> None:
    """The user's known_hosts, and any UserKnownHostsFile the ssh config names."""
    with contextlib.suppress(OSError):
        client.load_system_host_keys()
    files = ssh_config.get("userknownhostsfile", "") if ssh_config else ""
    for path in str(files).split():
        path = os.path.expanduser(path)
        if os.path.exists(path):
            client.load_host_keys(path)


def _describe_connect_error(exc: Exception, connection: Any) -> str:
    from paramiko.ssh_exception import (
        AuthenticationException,
        BadHostKeyException,
        NoValidConnectionsError,
        SSHException,
    )

    where = f"{connection.user}@{connection.host}:{connection.port}"
    if isinstance(exc, BadHostKeyException):
        return (f"host key of {connection.host} does not match known_hosts (refusing: the host "
                "was reinstalled or someone is in the middle); check it, then update known_hosts")
    if isinstance(exc, AuthenticationException):
        return f"key refused: authentication failed as {where}"
    if isinstance(exc, NoValidConnectionsError):
        return f"connection refused by {connection.host}:{connection.port}"
    if isinstance(exc, SSHException) and "not found in known_hosts" in str(exc):
        return (f"unknown host key: {connection.host} is not in known_hosts (refusing; verify it "
                "with ssh-keyscan, or pass --accept-new-host-keys)")
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"connection to {connection.host}:{connection.port} timed out"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host name {connection.host!r}"
    return f"cannot connect to {where}: {exc or type(exc).__name__}"
