"""The SSH transport: the probe bundle runs in each node's own Python, over one connection per node.

Connections come from fabric, so `~/.ssh/config` (aliases, HostName, User, Port,
IdentityFile, ProxyJump) applies. Host keys are checked against known_hosts;
an unknown or changed key is refused unless `accept_new_host_keys` is set. The
bundle is shipped once per node, keyed by content hash. Each node runs one
serving probe for the whole run (a request per line in, an answer per line out),
so a node pays for one Python start, not one per check. The probe prints its PID
first, so a check that outlives its timeout (or a Ctrl-C) kills the remote
process group instead of leaving it behind; the next check starts a fresh probe.

Every way a node can fail is an answer with a one-line reason that says what to do, never
an exception: refused, a changed or unknown host key, a handshake slower than
--connect-timeout, no Python, a disk too full for the bundle, a connection lost mid-check.
`close()` (Ctrl-C) stops every busy probe on every node at once and cancels connects still
in progress, so the threads that wait on them return within a second.
"""

from __future__ import annotations

import contextlib
import json
import logging
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
COPY_TIMEOUT_S = 60.0
EXIT_STATUS_WAIT_S = 3.0
KILL_WAIT_S = 4.0  # close(): how long the remote kills of all nodes may take together
_NO_PYTHON_EXIT = 127
INTERRUPTED = "interrupted: the run is stopping"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class _Session:
    """A serving probe on one node: requests go in as lines, answers come back as lines."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.pid = 0
        self.busy = False
        self.buffer = bytearray()
        self.stderr = bytearray()
        self.ended = False  # its output ended: the probe exited (or its channel closed)
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
                self.ended = True
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
        self._connecting: dict[str, Any] = {}  # node -> a Connection whose open() is under way
        self._shipped: set[str] = set()
        self._locks: dict[str, threading.Lock] = {}
        self._registry_lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}  # node -> its serving probe
        self.closed = False
        _quiet_paramiko()

    # -- the transport protocol --

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        start = time.monotonic()
        try:
            connection = self._connection(node)
            bundle = self._ensure_bundle(node, connection)
            return self._probe(node, connection, bundle, request, timeout, start)
        except SshError as exc:
            status = "error" if self.closed else "unreachable"
            return ProbeAnswer(status, error=INTERRUPTED if self.closed else str(exc),
                               duration_s=time.monotonic() - start)
        except Exception as exc:  # a paramiko surprise on one node must not lose the others
            return ProbeAnswer("error", error=f"ssh: {type(exc).__name__}: {exc}",
                               duration_s=time.monotonic() - start)

    def close(self) -> None:
        """Kill the probes still busy on every node (all nodes at once), end the idle ones,
        cancel connects still under way and close every connection."""
        self.closed = True  # from here on nothing new starts on any node
        with self._registry_lock:
            sessions, connections = list(self._sessions.items()), dict(self._connections)
            connecting = list(self._connecting.values())
        for pending in connecting:  # their open() fails at once instead of at its timeout
            with contextlib.suppress(Exception):
                pending.client.close()
        kills = [threading.Thread(target=self._kill_remote, args=(connections[name], session.pid),
                                  name="ssh-kill", daemon=True)
                 for name, session in sessions if session.busy and name in connections]
        for thread in kills:
            thread.start()
        deadline = time.monotonic() + KILL_WAIT_S
        for thread in kills:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        for _, session in sessions:
            session.close()
        for connection in connections.values():
            with contextlib.suppress(Exception):
                connection.close()
        with self._registry_lock:
            self._sessions.clear()
            self._connections.clear()

    # -- connections --

    def _lock(self, name: str) -> threading.Lock:
        with self._registry_lock:
            return self._locks.setdefault(name, threading.Lock())

    def _connection(self, node: Node) -> Any:
        with self._lock(node.name):
            if self.closed:
                raise SshError(INTERRUPTED)
            if node.name not in self._connections:
                connection = self._open(node)
                with self._registry_lock:
                    if self.closed:  # close() ran while this one was connecting
                        connection.close()
                        raise SshError(INTERRUPTED)
                    self._connections[node.name] = connection
            connection = self._connections[node.name]
        transport = connection.client.get_transport()
        if transport is None or not transport.is_active():
            raise SshError("connection lost")
        return connection

    def _open(self, node: Node) -> Any:
        connection = self._new_connection(node)
        with self._registry_lock:
            self._connecting[node.name] = connection
        begin = time.monotonic()
        try:
            connection.open()
        except Exception as exc:
            with contextlib.suppress(Exception):
                connection.close()  # no paramiko thread left reading a late banner
            raise SshError(_describe_connect_error(exc, connection, max(1.0, self.connect_timeout),
                                                   time.monotonic() - begin)) from None
        finally:
            with self._registry_lock:
                self._connecting.pop(node.name, None)
        return connection

    def _new_connection(self, node: Node) -> Any:
        """A fabric Connection set up as OpenSSH would: ssh config, known_hosts, timeouts."""
        from fabric import Connection
        from paramiko import AutoAddPolicy, RejectPolicy

        options: dict[str, Any] = {"connect_timeout": max(1.0, self.connect_timeout)}
        host = str(node.vars.get("host") or node.name)
        if node.vars.get("user"):
            options["user"] = str(node.vars["user"])
        if node.vars.get("port"):
            options["port"] = int(node.vars["port"])
        try:
            connection = Connection(host, **options)
        except Exception as exc:  # e.g. a bad Port in ~/.ssh/config
            raise SshError(f"cannot use the ssh settings of {host}: {exc}") from None
        client = connection.client
        client.set_missing_host_key_policy(
            AutoAddPolicy() if self.accept_new_host_keys else RejectPolicy())
        _load_known_hosts(client, connection.ssh_config)
        # The whole handshake, not only the TCP connect, is bounded by --connect-timeout (as
        # given: fabric rounds it down to whole seconds).
        limit = connection.connect_timeout = options["connect_timeout"]
        connection.connect_kwargs.update(banner_timeout=limit, auth_timeout=limit)
        if str(connection.ssh_config.get("identitiesonly", "no")).lower() == "yes":
            # As OpenSSH: only the configured IdentityFile, no agent or default keys.
            connection.connect_kwargs.update(look_for_keys=False, allow_agent=False)
        return connection

    # -- the probe --

    def _ensure_bundle(self, node: Node, connection: Any) -> str:
        """The bundle's remote path; sent only when that node lacks this exact version."""
        path = f"{REMOTE_DIR}/{bundle_name()}"
        if node.name in self._shipped:
            return path
        # Ask first: a node that already has this version is sent nothing.
        out, _, _ = self._exec(connection, f'[ -f "{path}" ] && echo present || echo absent',
                               b"", self.connect_timeout)
        if out.strip() != b"present":
            # Written beside, then moved: a half-written bundle (a full disk) is never used,
            # and it is removed so that it does not hold the space it took.
            script = (f'f="{path}"; t="$f.$$"; mkdir -p "{REMOTE_DIR}" && cat > "$t" '
                      f'&& mv "$t" "$f" && exit 0; rm -f "$t"; exit 1')
            _, err, code = self._exec(connection, script, bundle_bytes(), COPY_TIMEOUT_S)
            if code != 0:
                raise SshError(_copy_failure(err, code))
        self._shipped.add(node.name)
        return path

    def _probe(self, node: Node, connection: Any, bundle: str, request: dict[str, Any],
               timeout: float, start: float) -> ProbeAnswer:
        python = str(node.vars.get("python") or self.python or "python3")
        session = self._sessions.get(node.name)
        if session is None or not session.alive():
            session = self._start_session(node, connection, bundle, python)
        payload = json.dumps({**request, "timeout": timeout}).encode() + b"\n"
        session.busy = True  # before the check of `closed`: close() kills a busy probe
        try:
            if self.closed:
                raise SshError(INTERRUPTED)
            session.channel.sendall(payload)
            line = session.read_line(time.monotonic() + timeout + KILL_GRACE_S, lambda: self.closed)
        except OSError:  # the channel is closed: the probe is gone
            line, session.ended = None, True
        finally:
            session.busy = False
        elapsed = time.monotonic() - start
        if line is not None:
            return parse_answer(line, b"", 0, elapsed)
        if self.closed:  # close() kills this probe; the answer is no longer wanted
            raise SshError(INTERRUPTED)
        return self._session_ended(node, connection, session, python, timeout, elapsed)

    def _start_session(self, node: Node, connection: Any, bundle: str, python: str) -> _Session:
        """One serving probe per node for the whole run; its first line is its PID."""
        exports = "".join(f"export {k}={_shell_quote(str(v))}; "
                          for k, v in (node.vars.get("env") or {}).items() if _ENV_NAME.match(k))
        command = (f'echo "$$"; {exports}command -v {_shell_quote(python)} >/dev/null 2>&1 '
                   f'|| exit {_NO_PYTHON_EXIT}; exec {_shell_quote(python)} "{bundle}" --serve')
        channel = self._open_channel(connection)
        try:
            channel.exec_command(command)
        except Exception as exc:
            raise SshError(f"connection lost: {exc or type(exc).__name__}") from None
        session = _Session(channel)
        first = session.read_line(time.monotonic() + self.connect_timeout, lambda: self.closed)
        session.pid = int(first) if first and first.strip().isdigit() else 0
        with self._registry_lock:
            self._sessions[node.name] = session
        return session

    def _open_channel(self, connection: Any) -> Any:
        try:
            return connection.client.get_transport().open_session(timeout=self.connect_timeout)
        except Exception as exc:
            raise SshError(f"connection lost: {exc or type(exc).__name__}") from None

    def _session_ended(self, node: Node, connection: Any, session: _Session, python: str,
                       timeout: float, elapsed: float) -> ProbeAnswer:
        """No answer line: the check hung (kill the probe) or the probe or connection died."""
        with self._registry_lock:
            self._sessions.pop(node.name, None)
        transport = connection.client.get_transport()
        if transport is None or not transport.is_active():
            session.close()
            raise SshError("connection lost while the check ran (the node went down, its sshd "
                           "died, or the network dropped)")
        if not session.ended and not session.channel.exit_status_ready():
            self._kill_remote(connection, session.pid)
            session.close()
            return ProbeAnswer("ok", {"timed_out": True, "reason": f"no answer within {timeout:g}s;"
                                      " the probe was killed on the node"}, duration_s=elapsed)
        # sshd may send the end of the output before the exit status: wait for it a little.
        session.channel.status_event.wait(EXIT_STATUS_WAIT_S)
        code = session.channel.exit_status if session.channel.exit_status_ready() else -1
        session.close()
        if code == _NO_PYTHON_EXIT:
            return ProbeAnswer("error", error=_no_python(python), duration_s=elapsed)
        if code == -1:
            raise SshError("connection lost while the check ran")
        last = (bytes(session.stderr).decode(errors="replace").strip().splitlines() or [""])[-1]
        return ProbeAnswer("error", error=f"probe exited {code}: {last[:300]}", duration_s=elapsed)

    def _exec(self, connection: Any, command: str, stdin: bytes,
              timeout: float) -> tuple[bytes, bytes, int | None]:
        """Run one short command on a fresh channel: (stdout, stderr, exit code or None)."""
        channel = self._open_channel(connection)
        try:
            channel.exec_command(command)
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
        except Exception as exc:
            channel.close()
            raise SshError(f"connection lost: {exc or type(exc).__name__}") from None
        try:
            return self._wait_exec(channel, timeout)
        finally:
            channel.close()

    def _wait_exec(self, channel: Any, timeout: float) -> tuple[bytes, bytes, int | None]:
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        channel.settimeout(0.05)
        while not (channel.exit_status_ready() and not channel.recv_ready()
                   and not channel.recv_stderr_ready()):
            if self.closed:
                raise SshError(INTERRUPTED)
            if time.monotonic() > deadline:
                return bytes(out), bytes(err), None
            _drain(channel, out, err)
        _drain(channel, out, err)
        code = channel.recv_exit_status()
        if code == -1:  # paramiko: the channel closed without an exit status
            raise SshError("connection lost")
        return bytes(out), bytes(err), code

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
            channel.status_event.wait(3)  # recv_exit_status() could wait for ever on a hung node
            channel.close()


