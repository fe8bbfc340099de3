"""The SSH transport: the probe bundle runs in each node's own Python, over one `ssh` per node.

Each node gets one OpenSSH client process for the whole run (`ssh -T`, BatchMode), so
`~/.ssh/config` (aliases, HostName, User, Port, IdentityFile, ProxyJump) and known_hosts apply
as for any ssh; $HOME's ~/.ssh is the one read (see _openssh.py). Its forwardings do not
(LocalForward, RemoteForward, ForwardAgent, X11): the probe needs none. An unknown or changed
host key is refused unless `accept_new_host_keys` is set (then only a changed one is). The
client is OpenSSH's, not paramiko's: its handshake and packets are C, so the client's CPU per
node (its ssh included) went from about 37 to about 16 ms, and with the key exchange over
P-256 (_openssh.py) to about 13, some 10 of them the ssh process (bench/fanout, 64 nodes).
Handshakes under way at once are capped (CONNECT_SLOTS), so that hundreds of nodes on a small
client do not each take longer than --connect-timeout.

Connections are reused across runs (`persist`, --ssh-persist, 60 s by default; 0: off): the
`ssh` of a node is then a control master (`ssh -N`, ControlPersist) that outlives the run by
that many seconds, and the probe's session is opened on it through OpenSSH's mux protocol
(_mux.py) with no `ssh` process, so a repeat within the window costs the client no process
and no key exchange (about 3 ms of CPU per node, its master included, instead of about 17:
bench/fanout/reuse.py). A master that is gone, stuck, or whose connection no longer opens a
session within --connect-timeout is discarded and replaced (_masters.py); a failure of a new
one is the node's reason as above. A node that refuses one more session on a working master
(MaxSessions, other runs on it) gets an `ssh` of this run's own; the master is left alone.
A new master checks the host's ECDSA P-256 key where known_hosts holds it besides the others
(_known_hosts.py): OpenSSL's P-256 costs the client about 1.2 ms less than OpenSSH's own ed25519.

Over that one connection a short shell checks for Python, prints its PID and whether it holds
the bundle (one write), is sent the bundle only when the node lacks this exact version (keyed
by content hash; written beside, then moved, so a half-written bundle is never used) and
becomes the serving probe: a request per line in, an answer per line out, one Python start per
node. A check that outlives its timeout, or a Ctrl-C, closes that ssh's input: the probe
(`--stop-at-eof`) kills the commands of the check under way and exits, with no second
connection needed; the next check on that node starts a fresh one.

Every way a node can fail is an answer with a one-line reason that says what to do, never
an exception: refused, a changed or unknown host key, a handshake slower than
--connect-timeout, no Python, a disk too full for the bundle, a connection lost mid-check.
`close()` (Ctrl-C) stops every busy probe on every node at once and cancels connects still
in progress, so the threads that wait on them return at once.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import resource
import select
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from runbook.transports import INTERRUPTED, Node, ProbeAnswer
from runbook.transports import _known_hosts as known_hosts
from runbook.transports import _masters as masters
from runbook.transports import _openssh as openssh
from runbook.transports._mux import MuxConnection, MuxError, MuxRefused
from runbook.transports._probe_pipe import kill_group, spawn
from runbook.transports._session import Session
from runbook.transports.bundle import bundle_bytes, bundle_name
from runbook.transports.local import parse_answer

REMOTE_DIR = "$HOME/.cache/runbook"
KILL_GRACE_S = 0.5
COPY_TIMEOUT_S = 60.0
EXIT_STATUS_WAIT_S = 3.0
KILL_WAIT_S = 4.0  # close(): how long the probes of all nodes may take together to stop
_NO_PYTHON_EXIT = 127
_COPY_FAILED_EXIT = 90
_SSH_FAILED_EXIT = 255  # ssh's own failures; the probe never exits with it
CONNECT_SLOTS = max(64, 16 * (os.cpu_count() or 1))  # handshakes under way at once
_NO_SSH = "cannot run the OpenSSH client `ssh`: {} (install openssh-client)"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class SshError(Exception):
    """A node that cannot be reached; `str()` is the one-line reason for the report."""


class ProbeFailure(Exception):
    """The node answers but cannot run the probe (no Python); `str()` is the reason."""


class SshTransport:
    def __init__(self, python: str | None = None, connect_timeout: float = 10.0,
                 accept_new_host_keys: bool = False, persist: float = masters.DEFAULT_PERSIST_S,
                 **_: Any) -> None:
        self.python = python
        self.connect_timeout = max(1.0, connect_timeout)
        self.accept_new_host_keys = accept_new_host_keys
        self.persist = max(0, math.ceil(persist))  # seconds a node's master outlives the run; 0: none
        self._control: Path | None = None  # the masters' directory, once asked for
        self._stamp: str | None = None  # _config_stamp(), once
        self._config: str | None = None
        self._known: known_hosts.KnownHosts | None = None  # the preferred host key type's entries, once
        self._sessions: dict[str, Session] = {}  # node -> its ssh and serving probe
        self._locks: dict[str, threading.Lock] = {}
        self._registry_lock = threading.Lock()
        self._known_lock = threading.Lock()
        self._cancel_r, self._cancel_w = os.pipe()  # readable once close() runs
        self._connect_slots = threading.BoundedSemaphore(CONNECT_SLOTS)
        self.closed = False
        raise_fd_limit()

    # -- the transport protocol --

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        start = time.monotonic()
        try:
            with self._lock(node.name):  # a node's checks come one at a time; this is cheap
                session = self._session(node)
                return self._ask(node, session, request, timeout, start)
        except SshError as exc:
            status = "error" if self.closed else "unreachable"
            return ProbeAnswer(status, error=INTERRUPTED if self.closed else str(exc),
                               duration_s=time.monotonic() - start)
        except ProbeFailure as exc:
            return ProbeAnswer("error", error=str(exc), duration_s=time.monotonic() - start)
        except Exception as exc:  # a surprise on one node must not lose the others
            # close() releases a connecting session's pipes under its reader (EBADF): stopping
            error = INTERRUPTED if self.closed else f"ssh: {type(exc).__name__}: {exc}"
            return ProbeAnswer("error", error=error, duration_s=time.monotonic() - start)

    def close(self) -> None:
        """End every node's input at once (busy probes kill their check's commands, idle ones
        exit), wait for the ssh clients together, kill those that do not exit in time
        (a frozen node, a connect under way) and wake every thread waiting on one."""
        with self._registry_lock:
            self.closed = True  # from here on nothing new starts on any node
            sessions = list(self._sessions.values())
            self._sessions.clear()
        with contextlib.suppress(OSError):
            os.write(self._cancel_w, b"x")
        for session in sessions:
            if session.pid:
                session.end_input()
            else:  # still connecting: there is no probe to stop yet
                session.kill()
        deadline = time.monotonic() + KILL_WAIT_S
        for session in sessions:
            if session.exit_code(max(0.0, deadline - time.monotonic())) is None:
                session.kill()
            session.release()

    # -- sessions --

    def _lock(self, name: str) -> threading.Lock:
        with self._registry_lock:
            return self._locks.setdefault(name, threading.Lock())

    def _session(self, node: Node) -> Session:
        session = self._sessions.get(node.name)
        if session is not None and not session.ended and session.proc.poll() is None:
            return session
        if session is not None:  # it ended since the last check
            self._forget(node.name, session)
            code = session.exit_code(EXIT_STATUS_WAIT_S)
            session.release()
            if code == _SSH_FAILED_EXIT:
                raise SshError("connection lost")
        return self._start(node)

    def _forget(self, name: str, session: Session) -> None:
        with self._registry_lock:
            if self._sessions.get(name) is session:
                del self._sessions[name]

    def _config_file(self) -> str:
        with self._registry_lock:  # every connecting thread asks at once: write it (and ask ssh -V) once
            if self._config is None:
                try:
                    self._config = openssh.write_config(os.environ.get("HOME") or "/")
                except OSError as exc:
                    raise SshError(str(exc)) from None
            return self._config

    def _argv(self, node: Node, command: str | None, master: Path | None = None,
              cheap_host_key: bool = False) -> list[str]:
        """`ssh` running `command` on the node, or (command None) the node's master on `master`;
        `cheap_host_key`: check the host's ECDSA P-256 key, known too, first (_known_hosts.py)."""
        host = str(node.vars.get("host") or node.name)
        # -a -x ClearAllForwardings: the probe needs no forwarding, and a user's LocalForward
        # or ForwardAgent would otherwise go with it to every node (a master would hold the
        # port for --ssh-persist seconds, and hand the user's agent to the node).
        argv = ["ssh", "-F", self._config_file(), "-T", "-a", "-x", "-o", "ClearAllForwardings=yes",
                "-o", "BatchMode=yes", "-o", f"ConnectTimeout={math.ceil(self.connect_timeout)}",
                "-o", "StrictHostKeyChecking=" + ("accept-new" if self.accept_new_host_keys else "yes")]
        if master is None:  # a master of the user's own would hold our pipes open
            argv += ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
        else:
            argv += [*masters.master_options(master, self.persist), "-N"]
        if cheap_host_key:
            argv += ["-o", f"HostKeyAlgorithms=^{known_hosts.PREFERRED}"]
        if node.vars.get("port"):
            argv += ["-p", str(int(node.vars["port"]))]
        if node.vars.get("user"):
            argv += ["-l", str(node.vars["user"])]
        return [*argv, "--", host, *([command] if command is not None else [])]

    def _start(self, node: Node) -> Session:
        """Connect, check for Python, ship the bundle if needed and start the serving probe."""
        python = self._python(node)
        master = self._master_path(node)
        if master is not None:  # slots for handshakes only (_start_master): a reuse has none
            return self._connect_on_master(node, python, master)
        self._take_connect_slot()
        try:
            return self._connect_direct(node, self._script(node, python))
        finally:
            self._connect_slots.release()

    # -- reused connections: a control master per node (_masters.py, _mux.py) --

    def _master_path(self, node: Node) -> Path | None:
        """Where the node's master listens; None when connections are not reused."""
        if self.persist <= 0:
            return None
        with self._registry_lock:
            if self._control is None:
                try:
                    self._control = masters.control_dir()
                except masters.NoControlDir as exc:
                    print(f"runbook: {exc}; each run connects anew", file=sys.stderr)
                    self.persist = 0
                    return None
            if self._stamp is None:
                self._stamp = _config_stamp()
        port = node.vars.get("port") or ""
        user = node.vars.get("user") or ""
        host = node.vars.get("host") or node.name
        # The config file's name hashes its text, which names the user's and the system's
        # configs; their own changes (a new HostName) are in the stamp.
        key = f"{user}@{host}:{port} {self._config_file()} {self._stamp}"
        return masters.socket_path(self._control, key)

    def _connect_on_master(self, node: Node, python: str, master: Path) -> Session:
        """The probe's session on the node's master: the one a run within the window left, or
        (none, or a stale or broken one, which is discarded) a new master."""
        script = self._script(node, python)
        conn = masters.connect(master)
        if conn is not None:
            session = self._open_on(node, conn, master, script, fresh=False)
            if session is not None:
                return session
        self._take_connect_slot()
        try:
            self._start_master(node, master)
        finally:
            self._connect_slots.release()
        conn = masters.connect(master, self.connect_timeout)
        if conn is None:
            raise SshError(f"the SSH connection to {node.name} ended as soon as it was made")
        session = self._open_on(node, conn, master, script, fresh=True)
        assert session is not None
        return session

    def _open_on(self, node: Node, conn: MuxConnection, master: Path, script: str,
                 fresh: bool) -> Session | None:
        """A session on `conn`'s master; a master that cannot open one within --connect-timeout
        (its connection no longer answers) is discarded: None for an old one, SshError for
        the one just made. A node that refuses one more session on a working master (sshd's
        MaxSessions, while other runs use it) gets a connection of this run's own instead."""
        try:
            proc = conn.open_session(script, time.monotonic() + self.connect_timeout)
        except MuxRefused:
            conn.close()  # the master is fine and may serve other runs: leave it
            self._take_connect_slot()
            try:
                return self._connect_direct(node, script)
            finally:
                self._connect_slots.release()
        except MuxError as exc:
            conn.close()
            masters.discard(master)
            if fresh:
                raise SshError(f"cannot open a session on the new SSH connection to {node.name}: "
                               f"{exc}") from None
            return None
        return self._begin(node, Session(proc, self._cancel_r))

    def _start_master(self, node: Node, master: Path) -> None:
        """`ssh -N` as the node's master: it returns once connected and logged in (its master
        goes on in the background), or with ssh's 255 and the reason in its log. Checking the
        host's ECDSA key where known_hosts has it too, or (refused on the host key: the lookup
        was wrong) with ssh's own choice."""
        started = time.monotonic()
        cheap = self._cheap_host_key(node)
        code, text = self._run_master(self._argv(node, None, master, cheap), master, started)
        if cheap and code == _SSH_FAILED_EXIT and "host key" in text.lower() and not self.closed:
            code, text = self._run_master(self._argv(node, None, master), master, started)
        if self.closed:
            raise SshError(INTERRUPTED)
        if code == 0:
            return
        if code is None and (other := masters.connect(master)) is not None:
            other.close()  # another run's master took the socket first (ours then waits on): use it
            return
        masters.discard(master)
        where = self._where(node)
        if code is None:
            raise SshError(openssh.too_slow(where[0], where[1], self.connect_timeout))
        raise SshError(openssh.describe_failure(text if code == _SSH_FAILED_EXIT else "", where,
                                                self.connect_timeout, time.monotonic() - started))

    def _run_master(self, argv: list[str], master: Path, started: float) -> tuple[int | None, str]:
        """Run `ssh -N` (argv) until its master detaches: its exit code (None: slower than
        --connect-timeout from `started`, or close() ran) and what it wrote."""
        log = masters.log_path(master)
        try:
            with open(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as err:
                # a file, not a pipe: the master keeps its stderr open for as long as it lives
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=err, start_new_session=True,
                                        cwd="/")  # the master outlives us: it pins no directory
        except OSError as exc:
            raise SshError(_NO_SSH.format(exc.strerror or exc)) from None
        code = _wait_exit(proc, started + self.connect_timeout, self._cancel_r)
        if code is None:
            kill_group(proc.pid)
            proc.wait()
        text = ""
        with contextlib.suppress(OSError):
            text = log.read_text(errors="replace")
            log.unlink()  # read only here: the master's later words go to the unlinked file
        return code, text

    def _cheap_host_key(self, node: Node) -> bool:
        """Whether known_hosts holds the node's ECDSA P-256 key, for ssh to check it first."""
        if openssh.ssh_version() < (8, 2):  # `^` in HostKeyAlgorithms
            return False
        host, port, user = _target(node)
        config = self._config_file()
        with self._known_lock:  # the same files for every node: ask ssh once a run
            if self._known is None:
                self._known = known_hosts.load(config, host, port, user)
        return self._known.prefers(host, port)

    def _take_connect_slot(self) -> None:
        """Wait for one of CONNECT_SLOTS: hundreds of handshakes at once on a small client would
        each take longer than --connect-timeout, which starts once the slot is taken."""
        while not self._connect_slots.acquire(timeout=0.2):
            if self.closed:
                raise SshError(INTERRUPTED)

    def _connect_direct(self, node: Node, script: str) -> Session:
        """The probe over an `ssh` process of its own, which no other run shares."""
        try:
            proc = spawn(self._argv(node, script))  # a Ctrl-C reaches us, not ssh
        except OSError as exc:
            raise SshError(_NO_SSH.format(exc.strerror or exc)) from None
        return self._begin(node, Session(proc, self._cancel_r))

    def _begin(self, node: Node, session: Session) -> Session:
        """Register a node's new session (close() may stop it from here on) and start its probe."""
        with self._registry_lock:
            if self.closed:  # close() ran while this one was starting
                session.kill()
                session.release()
                raise SshError(INTERRUPTED)
            self._sessions[node.name] = session
        try:
            self._handshake(node, session)
        except BaseException:
            self._forget(node.name, session)
            session.kill()
            session.release()
            raise
        return session

    def _handshake(self, node: Node, session: Session) -> None:
        first = _expect(session, session.started + self.connect_timeout, lambda x: x.isdigit())
        if first is None:
            raise self._failure("connect", node, session)
        session.pid = int(first)
        state = _expect(session, time.monotonic() + self.connect_timeout,
                        lambda x: x in (b"present", b"absent"))
        if state == b"absent":
            session.send(self._payload()[1])
            if _expect(session, time.monotonic() + COPY_TIMEOUT_S, lambda x: x == b"copied") is None:
                raise self._failure("copy", node, session)
        elif state is None:
            raise self._failure("start", node, session)

    def _failure(self, phase: str, node: Node, session: Session) -> Exception:
        """Why `phase` (a key of _REASONS) failed on `node`, read from how its ssh ended."""
        if self.closed:
            return SshError(INTERRUPTED)
        elapsed = time.monotonic() - session.started
        code = session.exit_code(EXIT_STATUS_WAIT_S if session.ended else 0)
        return explain(phase, _Ended(code, session.stderr_text(), elapsed, self.connect_timeout,
                                     self._python(node), lambda: self._where(node)))

    def _where(self, node: Node) -> tuple[str, int, str]:
        return openssh.resolve(self._config_file(), *_target(node))

    def _python(self, node: Node) -> str:
        return str(node.vars.get("python") or self.python or "python3")

    # What the session runs on the node: the probe bundle, served. The gateway transport
    # (gateway.py) runs its relay instead through the same script and handshake.
    PAYLOAD_ARGS = "--serve --stop-at-eof"

    @staticmethod
    def _payload() -> tuple[str, bytes]:
        """The zipapp the node runs: its name under REMOTE_DIR and its bytes."""
        return bundle_name(), bundle_bytes()

    @classmethod
    def _script(cls, node: Node, python: str) -> str:
        """The remote command: Python check, PID and payload check (and copy), then the payload."""
        exports = "".join(f"export {k}={shlex.quote(str(v))}; "
                          for k, v in (node.vars.get("env") or {}).items() if _ENV_NAME.match(k))
        name, payload = cls._payload()
        py, path = shlex.quote(python), f"{REMOTE_DIR}/{name}"
        # The size is checked: input that ends early (a Ctrl-C, a dropped link) leaves no
        # truncated bundle under the name of a complete one.
        size = len(payload)
        copy = (f't="$f.$$"; mkdir -p "{REMOTE_DIR}" && head -c {size} > "$t" '
                f'&& [ "$(wc -c < "$t")" -eq {size} ] && mv "$t" "$f" '
                f'|| {{ rm -f "$t"; exit {_COPY_FAILED_EXIT}; }}; echo copied')
        # The PID and the bundle's state in one write: one packet, and one wake-up here.
        args = f" {cls.PAYLOAD_ARGS}" if cls.PAYLOAD_ARGS else ""
        return (f'{exports}command -v {py} >/dev/null 2>&1 || {{ echo "$$"; exit {_NO_PYTHON_EXIT}; }}; '
                f'f="{path}"; if [ -f "$f" ]; then printf "%s\\npresent\\n" "$$"; '
                f'else printf "%s\\nabsent\\n" "$$"; {copy}; fi; '
                f'exec {py} "$f"{args}')

    # -- checks --

    def _ask(self, node: Node, session: Session, request: dict[str, Any], timeout: float,
             start: float) -> ProbeAnswer:
        payload = json.dumps({**request, "timeout": timeout}).encode() + b"\n"
        if self.closed:
            raise SshError(INTERRUPTED)
        line = session.ask(payload, time.monotonic() + timeout + KILL_GRACE_S)
        elapsed = time.monotonic() - start
        if line is not None:
            return parse_answer(line, b"", 0, elapsed)
        if self.closed:  # close() stops this probe; the answer is no longer wanted
            raise SshError(INTERRUPTED)
        return self._no_answer(node, session, timeout, elapsed)

    def _no_answer(self, node: Node, session: Session, timeout: float, elapsed: float) -> ProbeAnswer:
        """The check hung (stop the probe), or the probe or the connection died."""
        self._forget(node.name, session)
        if not session.ended:  # still running past its timeout: end its input, it stops
            session.end_input()
            if session.exit_code(EXIT_STATUS_WAIT_S) is None:
                session.kill()
            session.release()
            return ProbeAnswer("ok", {"timed_out": True, "reason": f"no answer within {timeout:g}s;"
                                      " the probe was killed on the node"}, duration_s=elapsed)
        failure = self._failure("check", node, session)
        session.release()
        if isinstance(failure, ProbeFailure):  # the probe itself exited: an answer, not unreachable
            return ProbeAnswer("error", error=str(failure), duration_s=elapsed)
        raise failure


