"""What the SSH transport needs from OpenSSH's `ssh`: the config it reads, its command line,
and a one-line reason, saying what to do, for each way it fails to connect.

`ssh` reads ~/.ssh from the passwd entry, not from $HOME (as paramiko did), so the transport
hands it a small config of its own (`-F`): it includes $HOME/.ssh/config and the system's
/etc/ssh/ssh_config, in the order ssh itself reads them, then adds defaults that apply only
where neither sets the option (ssh keeps the first value it reads): known_hosts under $HOME,
and ECDH over NIST P-256 first among the key exchanges, then curve25519. The post-quantum
hybrids that OpenSSH 9 prefers cost about 60 ms of client CPU per connection (measured: 70
against 9 ms per host on loopback). curve25519 is computed by OpenSSH's own portable C, P-256
by OpenSSL's constant-time assembly: a whole `ssh host true` (OpenSSH 9.2, under valgrind) is
86 million instructions with the first and 48 million with the second, about 4 ms less client
CPU per host. Both give 128-bit security, and OpenSSH ranks P-256 right after curve25519 in
its own defaults. A `KexAlgorithms` line in the user's or the system's config wins.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import re
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

SYSTEM_CONFIG = Path("/etc/ssh/ssh_config")
# P-256 first: the cheapest key exchange for the client (see above); curve25519 where a node lacks it
KEX_FIRST = "ecdh-sha2-nistp256,curve25519-sha256,curve25519-sha256@libssh.org"
RESOLVE_TIMEOUT_S = 5.0


@lru_cache(maxsize=1)
def ssh_version() -> tuple[int, int]:
    """OpenSSH's version, (0, 0) when unknown; `^` in KexAlgorithms needs 8.2 or later."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["ssh", "-V"], capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL).stderr
        found = re.search(r"OpenSSH_(\d+)\.(\d+)", out)
        if found:
            return int(found[1]), int(found[2])
    return 0, 0


def config_text(home: str) -> str:
    """The -F config: the user's and the system's configs, then the transport's defaults."""
    lines = ["# written by runbook's SSH transport: the user's and the system's ssh configs,",
             "# then defaults for what neither sets", ""]
    user_config = Path(home) / ".ssh" / "config"
    if user_config.is_file():
        lines.append(f"Include {_quote(str(user_config))}")
    if SYSTEM_CONFIG.is_file():
        lines.append(f"Include {_quote(str(SYSTEM_CONFIG))}")
    lines.append("Host *")  # ends any Host block an included file left open
    if ssh_version() >= (8, 2):
        lines.append(f"    KexAlgorithms ^{KEX_FIRST}")
    if os.path.realpath(home) != os.path.realpath(_passwd_home()):
        # As paramiko did: known_hosts under $HOME (ssh's own default is the passwd entry's
        # home). Keys are not added: IdentityFile accumulates, and it would defeat the
        # IdentitiesOnly of a node that names its own key.
        ssh_dir = Path(home) / ".ssh"
        lines.append(f"    UserKnownHostsFile {_quote(str(ssh_dir / 'known_hosts'))} "
                     f"{_quote(str(ssh_dir / 'known_hosts2'))}")
    # Not the extra round of host-key proofs (and known_hosts writes) after each login.
    lines.append("    UpdateHostKeys no")
    lines.append("    LogLevel ERROR")  # no "Warning: Permanently added ..." among the reasons
    return "\n".join(lines) + "\n"


def write_config(home: str) -> str:
    """The config's path: written once per content under ~/.cache/runbook/ssh (or /tmp)."""
    text = config_text(home)
    name = f"ssh_config-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path(home) / ".cache") / "runbook" / "ssh"
    for folder in (cache, Path(tempfile.gettempdir()) / f"runbook-ssh-{os.getuid()}"):
        target = folder / name
        with contextlib.suppress(OSError):
            if target.is_file() and target.read_text() == text:
                return str(target)
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".ssh_config.")  # mode 0600: ssh checks
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, target)
            return str(target)
    raise OSError(f"cannot write an ssh config under {cache} or {tempfile.gettempdir()}")


