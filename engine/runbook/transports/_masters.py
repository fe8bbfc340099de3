"""The OpenSSH control masters behind reused SSH connections: where they live, and their end.

Like Ansible's ControlPersist: the SSH transport starts one master per node (`ssh -N` with
ControlMaster=yes and ControlPersist=<window>), which stays in the background for that many
seconds after its last session ends, so a run within the window (or the next round of
--watch) opens its sessions on it (_mux.py) without an `ssh` process or a key exchange.

Their sockets lie in a directory of runbook's own, mode 0700 and owned by the user:
$XDG_RUNTIME_DIR/runbook-ssh, else /tmp/runbook-ssh-<uid>. A socket's name is a hash of
what picks the connection (host, port, user, the ssh config in force), short enough for the
107 bytes of an AF_UNIX path. While a master starts, NAME.log beside it takes what it prints
(the reason when it cannot connect); it is removed once read.

A socket whose master is gone (killed: nothing listens) or does not send its hello within
CHECK_TIMEOUT_S (stopped, stuck) is stale, and so is a master on which a session does not
open within --connect-timeout (its connection no longer answers): `discard()` kills the
user's `ssh` started as the master of that socket (and nothing else) and removes the socket,
so that a new master takes its place. `runbook ssh-masters --stop` ends them all.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from runbook.transports._mux import MuxConnection, MuxError

DEFAULT_PERSIST_S = 60
CHECK_TIMEOUT_S = 2.0  # a master says hello in microseconds; a stuck one never
NAME_HEX = 24  # 96 bits of the key's hash: the socket's name
SUN_PATH_MAX = 107  # AF_UNIX path bytes on Linux, less the final NUL


class NoControlDir(OSError):
    """No private directory for the sockets: connections are not reused (the reason says why)."""


def control_dir() -> Path:
    """The private directory of the master sockets, made or checked: owned by us, 0700."""
    candidates = []
    if runtime := os.environ.get("XDG_RUNTIME_DIR"):
        candidates.append(Path(runtime) / "runbook-ssh")
    candidates.append(Path(tempfile.gettempdir()) / f"runbook-ssh-{os.getuid()}")
    candidates.append(Path("/tmp") / f"runbook-ssh-{os.getuid()}")
    problems = []
    for folder in dict.fromkeys(candidates):
        # a socket name, and the 17 bytes ssh appends while it creates one
        if len(str(folder)) + 1 + NAME_HEX + 17 > SUN_PATH_MAX:
            problems.append(f"{folder}: too long for a socket path")
            continue
        try:
            return _private(folder)
        except OSError as exc:
            problems.append(f"{folder}: {exc.strerror or exc}")
    raise NoControlDir("no private directory for SSH control sockets (" + "; ".join(problems) + ")")


def _private(folder: Path) -> Path:
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=False)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise OSError(0, "not a directory")
    if info.st_uid != os.getuid():  # someone else made it first: never trust it
        raise OSError(0, f"owned by uid {info.st_uid}, not by us")
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return folder


def socket_path(folder: Path, key: str) -> Path:
    return folder / hashlib.sha256(key.encode()).hexdigest()[:NAME_HEX]


def master_options(path: Path, persist_s: int) -> list[str]:
    """The options that make `ssh -N` a master on `path` that outlives the run by persist_s."""
    return ["-o", "ControlMaster=yes", "-o", f"ControlPath={path}", "-o", f"ControlPersist={persist_s}"]


def connect(path: Path, timeout: float = CHECK_TIMEOUT_S) -> MuxConnection | None:
    """A checked connection to the master on `path`, or None when there is none (no socket);
    a master that is gone or does not answer in time is discarded first."""
    if not path.exists():
        return None
    try:
        # The master's hello comes from its event loop: it proves a working master as well as
        # `ssh -O check` would, without one more round trip.
        return MuxConnection(str(path), time.monotonic() + timeout)
    except MuxError:
        discard(path)
        return None


def discard(path: Path) -> None:
    """Make way for a new master on `path`: kill the old one (a stopped process gets SIGKILL
    too) and remove the socket."""
    for pid in master_pids(path):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def master_pids(path: Path) -> list[int]:
    """Our `ssh` processes started as the master of `path`. Read from /proc: the socket's own
    peer credentials name the process that made it, which exits when the master goes to
    the background."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and is_master_of(int(entry.name), path):
            found.append(int(entry.name))
    return found


def is_master_of(pid: int, path: Path) -> bool:
    """Whether `pid` is our `ssh` started as the master of `path` (never kill anything else)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        owner = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return False
    return (owner == os.getuid() and bool(argv) and os.path.basename(argv[0]) == b"ssh"
            and f"ControlPath={path}".encode() in argv)


@dataclass
class Master:
    path: Path
    pid: int | None  # None: stale (nothing answers)
    host: str  # as the run named it, from the master's command line


def masters(folder: Path) -> list[Master]:
    """Every master socket in `folder`, each checked."""
    found = []
    for path in sorted(folder.iterdir()):
        if not path.is_socket():
            continue
        pid = None
        with contextlib.suppress(MuxError):
            conn = MuxConnection(str(path), time.monotonic() + CHECK_TIMEOUT_S)
            try:
                pid = conn.alive_check(time.monotonic() + CHECK_TIMEOUT_S)
            finally:
                conn.close()
        found.append(Master(path, pid, _host_of(pid, path) if pid else "?"))
    return found


def _host_of(pid: int, path: Path) -> str:
    with contextlib.suppress(OSError):
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        if "--" in argv and is_master_of(pid, path):
            return " ".join(a for a in argv[argv.index("--") + 1:] if a)
    return "?"


def stop(master: Master) -> bool:
    """Ask a master to exit (`ssh -O exit`); kill it if it does not answer. The socket is
    removed. True when a running master was stopped."""
    stopped = False
    if master.pid:
        with contextlib.suppress(MuxError):
            conn = MuxConnection(str(master.path), time.monotonic() + CHECK_TIMEOUT_S)
            try:
                conn.terminate(time.monotonic() + CHECK_TIMEOUT_S)
                stopped = True
            finally:
                conn.close()
    if not stopped:
        discard(master.path)
        stopped = master.pid is not None
    with contextlib.suppress(FileNotFoundError):
        master.path.unlink()
    return stopped


def log_path(path: Path) -> Path:
    return path.with_name(path.name + ".log")