def _no_python(python: str) -> str:
    if "/" in python:  # a path given with --python or `python:`
        return (f"{python} not found on the node: check the path given with --python or the "
                "node's `python:` in the inventory")
    return (f"{python} not found on the node's PATH: point --python at a Python 3 on the node "
            "(e.g. --python /opt/conda/bin/python3), or set `python:` for this node in the inventory")


def _quiet_paramiko() -> None:
    """paramiko logs a failed handshake with its traceback; with no handler anywhere, logging's
    last resort would print it on the user's terminal. The reason in the report is ours."""
    logger = logging.getLogger("paramiko")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


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
            try:
                client.load_host_keys(path)
            except Exception as exc:  # unreadable, or a line paramiko cannot parse
                raise SshError(f"cannot read the known_hosts file {path}: {exc}") from None


def _copy_failure(err: bytes, code: int | None) -> str:
    """Why the bundle could not be written on the node, and what to do about it."""
    where = f"cannot copy the probe to {REMOTE_DIR.replace('$HOME', '~')} on the node"
    if code is None:
        return f"{where}: not done within {COPY_TIMEOUT_S:g}s (the connection is very slow)"
    last = (err.decode(errors="replace").strip().splitlines() or [f"exit {code}"])[-1].strip()
    for known, hint in _COPY_HINTS.items():
        if known in last:
            return f"{where}: {known} ({hint})"
    return f"{where}: {last[:200]}"