def _expect(session: Session, deadline: float, wanted: Any) -> bytes | None:
    """The first line `wanted` accepts, stripped; lines before it (a chatty .bashrc) are skipped.
    None at the deadline, on cancel or when the output ends."""
    while (line := session.read_line(deadline)) is not None:
        if wanted(line.strip()):
            return line.strip()
    return None


def _target(node: Node) -> tuple[str, int | None, str | None]:
    """The host, port and user the inventory gives a node (None: as ssh's config says)."""
    port = int(node.vars["port"]) if node.vars.get("port") else None
    user = str(node.vars["user"]) if node.vars.get("user") else None
    return str(node.vars.get("host") or node.name), port, user


def _wait_exit(proc: subprocess.Popen[bytes], deadline: float, cancel_fd: int) -> int | None:
    """proc's exit status; None at the deadline or when cancel_fd becomes readable."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd: short waits in turn
        pidfd = None
    try:
        while (left := deadline - time.monotonic()) > 0:
            if pidfd is not None:
                ready, _, _ = select.select([pidfd, cancel_fd], [], [], left)
                if cancel_fd in ready:
                    return proc.poll()
            elif select.select([cancel_fd], [], [], min(left, 0.05))[0]:
                return proc.poll()
            if (code := proc.poll()) is not None:
                return code
        return proc.poll()
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _config_stamp() -> str:
    """When and how big the user's and the system's ssh configs are: one changed, a new master."""
    stamp = []
    for path in (Path(os.environ.get("HOME") or "/") / ".ssh" / "config", openssh.SYSTEM_CONFIG):
        try:
            info = path.stat()
            stamp.append(f"{info.st_mtime_ns}:{info.st_size}")
        except OSError:
            stamp.append("-")
    return ",".join(stamp)


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[-1].strip()[:300]


def raise_fd_limit() -> None:
    """Three pipes per node: a run over hundreds of nodes needs more than a soft limit of 1024
    (so do Ansible and parallel-ssh in bench/fanout, a few descriptors per host)."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY
                                                        else max(soft, 65536), hard))


