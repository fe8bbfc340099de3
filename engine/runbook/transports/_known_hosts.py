"""Which host key types known_hosts holds for a node: to let `ssh` check the cheapest one.

A new connection's client CPU is mostly OpenSSH's own: with ed25519 host keys, checking the
host's signature runs OpenSSH's portable ed25519 code, while ECDSA over P-256 runs OpenSSL's
assembly (about 1.2 ms less client CPU per connection, measured on loopback with OpenSSH 9.2).
ssh verifies the type it agrees on with the server, preferring the types known_hosts holds for
that host in its default order, where ed25519 comes first. Where known_hosts also holds the
host's ECDSA P-256 key (as `ssh-keyscan` writes them: one line per type; a stock sshd has
both), the transport asks for it first (`HostKeyAlgorithms=^ecdsa-sha2-nistp256`). The key
is as checked as any: only its type changes, to one the user already trusts for that host.

The lookup is what ssh does for the name it is given: plain and hashed (`|1|salt|hash`)
entries, `[host]:port` for another port, `*`/`?` patterns and `!` negations; where the
inventory names no port (ssh's config may give one), a plain `[host]:port` entry of any port
counts. The files are those `ssh -G` names for the first node, read once a run. A file with a
`@cert-authority` or `@revoked` line is left to ssh (certificates and revocations decide
there), and so is a hashed file too large to scan for every node (MAX_HASHED entries of the
preferred type). Where the lookup is wrong (a HostName or HostKeyAlias in the user's config
points ssh at another entry), the connection is refused on its host key and made again
without the preference (ssh.py): a wrong guess costs one handshake, never the connection.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from runbook.transports import _openssh as openssh

PREFERRED = "ecdsa-sha2-nistp256"
MAX_HASHED = 4096  # hashed entries of the preferred type: one HMAC each, per node
_MARKERS = ("@cert-authority", "@revoked")


@dataclass
class KnownHosts:
    """The entries of the preferred key type in some known_hosts files, ready to look up."""

    plain: set[str] = field(default_factory=set)  # exact names, lowercased (`host`, `[host]:2222`)
    on_a_port: set[str] = field(default_factory=set)  # the hosts of the plain `[host]:port` names
    patterns: list[list[str]] = field(default_factory=list)  # an entry's patterns, `!` kept
    hashed: list[tuple[bytes, bytes]] = field(default_factory=list)  # (salt, HMAC-SHA1 of the name)
    marked: bool = False  # a certificate authority or a revocation: leave the choice to ssh

    @classmethod
    def read(cls, paths: list[Path]) -> KnownHosts:
        """The entries of every readable file (one that is missing or unreadable holds none)."""
        known = cls()
        for path in paths:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                for line in path.read_text(encoding="utf-8").splitlines():
                    known._add(line.strip())
        return known

    def _add(self, line: str) -> None:
        if not line or line.startswith("#"):
            return
        if line.startswith(_MARKERS):
            self.marked = True
            return
        fields = line.split()
        if len(fields) < 3 or fields[1] != PREFERRED:
            return
        names = fields[0]
        if names.startswith("|1|"):
            _, _, salt, digest = (names.split("|") + ["", ""])[:4]
            with contextlib.suppress(binascii.Error, ValueError):
                self.hashed.append((base64.b64decode(salt), base64.b64decode(digest)))
            return
        parts = [p.lower() for p in names.split(",") if p]
        if any(ch in p for p in parts for ch in "*?!"):
            self.patterns.append(parts)
            return
        self.plain.update(parts)
        self.on_a_port.update(p[1:].rpartition("]:")[0] for p in parts if p.startswith("[") and "]:" in p)

    def prefers(self, host: str, port: int | None = None) -> bool:
        """Whether the preferred type's key is known for `host` at `port` (None: the port ssh's
        config gives it, unknown here: any port of a plain entry will do), and ssh may be asked
        to check it first."""
        if self.marked or len(self.hashed) > MAX_HASHED:
            return False
        host = host.lower()
        if port is None and host in self.on_a_port:
            return True
        name = host if port in (None, 22) else f"[{host}]:{port}"
        if name in self.plain or any(_matches(patterns, name) for patterns in self.patterns):
            return True
        raw = name.encode()
        return any(hmac.compare_digest(hmac.digest(salt, raw, "sha1"), digest)
                   for salt, digest in self.hashed)


def _matches(patterns: list[str], name: str) -> bool:
    """ssh's match_hostname: a negated pattern that matches rules the entry out."""
    found = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if _glob(pattern[1:] if negated else pattern).fullmatch(name):
            if negated:
                return False
            found = True
    return found


def _glob(pattern: str) -> re.Pattern[str]:
    """ssh's wildcards, `*` and `?` only: `[host]:2222` is literal brackets, not a character class
    as fnmatch would read it."""
    return re.compile(".*".join(".".join(map(re.escape, part.split("?"))) for part in pattern.split("*")))


def load(config: str, host: str, port: int | None, user: str | None) -> KnownHosts:
    """The files ssh reads for `host` under the transport's `config` (`ssh -G`, once a run);
    nothing to prefer (a `marked` set) where the configs choose the host key algorithms or a
    HostKeyAlias themselves: theirs stand."""
    output = openssh.effective(config, host, port, user)
    files = files_from_ssh_g(output)
    chosen = openssh.option(output, "hostkeyalgorithms")
    if files is None or chosen is None or chosen != _default_algorithms():
        return KnownHosts(marked=True)
    return KnownHosts.read(files)


@lru_cache(maxsize=1)
def _default_algorithms() -> str | None:
    """ssh's own HostKeyAlgorithms, as `ssh -G` prints them with no config at all."""
    return openssh.option(openssh.effective("/dev/null", "localhost"), "hostkeyalgorithms")


def files_from_ssh_g(output: str) -> list[Path] | None:
    """The known_hosts files `ssh -G`'s output names (user's, then global), or None when it
    sets a HostKeyAlias or names no file."""
    if openssh.option(output, "hostkeyalias"):
        return None
    user = (openssh.option(output, "userknownhostsfile") or "").split()
    system = (openssh.option(output, "globalknownhostsfile") or "").split()
    named = [Path(os.path.expanduser(p)) for p in user + system if p != "none"]
    return named or None
