"""A fake multi-host cluster on this machine: one real OpenSSH server per "host".

Standard library only (no pytest needed to import it). Needs root, `unshare`/`nsenter`
(util-linux), OpenSSH (`/usr/sbin/sshd`, `ssh`, `ssh-keygen`) and `mount`/`hostname`.

Host i (0-based) is called ``node{i+1:02d}`` and is an ``sshd -D -e -f CFG`` listening on
``127.0.0.{i+2}:PORT`` (past 127.0.0.254 the addresses go on at 127.0.1.1, 127.0.2.1...: all
of 127/8 is loopback, so a cluster may have hundreds of hosts), started by
``unshare --pid --fork --mount-proc --mount --uts`` in its own session. So each host has

* its own PID namespace: over SSH, ``ps -e`` on node03 shows node03's sshd (pid 1) and the
  sessions and jobs started on node03, nothing else, and killing the host (its namespace's
  pid 1) kills every process on it, as a machine dying would;
* its own mount namespace (a private copy of this machine's mounts, with its own /proc and
  an /etc/passwd in which root's home is ``BASE/nodeNN/root``, so this machine's ~/.bashrc,
  which may put pyenv shims on PATH, is not sourced by its sessions);
* its own UTS namespace: ``hostname`` prints ``nodeNN``;
* its own host key, and a PATH set by sshd (``SetEnv``) on which ``python3`` is this
  machine's interpreter, or, for hosts in ``python_missing``, ``BASE/bin-without-python``:
  links to every command of the system PATH (ps, cat, bash...) except the Python ones.

The network namespace is shared: every host sees the same sockets, files and GPUs, and
reaches the others (and this machine) on 127.0.0.x.

The client side lives in ``BASE/home``: ``.ssh/id_ed25519`` (authorised on every host),
``.ssh/config`` (a ``Host nodeNN`` block per host and a ``Host 127.0.*`` block) and
``.ssh/known_hosts`` (each host's real key, or a different key for hosts in
``wrong_host_key``, so that clients refuse them). OpenSSH's ``ssh`` needs
``-F BASE/home/.ssh/config`` (it takes ~ from the passwd entry, not from $HOME); runbook's
SSH transport, which includes $HOME/.ssh/config in the config it gives ssh, finds all of it
when run with ``HOME=BASE/home`` (``Cluster.env()``).

From a shell (demos, benchmarks)::

    python3 -m scenarios.clusters.ssh up 8 --dir /tmp/c8 [--port auto] [--python-missing node07] \\
        [--wrong-host-key node08]   # prints one line of JSON, stays up until Ctrl-C / SIGTERM
    ssh -F /tmp/c8/home/.ssh/config node03 'hostname; ps -e'
    python3 -m scenarios.clusters.ssh down --dir /tmp/c8      # if the `up` process was SIGKILLed

From Python::

    from scenarios.clusters.ssh import Cluster
    with Cluster.start(4, tmp_path, port=None) as cl:     # port=None: pick a free port
        cl.ssh("node02", "ps -e -o pid=,args=").stdout
        info = cl.start_scenario("node02", "loader_accumulating", str(tmp_path / "job"), speed=4)
        cl.kill_sshd("node02")                            # node02 dies with all its processes
        cl.fill_disk("node03")                            # node03's home is full (ENOSPC)
        cl.add_alias("slow03", "node03", "127.0.0.1", 40022)  # node03 behind a proxy there

Each host's sshd is a namespaced `Daemon` (daemon.py) and the cluster a `DaemonGroup`
(group.py): starting, waiting, the state file, `stop()` and `down` are theirs.

From pytest: ``tests/cluster_fixture.py`` has the fixtures ``make_cluster`` (a factory,
``make_cluster(n, **kwargs)``, cleaned up at teardown), ``cluster`` (3 hosts) and
``cluster8`` (8 hosts, module scope, node07 without python3).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenarios.clusters import group
from scenarios.clusters.cli import ClusterCommand
from scenarios.clusters.daemon import KILL_WAIT_S, Daemon, DaemonError, PortTaken, stop_all, wait_ready
from scenarios.clusters.group import DaemonGroup
from scenarios.clusters.net import (
    MAX_HOSTS,
    free_port,
    host_address,
    host_name,
    listening_inodes,
    listens,
    port_free,
)
from scenarios.clusters.procs import namespace_pids, tail

ROOT = Path(__file__).resolve().parents[2]
SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")
STATE_FILE = "cluster.json"
DEFAULT_PORT = 2222
TCP_WAIT_S = 10.0  # per host, all hosts waited on together
NO_PYTHON_BIN = "bin-without-python"  # BASE/bin-without-python: PATH of python_missing hosts
PYTHON_NAME = re.compile(r"^(python|pypy|pydoc|idle)[0-9.]*(-config|m)?$")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_HOST_SH = 'mount --bind "$1" /etc/passwd && hostname "$2" && exec "$3" -D -e -f "$4"'


class ClusterError(DaemonError):
    """The fake cluster could not be started, or a host could not do what was asked."""


@dataclass
class Host:
    """One fake machine: an sshd in its own PID, mount and UTS namespaces."""

    name: str  # node01, node02, ...
    address: str  # 127.0.0.2, ...
    port: int
    base: Path  # BASE/node01: host key, sshd_config, sshd.log, passwd, root/ (root's home)
    index: int = 0  # 0-based
    python_missing: bool = False
    wrong_host_key: bool = False
    daemon: Daemon = field(init=False, repr=False, compare=False)  # its sshd, in its namespaces

    def __post_init__(self) -> None:
        self.daemon = Daemon(f"sshd {self.name}", out=self.log)

    @property
    def unshare_pid(self) -> int:
        """The `unshare` process; also the process group / session id."""
        return self.daemon.pid

    @property
    def ns_init_pid(self) -> int:
        """The host's pid 1 (its sshd), as seen from this machine."""
        return self.daemon.ns_init_pid

    @property
    def log(self) -> Path:
        return self.base / "sshd.log"

    @property
    def sshd_config(self) -> Path:
        return self.base / "sshd_config"

    @property
    def home(self) -> Path:
        """root's home directory inside this host."""
        return self.base / "root"

    @property
    def session_path(self) -> str:
        return (self.base / "PATH").read_text().strip()

    def is_alive(self) -> bool:
        return self.ns_init_pid > 0 and self.daemon.is_alive()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "port": self.port,
                "base": str(self.base), "unshare_pid": self.unshare_pid,
                "ns_init_pid": self.ns_init_pid, "python_missing": self.python_missing,
                "wrong_host_key": self.wrong_host_key}