def _no_python(python: str) -> str:
    if "/" in python:  # a path given with --python or `python:`
        return (f"{python} not found on the node: check the path given with --python or the "
                "node's `python:` in the inventory")
    return (f"{python} not found on the node's PATH: point --python at a Python 3 on the node "
            "(e.g. --python /opt/conda/bin/python3), or set `python:` for this node in the inventory")


def _copy_failure(stderr: str, code: int | None) -> str:
    """Why the bundle could not be written on the node, and what to do about it."""
    where = f"cannot copy the probe to {REMOTE_DIR.replace('$HOME', '~')} on the node"
    if code is None:
        return f"{where}: not done within {COPY_TIMEOUT_S:g}s (the connection is very slow)"
    last = _last_line(stderr) or f"exit {code}"
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


# -- why a phase failed, from how its ssh ended --


def explain(phase: str, ended: _Ended) -> Exception:
    """The error for a `phase` (a key of _REASONS; an unknown one reads as `check`) whose ssh ended
    as `ended`: SshError (unreachable) or ProbeFailure, with the reason in a person's words."""
    reasons = _REASONS.get(phase, _REASONS["check"])
    kind, reason = reasons.get(ended.code, reasons[_OTHER])
    return kind(reason(ended))


@dataclass
class _Ended:
    """How the ssh of a failed phase ended, and what the reasons name."""

    code: int | None  # ssh's exit status: the remote command's, or 255; None: still running
    stderr: str
    elapsed: float  # since ssh started
    limit: float  # --connect-timeout
    python: str
    resolve: Callable[[], tuple[str, int, str]]  # `ssh -G` for the node: run only when a reason asks

    @cached_property
    def where(self) -> tuple[str, int, str]:
        """(HostName, Port, User) of the node as ssh sees them."""
        return self.resolve()

    @property
    def last_line(self) -> str:
        return _last_line(self.stderr)