def effective(config: str, host: str, port: int | None = None, user: str | None = None) -> str:
    """`ssh -G`'s output for a node: every option as ssh would use it ("" when it fails)."""
    argv = ["ssh", "-F", config, "-G", *(["-p", str(port)] if port else []),
            *(["-l", user] if user else []), "--", host]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(argv, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL).stdout
    return ""


def option(output: str, key: str) -> str | None:
    """One option's value in `ssh -G`'s output."""
    for line in output.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return value.strip()
    return None


def resolve(config: str, host: str, port: int | None, user: str | None) -> tuple[str, int, str]:
    """(HostName, Port, User) as ssh sees them for a node (`ssh -G`), for the reasons."""
    found = {"hostname": host, "port": str(port or 22), "user": user or _passwd_user()}
    out = effective(config, host, port, user)
    for key in found:
        value = option(out, key)
        if value:
            found[key] = value
    try:
        number = int(found["port"])
    except ValueError:
        number = port or 22
    return found["hostname"], number, found["user"]


def describe_failure(stderr: str, where: tuple[str, int, str], limit: float, elapsed: float) -> str:
    """One line: why `ssh` could not connect (its exit 255 and what it printed), and what to do."""
    host, port, user = where
    text = stderr.replace("\r", "")
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "has changed and you have requested" in text:
        entry = host if port == 22 else f"[{host}]:{port}"
        return (f"host key of {host} changed: it does not match known_hosts (refused: the node was "
                "reinstalled, or someone is in the middle); check the new key with the node's "
                f"owner, then remove the old one: ssh-keygen -R '{entry}'")
    if "host key is known for" in text or "Host key verification failed" in text:
        return (f"unknown host key: {host} is not in known_hosts (refusing; verify it "
                "with ssh-keyscan, or pass --accept-new-host-keys)")
    if "Connection refused" in text:
        return (f"connection refused by {host}:{port}: nothing listens there (is the node up, "
                "its sshd running, the port right?)")
    if "Could not resolve hostname" in text:
        return f"cannot resolve host name {host!r} (check the name, or its HostName in ~/.ssh/config)"
    if "during banner exchange" in text or ("kex_exchange_identification" in text
                                             and elapsed >= 0.9 * limit):
        return too_slow(host, port, limit)
    if "kex_exchange_identification" in text:  # closed at once: not slow, not an sshd there
        return (f"no SSH greeting from {host}:{port}: the other side closed the connection (is it "
                "an sshd, and not refusing new connections: MaxStartups?)")
    if "Connection timed out" in text or "Operation timed out" in text:
        return (f"connection to {host}:{port} timed out after {limit:g}s (--connect-timeout): the "
                "node is down, a firewall drops the packets, or the link is slow")
    if "Permission denied" in text or "Too many authentication failures" in text:
        return (f"key refused: authentication failed as {user}@{host}:{port} (is your key in the "
                "node's authorized_keys? which IdentityFile does ~/.ssh/config name? a key with a "
                "passphrase must be in ssh-agent first: ssh-add)")
    bad_config = next((line for line in text.splitlines() if "Bad " in line or "bad " in line
                       or "line " in line and "config" in line), None)
    if bad_config:
        return f"cannot use the ssh settings of {host}: {bad_config.strip()[:200]}"
    last = (text.strip().splitlines() or ["ssh exited 255 and printed nothing"])[-1].strip()
    return f"cannot connect to {user}@{host}:{port}: {last[:200]}"


def too_slow(host: str, port: int, limit: float) -> str:
    return (f"connection to {host}:{port} too slow: the SSH handshake did not finish within "
            f"{limit:g}s (--connect-timeout); the link or the node's sshd is slow or stuck (raise "
            "--connect-timeout for a slow link)")


def _quote(path: str) -> str:
    return f'"{path}"' if any(c.isspace() for c in path) else path


def _passwd_home() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return os.environ.get("HOME", "/")


def _passwd_user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return "root"