_COPY_HINTS = {
    "No space left on device": "free some space on the node's home file system",
    "Disk quota exceeded": "the user's disk quota is used up; free some space in ~ on the node",
    "Read-only file system": "the node's home is read-only; remount it or use a user whose home "
                             "is writable",
    "Permission denied": "the user cannot write to ~/.cache on the node; fix its owner or "
                         "permissions",
}


def _describe_connect_error(exc: Exception, connection: Any, limit: float, elapsed: float) -> str:
    """One line: what went wrong connecting, where, and what to do."""
    from paramiko.ssh_exception import (
        AuthenticationException,
        BadHostKeyException,
        NoValidConnectionsError,
        PasswordRequiredException,
        SSHException,
    )

    host, port = connection.host, connection.port
    if isinstance(exc, BadHostKeyException):
        entry = host if port == 22 else f"[{host}]:{port}"
        return (f"host key of {host} changed: it does not match known_hosts (refused: the node was "
                "reinstalled, or someone is in the middle); check the new key with the node's "
                f"owner, then remove the old one: ssh-keygen -R '{entry}'")
    if isinstance(exc, NoValidConnectionsError):
        return (f"connection refused by {host}:{port}: nothing listens there (is the node up, "
                "its sshd running, the port right?)")
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return (f"connection to {host}:{port} timed out after {limit:g}s (--connect-timeout): the "
                "node is down, a firewall drops the packets, or the link is slow")
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host name {host!r} (check the name, or its HostName in ~/.ssh/config)"
    slow = _slow_handshake(exc, host, port, limit, elapsed)
    if slow:
        return slow
    if isinstance(exc, PasswordRequiredException):
        return (f"the private key for {connection.user}@{host}:{port} needs its passphrase: add it "
                "to ssh-agent first (ssh-add)")
    if isinstance(exc, AuthenticationException):
        return (f"key refused: authentication failed as {connection.user}@{host}:{port} (is your "
                "key in the node's authorized_keys? which IdentityFile does ~/.ssh/config name?)")
    if isinstance(exc, SSHException) and "not found in known_hosts" in str(exc):
        return (f"unknown host key: {host} is not in known_hosts (refusing; verify it "
                "with ssh-keyscan, or pass --accept-new-host-keys)")
    return f"cannot connect to {connection.user}@{host}:{port}: {exc or type(exc).__name__}"


def _slow_handshake(exc: Exception, host: str, port: int, limit: float, elapsed: float) -> str | None:
    """paramiko's words for a handshake cut short by the timeouts: it gives up on the banner,
    stops waiting for the key exchange without a word (auth then finds "No existing session"),
    or times out authentication."""
    text = str(exc)
    late = elapsed >= 0.9 * limit
    if "protocol banner" in text and not late:  # closed at once: not slow, not an sshd there
        return (f"no SSH greeting from {host}:{port}: the other side closed the connection (is it "
                "an sshd, and not refusing new connections: MaxStartups?)")
    if not ("protocol banner" in text or "Authentication timeout" in text
            or ("No existing session" in text and late)):
        return None
    return (f"connection to {host}:{port} too slow: the SSH handshake did not finish within "
            f"{limit:g}s (--connect-timeout); the link or the node's sshd is slow or stuck (raise "
            "--connect-timeout for a slow link)")