_OTHER = "any other exit status"
_Reason = tuple[type[Exception], Callable[[_Ended], str]]
_LOST_MID_CHECK = ("connection lost while the check ran (the node went down, its sshd died, or the "
                   "network dropped)")

# Per phase, what ssh's exit status means (None: still running when the phase gave up).
# SshError is `unreachable`; ProbeFailure is `error`: the node answers but the probe cannot run.
_REASONS: dict[str, dict[int | str | None, _Reason]] = {
    "connect": {  # no PID line: ssh did not connect, or the handshake is slower than the limit
        None: (SshError, lambda e: openssh.too_slow(e.where[0], e.where[1], e.limit)),
        _SSH_FAILED_EXIT: (SshError, lambda e: openssh.describe_failure(e.stderr, e.where, e.limit,
                                                                          e.elapsed)),
        _OTHER: (SshError, lambda e: f"cannot start the probe on {e.where[0]}: the login shell "
                                     f"exited {e.code}: {e.last_line}"),
    },
    "start": {  # no `present` or `absent` line: the shell did not get to the bundle
        _NO_PYTHON_EXIT: (ProbeFailure, lambda e: _no_python(e.python)),
        None: (SshError, lambda e: f"no answer from the shell on {e.where[0]} within {e.limit:g}s "
                                   "(--connect-timeout)"),
        _SSH_FAILED_EXIT: (SshError, lambda e: "connection lost"),
        _OTHER: (SshError, lambda e: f"cannot start the probe: the login shell exited {e.code}: "
                                     f"{e.last_line}"),
    },
    "copy": {  # no `copied` line: the bundle could not be written
        _SSH_FAILED_EXIT: (SshError, lambda e: "connection lost while the probe was copied"),
        _OTHER: (SshError, lambda e: _copy_failure(e.stderr, e.code)),
    },
    "check": {  # the output ended during a check
        None: (SshError, lambda e: _LOST_MID_CHECK),
        _SSH_FAILED_EXIT: (SshError, lambda e: _LOST_MID_CHECK),
        _OTHER: (ProbeFailure, lambda e: f"probe exited {e.code}: {e.last_line}"),
    },
}