# ----------------------------------------------------------------------------- helpers


def find_python_dir() -> str:
    """Directory of a real python3 (>= 3.10) of this machine, for the hosts' PATH.

    `shutil.which("python3")` may be a pyenv shim (a bash script that needs pyenv's own
    environment); ask it for its real interpreter and use that one's directory.
    """
    candidates = [c for c in (shutil.which("python3"), sys.executable) if c]
    for cand in candidates:
        try:
            out = subprocess.run(
                [cand, "-c", "import os, sys; print(os.path.realpath(sys.executable)); "
                             "print(int(sys.version_info >= (3, 10)))"],
                capture_output=True, text=True, timeout=20, check=True).stdout.split("\n")
        except (OSError, subprocess.SubprocessError):
            continue
        if len(out) >= 2 and out[1] == "1":
            real = Path(out[0])
            if (real.parent / "python3").exists():
                return str(real.parent)
            if Path(cand).name == "python3" and ".pyenv/shims" not in cand:
                return str(Path(cand).parent)
    raise ClusterError("no python3 >= 3.10 found on this machine")


def _keygen(path: Path, comment: str, kind: str = "ed25519") -> str:
    """Generate a key pair of `kind` at `path` (replacing one there); return the public line."""
    for p in (path, path.with_name(path.name + ".pub")):
        p.unlink(missing_ok=True)
    size = ["-b", "256"] if kind == "ecdsa" else []
    subprocess.run(["ssh-keygen", "-q", "-t", kind, *size, "-N", "", "-C", comment, "-f", str(path)],
                   check=True, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    path.chmod(0o600)
    return path.with_name(path.name + ".pub").read_text().strip()


def _tools_without_python(bin_dir: Path) -> None:
    """A directory of links to every command of the system PATH except the Python interpreters.

    The PATH of python_missing hosts: `python3` is not found there, `ps`, `cat`, `hostname`,
    `bash`... are (as on a real node without Python), whereas a bare PATH would lack them too.
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    for old in bin_dir.iterdir():
        old.unlink()
    for d in SYSTEM_PATH.split(":"):
        with contextlib.suppress(OSError):
            for entry in os.scandir(d):
                link = bin_dir / entry.name
                if PYTHON_NAME.match(entry.name) or os.path.lexists(link):
                    continue
                if entry.is_file() and os.access(entry.path, os.X_OK):
                    link.symlink_to(entry.path)


def _resolve_hosts(spec: Collection[int | str], n: int, what: str) -> set[int]:
    out: set[int] = set()
    for item in spec:
        if isinstance(item, str):
            if not (item.startswith("node") and item[4:].isdigit()):
                raise ValueError(f"{what}: not a host name: {item!r}")
            idx = int(item[4:]) - 1
        else:
            idx = int(item)
        if not 0 <= idx < n:
            raise ValueError(f"{what}: host {item!r} is not one of the {n} hosts")
        out.add(idx)
    return out


def requirements_missing() -> list[str]:
    """Why a cluster cannot be started on this machine (empty list: it can)."""
    why = []
    if not os.path.exists(SSHD):
        why.append(f"{SSHD} is absent (install openssh-server)")
    for tool in ("ssh", "ssh-keygen", "unshare", "nsenter", "mount", "hostname"):
        if shutil.which(tool) is None:
            why.append(f"`{tool}` is not on PATH")
    if os.geteuid() != 0:
        why.append("not running as root (sshd and `unshare --pid --mount` need root)")
    return why


# ----------------------------------------------------------------------------- cluster


class Cluster(DaemonGroup):
    """N fake hosts on this machine; see the module docstring. Use `Cluster.start(...)`."""

    state_file = STATE_FILE
    error = ClusterError

    def __init__(self, base: Path, hosts: list[Host], *, port: int, auto_port: bool = False,
                 pydir: str = "", verify: str = "one") -> None:
        super().__init__(base)
        self.base: Path = base
        self.hosts = hosts
        self.port = port
        self.auto_port = auto_port  # the port was picked here: taken, it is picked again
        self._pydir = pydir
        self._verify_mode = verify
        self.home = base / "home"
        self.ssh_dir = self.home / ".ssh"
        self.ssh_config = self.ssh_dir / "config"
        self.known_hosts = self.ssh_dir / "known_hosts"
        self.identity = self.ssh_dir / "id_ed25519"
        self.authorized_keys = base / "authorized_keys"
        self._by_name = {h.name: h for h in hosts}
        self._by_name.update({h.address: h for h in hosts})

    def daemons(self) -> list[Daemon]:
        return [h.daemon for h in self.hosts]

    # -- starting -------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        n: int,
        base: Path | str,
        *,
        python_missing: Collection[int | str] = (),
        wrong_host_key: Collection[int | str] = (),
        first_octet_offset: int = 2,
        port: int | None = DEFAULT_PORT,
        python_dir: str | None = None,
        verify: str = "one",
        attempts: int = 3,
    ) -> Cluster:
        """Start `n` hosts under directory `base` (created; files in it are replaced).

        python_missing / wrong_host_key: 0-based host indices or host names ("node07").
        first_octet_offset: host i listens on 127.0.0.{i + offset} (`host_address(i + offset)`:
        127.0.1.1 after 127.0.0.254, and so on).
        port: the port every host listens on; None picks a free one with `free_port()` and,
        should another process take it first, retries with another (`attempts` times).
        verify: after every sshd accepts TCP connections, "one" runs `ssh HOST true` against
        the first host not in wrong_host_key and checks it succeeds; "all" checks every host
        (in parallel; wrong_host_key hosts must refuse; costs ~80 ms of CPU per host); "none".
        """
        if verify not in ("one", "all", "none"):
            raise ValueError(f"verify must be one, all or none, not {verify!r}")
        if n < 1:
            raise ValueError("n must be >= 1")
        if first_octet_offset < 1 or n + first_octet_offset - 1 > MAX_HOSTS:
            raise ValueError(f"addresses {first_octet_offset}..{n + first_octet_offset - 1} are not valid "
                             f"(1..{MAX_HOSTS})")
        if missing := requirements_missing():
            raise ClusterError("cannot start a fake cluster: " + "; ".join(missing))
        base = Path(base).resolve()
        missing_py = _resolve_hosts(python_missing, n, "python_missing")
        wrong_key = _resolve_hosts(wrong_host_key, n, "wrong_host_key")
        pydir = python_dir or find_python_dir()
        addresses = [host_address(i + first_octet_offset) for i in range(n)]

        def attempt() -> Cluster:
            use_port = free_port(addresses) if port is None else port
            hosts = [Host(name=host_name(i), address=addresses[i], port=use_port,
                          base=base / host_name(i), index=i, python_missing=i in missing_py,
                          wrong_host_key=i in wrong_key) for i in range(n)]
            return cls(base, hosts, port=use_port, auto_port=port is None, pydir=pydir,
                       verify=verify)

        return cls._start(attempt, attempts if port is None else 1)

    def _boot(self) -> None:
        if busy := port_free([h.address for h in self.hosts], self.port):
            if self.auto_port:
                raise PortTaken(busy)
            raise ClusterError(f"port {self.port} is taken ({busy}): another cluster? "
                               "Pass another port, or port=None for a free one")
        self.base.mkdir(parents=True, exist_ok=True)
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.ssh_dir.mkdir(parents=True, exist_ok=True)
        self.home.chmod(0o755)
        self.ssh_dir.chmod(0o700)
        user_pub = _keygen(self.identity, "runbook-fake-cluster-client")
        self.authorized_keys.write_text(user_pub + "\n")
        if any(h.python_missing for h in self.hosts):
            _tools_without_python(self.base / NO_PYTHON_BIN)
        with ThreadPoolExecutor(max_workers=min(16, len(self.hosts))) as pool:
            host_keys = list(pool.map(lambda h: self._prepare_host(h, self._pydir), self.hosts))
        self._write_client_files(host_keys)
        self.write_state()
        for host in self.hosts:
            self._launch(host)
        self._wait_up()
        self.write_state()
        if self._verify_mode == "all":
            self._verify(self.hosts)
        elif self._verify_mode == "one":
            self._verify([h for h in self.hosts if not h.wrong_host_key][:1])

    def _prepare_host(self, host: Host, pydir: str) -> list[str]:
        """Write the host's files; return its public host keys for known_hosts, as `ssh-keyscan`
        gives them: an ed25519 and an ECDSA P-256 key, as a stock sshd has (or, for a host
        with wrong_host_key, other keys of the same types)."""
        host.base.mkdir(parents=True, exist_ok=True)
        host.home.mkdir(exist_ok=True)
        key = host.base / "ssh_host_ed25519_key"
        ecdsa = host.base / "ssh_host_ecdsa_key"
        pubs = [_keygen(key, f"root@{host.name}"), _keygen(ecdsa, f"root@{host.name}", "ecdsa")]
        if host.wrong_host_key:
            pubs = [_keygen(host.base / "wrong_host_ed25519_key", f"not-{host.name}"),
                    _keygen(host.base / "wrong_host_ecdsa_key", f"not-{host.name}", "ecdsa")]
        path = str(self.base / NO_PYTHON_BIN) if host.python_missing else f"{pydir}:{SYSTEM_PATH}"
        (host.base / "PATH").write_text(path + "\n")
        host.sshd_config.write_text("\n".join([
            f"# fake cluster host {host.name}",
            f"ListenAddress {host.address}:{host.port}",
            f"HostKey {key}",
            f"HostKey {ecdsa}",
            f"PidFile {host.base / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.authorized_keys}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "MaxSessions 100",
            "MaxStartups 200:30:400",
            "LogLevel ERROR",
            "Subsystem sftp internal-sftp",
            "AcceptEnv none",
            "PrintMotd no",
            "UseDNS no",
            f"SetEnv PATH={path}",
            "",
        ]))
        host.sshd_config.chmod(0o600)
        # root's home inside the host: BASE/nodeNN/root (bind-mounted /etc/passwd)
        lines = []
        for line in Path("/etc/passwd").read_text().splitlines():
            parts = line.split(":")
            if len(parts) == 7 and parts[2] == "0":
                parts[5] = str(host.home)
            lines.append(":".join(parts))
        (host.base / "passwd").write_text("\n".join(lines) + "\n")
        (host.base / "passwd").chmod(0o644)
        return [" ".join(pub.split()[:2]) for pub in pubs]

    def _write_client_files(self, host_keys: list[list[str]]) -> None:
        blocks = []
        for host in self.hosts:
            blocks.append(
                f"Host {host.name}\n"
                f"    HostName {host.address}\n"
                f"    Port {host.port}\n"
                "    User root\n"
                f"    IdentityFile {self.identity}\n"
                "    IdentitiesOnly yes\n"
                f"    UserKnownHostsFile {self.known_hosts}\n"
                "    GlobalKnownHostsFile /dev/null\n"
                "    StrictHostKeyChecking yes\n")
        blocks.append(
            "Host 127.0.*\n"
            f"    Port {self.port}\n"
            "    User root\n"
            f"    IdentityFile {self.identity}\n"
            "    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {self.known_hosts}\n"
            "    GlobalKnownHostsFile /dev/null\n"
            "    StrictHostKeyChecking yes\n")
        self.ssh_config.write_text("# fake cluster (scenarios/clusters/ssh.py)\n\n" + "\n".join(blocks))
        self.ssh_config.chmod(0o600)
        # OpenSSH looks up [HostName]:Port; the alias is there too for clients that use it.
        self.known_hosts.write_text("".join(
            f"[{h.address}]:{h.port},[{h.name}]:{h.port} {key}\n"
            for h, keys in zip(self.hosts, host_keys, strict=True) for key in keys))
        self.known_hosts.chmod(0o600)

    def _launch(self, host: Host) -> None:
        argv = ["unshare", "--pid", "--fork", "--mount-proc", "--mount", "--uts", "--",
                "/bin/sh", "-c", _HOST_SH, "sh", str(host.base / "passwd"), host.name, SSHD,
                str(host.sshd_config)]
        host.daemon.spawn(argv, namespaced=True)

    def _wait_up(self) -> None:
        """Wait (all hosts together, <= TCP_WAIT_S) for every sshd to accept connections.

        A host is up when ITS sshd (not another cluster's) holds the listening socket of its
        address and port, and a TCP connection to it succeeds.
        """
        pending = list(self.hosts)

        def ready() -> bool:
            listening = listening_inodes()
            pending[:] = [h for h in pending
                          if not listens(h.ns_init_pid, h.address, h.port, listening)]
            return not pending

        def explain() -> str:
            return (f"sshd not accepting connections: {', '.join(h.name for h in pending)}: "
                    f"{tail(pending[0].log) if pending else ''}")

        limit = TCP_WAIT_S + 0.05 * len(self.hosts)  # hundreds of sshds start on a few cores
        wait_ready(self.daemons(), ready, limit, explain)

    def _verify(self, hosts: list[Host]) -> None:
        def check(host: Host) -> str | None:
            res = self.ssh(host.name, "true", timeout=20)
            if host.wrong_host_key:
                if res.returncode == 255 and "Host key verification failed" in res.stderr:
                    return None
                return f"{host.name}: expected a host key failure, got rc={res.returncode}: {res.stderr}"
            if res.returncode != 0:
                return f"{host.name}: `ssh {host.name} true` rc={res.returncode}: {res.stderr.strip()}"
            return None

        if not hosts:
            return
        with ThreadPoolExecutor(max_workers=min(32, len(hosts))) as pool:
            errors = [e for e in pool.map(check, hosts) if e]
        if errors:
            raise ClusterError("fake cluster started but ssh does not work: " + "; ".join(errors))

    # -- information ----------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"home": str(self.home), "ssh_config": str(self.ssh_config),
                "known_hosts": str(self.known_hosts), "identity": str(self.identity),
                "port": self.port, "names": self.names(),
                "addresses": [h.address for h in self.hosts],
                "hosts": [h.to_json() for h in self.hosts], **self.lifecycle_json()}

    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def host(self, name: str) -> Host:
        """A host by name (node01) or address (127.0.0.2)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no host {name!r} in this cluster ({', '.join(self.names())})") from None

    def env(self) -> dict[str, str]:
        """os.environ with HOME=BASE/home, so runbook's SSH transport, Fabric and Paramiko read
        its ~/.ssh.

        (OpenSSH's ssh ignores $HOME for ~/.ssh: give it -F ssh_config, as `ssh()` does.)
        """
        return {**os.environ, "HOME": str(self.home)}

    def __repr__(self) -> str:
        return f"<Cluster {len(self.hosts)} hosts port={self.port} base={self.base}>"

    # -- doing things on hosts ------------------------------------------------------

    def ssh_argv(self, host_name: str, command: str, *options: str) -> list[str]:
        return ["ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                *options, host_name, command]

    def ssh(self, host_name: str, command: str, timeout: float = 30, *, check: bool = False,
            input: str | None = None, options: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
        """Run `command` on a host with the real ssh client (host name or address)."""
        return subprocess.run(self.ssh_argv(host_name, command, *options), capture_output=True,
                              text=True, timeout=timeout, check=check, env=self.env(),
                              input=input, stdin=None if input is not None else subprocess.DEVNULL)

    def run_in(self, host_name: str, argv: Sequence[str], timeout: float = 30, *, check: bool = False,
               env: dict[str, str] | None = None, input: str | None = None,
               ) -> subprocess.CompletedProcess[str]:
        """Run argv inside a host's PID, mount and UTS namespaces with nsenter (no ssh).

        By default the command gets the host's session environment (its PATH, HOME), so a
        bare `python3` is not found on python_missing hosts, as over ssh.
        """
        host = self.host(host_name)
        if env is None:
            env = {"PATH": host.session_path, "HOME": str(host.home), "USER": "root",
                   "LOGNAME": "root", "SHELL": "/bin/bash", "LANG": os.environ.get("LANG", "C.UTF-8")}
        nsenter = shutil.which("nsenter") or "/usr/bin/nsenter"
        return subprocess.run([nsenter, "-t", str(host.ns_init_pid), "-p", "-m", "-u", "--", *argv],
                              capture_output=True, text=True, timeout=timeout, check=check, env=env,
                              input=input, stdin=None if input is not None else subprocess.DEVNULL)

    def process_table(self, host_name: str) -> list[tuple[int, int, str]]:
        """(pid here, pid inside the host, command line) of every live process on a host.

        Read from /proc (the processes whose PID namespace is that of the host's pid 1), no
        subprocess; sorted by the pid inside the host (its sshd, pid 1, first).
        """
        host = self.host(host_name)
        if not host.is_alive():
            return []
        rows = []
        for pid in namespace_pids(host.ns_init_pid):
            try:
                with open(f"/proc/{pid}/status") as fh:
                    status = fh.read()
                with open(f"/proc/{pid}/cmdline", "rb") as fb:
                    raw = fb.read()
            except OSError:
                continue  # exited meanwhile
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if fields.get("State", "").strip().startswith(("Z", "X")):
                continue
            nspid = fields.get("NSpid", "").split()
            inner = int(nspid[-1]) if nspid else -1
            args = raw.replace(b"\0", b" ").decode(errors="replace").strip()
            rows.append((pid, inner, args or f"[{fields.get('Name', '?').strip()}]"))
        return sorted(rows, key=lambda r: r[1])

    def processes(self, host_name: str) -> list[str]:
        """Command lines of every (non-zombie) process in a host's PID namespace, by pid."""
        return [args for _, _, args in self.process_table(host_name)]

    def start_scenario(self, host_name: str, scenario: str, workdir: str | Path, *,
                       speed: float | None = None, env: dict[str, str] | None = None,
                       timeout: float = 60) -> dict[str, Any]:
        """Start a scenario job on a host (over ssh): `python3 -m scenarios start ...`.

        Returns the launcher's JSON (pid, log, path_prepend, env...). Pids in it are pids
        inside that host's PID namespace.
        """
        cmd = ["python3", "-m", "scenarios", "start", scenario, "--dir", str(workdir)]
        if speed is not None:
            cmd += ["--speed", f"{speed:g}"]
        for key, value in (env or {}).items():
            cmd += ["--env", f"{key}={value}"]
        res = self.ssh(host_name, self._in_repo(cmd), timeout=timeout)
        if res.returncode != 0:
            raise ClusterError(f"{host_name}: starting scenario {scenario} failed "
                               f"(rc={res.returncode}): {res.stderr.strip() or res.stdout.strip()}")
        try:
            data: dict[str, Any] = json.loads(res.stdout)
        except ValueError as exc:
            raise ClusterError(f"{host_name}: scenario start printed no JSON: {res.stdout!r}") from exc
        return data

    def stop_scenario(self, host_name: str, workdir: str | Path, timeout: float = 30,
                      ) -> subprocess.CompletedProcess[str]:
        """`python3 -m scenarios stop --dir WORKDIR` on a host; returns the ssh result."""
        return self.ssh(host_name, self._in_repo(["python3", "-m", "scenarios", "stop", "--dir",
                                                  str(workdir)]), timeout=timeout)

    def fill_disk(self, host_name: str, path: str | Path | None = None, size: str = "256k") -> Path:
        """Make a host's disk full at `path` (default: root's home there) and return the path.

        A tmpfs of `size` is mounted over `path` inside the host's own mount namespace (this
        machine and the other hosts still see the directory as it was) and filled with zeros,
        so any write there fails with ENOSPC, as on a node whose disk is full. It goes away
        with the host.
        """
        host = self.host(host_name)
        target = Path(path) if path is not None else host.home
        script = (f"mount -t tmpfs -o size={shlex.quote(size)},mode=0755 runbook-full-disk "
                  f"{shlex.quote(str(target))} && "
                  f"dd if=/dev/zero of={shlex.quote(str(target / 'filler'))} bs=4096 2>/dev/null; "
                  f"touch {shlex.quote(str(target / 'probe'))} 2>/dev/null; "
                  f"echo x > {shlex.quote(str(target / 'probe'))} 2>/dev/null && exit 3; exit 0")
        res = self.run_in(host_name, ["/bin/sh", "-c", script], env={"PATH": SYSTEM_PATH})
        if res.returncode != 0:
            raise ClusterError(f"{host_name}: could not fill {target} (rc={res.returncode}): "
                               f"{res.stderr.strip() or 'a write still succeeded'}")
        return target

    def add_alias(self, alias: str, host_name: str, address: str, port: int) -> None:
        """Let clients reach a host as `alias` at address:port (a proxy in front of its sshd):
        a `Host alias` block in the ssh config and the host's real key for [address]:port in
        known_hosts."""
        host = self.host(host_name)
        key = " ".join((host.base / "ssh_host_ed25519_key.pub").read_text().split()[:2])
        with self.ssh_config.open("a") as config:
            config.write(f"\nHost {alias}\n    HostName {address}\n    Port {port}\n    User root\n"
                         f"    IdentityFile {self.identity}\n    IdentitiesOnly yes\n"
                         f"    UserKnownHostsFile {self.known_hosts}\n"
                         "    GlobalKnownHostsFile /dev/null\n    StrictHostKeyChecking yes\n")
        with self.known_hosts.open("a") as known:
            known.write(f"[{address}]:{port},[{alias}]:{port} {key}\n")

    @staticmethod
    def _in_repo(cmd: list[str]) -> str:
        root = shlex.quote(str(ROOT))
        return f"cd {root} && PYTHONPATH={root} " + shlex.join(cmd)

    # -- killing --------------------------------------------------------------------

    def kill_sshd(self, host_name: str, wait: float = KILL_WAIT_S) -> bool:
        """SIGKILL a host: its pid 1 (so the kernel kills every process in its namespace),
        then its `unshare` process group. Returns True once all of it is gone (<= wait s).
        """
        return stop_all([self.host(host_name).daemon], wait)


def down(base: Path | str, wait: float = KILL_WAIT_S) -> int:
    """Kill the hosts recorded in BASE/cluster.json (for when `up` itself was killed)."""
    return group.down(base, STATE_FILE, wait)


# ----------------------------------------------------------------------------- CLI


def _add_up_arguments(up: argparse.ArgumentParser) -> None:
    up.add_argument("--port", default=str(DEFAULT_PORT), help="port, or `auto` for a free one")
    up.add_argument("--offset", type=int, default=2, help="host i listens on 127.0.0.{i+offset}")
    up.add_argument("--python-missing", action="append", default=[], metavar="HOST",
                    help="host (node07 or 0-based index) without python3 (repeatable)")
    up.add_argument("--wrong-host-key", action="append", default=[], metavar="HOST",
                    help="host whose known_hosts entry is a different key (repeatable)")
    up.add_argument("--verify", choices=("one", "all", "none"), default="one",
                    help="check `ssh HOST true` on the first host (one), every host, or none")


def _start_from(args: argparse.Namespace) -> Cluster:
    def hosts(items: list[str]) -> list[int | str]:
        return [int(x) if x.isdigit() else x for x in items]

    return Cluster.start(args.n, Path(args.dir), port=None if args.port == "auto" else int(args.port),
                         first_octet_offset=args.offset, python_missing=hosts(args.python_missing),
                         wrong_host_key=hosts(args.wrong_host_key), verify=args.verify)


COMMAND = ClusterCommand(
    prog="python3 -m scenarios.clusters.ssh",
    description="A fake multi-host cluster: one sshd per host in its own PID/mount/UTS namespaces, "
                "on 127.0.0.2...",
    members="hosts", dir_help="keys, configs, logs, client HOME", state_file=STATE_FILE,
    start=_start_from, add_arguments=_add_up_arguments,
    describe=lambda cl: f"{len(cl.hosts)} hosts up in {cl.startup_s:.2f}s; try: "
                        f"ssh -F {cl.ssh_config} {cl.hosts[0].name} hostname")
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
