"""Who may post alerts: the two credentials Alertmanager's `http_config` can send.

    authorization: {type: Bearer, credentials_file: FILE}   ->  Authorization: Bearer TOKEN
    basic_auth: {username: U, password_file: FILE}          ->  Authorization: Basic base64(U:P)

The receiver reads its side from a file or an environment variable, never from its command
line (where `ps` shows it to every user of the machine), and compares in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
from dataclasses import dataclass
from pathlib import Path

TOKEN_ENV = "RUNBOOK_ALERTS_TOKEN"
BASIC_ENV = "RUNBOOK_ALERTS_BASIC_AUTH"  # USER:PASSWORD
MAX_SECRET_BYTES = 4096


class CredentialsError(ValueError):
    """The credentials cannot be read or make no sense; the message says which and why."""


@dataclass(frozen=True)
class Credentials:
    token: bytes | None = None
    basic: bytes | None = None  # b"user:password", as the Basic header carries it

    @property
    def required(self) -> bool:
        return self.token is not None or self.basic is not None

    def allow(self, header: str | None) -> bool:
        """Whether an Authorization header carries one of the credentials."""
        if not self.required:
            return True
        scheme, _, value = (header or "").strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and self.token is not None:
            return hmac.compare_digest(value.encode("utf-8", "replace"), self.token)
        if scheme.lower() == "basic" and self.basic is not None:
            try:
                given = base64.b64decode(value.encode("ascii", "replace"), validate=True)
            except (binascii.Error, ValueError):
                return False
            return hmac.compare_digest(given, self.basic)
        return False


def load_credentials(token_file: str | None, basic_auth_file: str | None,
                     environ: dict[str, str] | None = None) -> Credentials:
    """The files win over the environment variables; raises CredentialsError."""
    env = os.environ if environ is None else environ
    token = _secret(token_file, env.get(TOKEN_ENV), "--token-file", TOKEN_ENV)
    basic = _secret(basic_auth_file, env.get(BASIC_ENV), "--basic-auth-file", BASIC_ENV)
    if basic is not None and b":" not in basic:
        raise CredentialsError("basic auth credentials must read USER:PASSWORD")
    return Credentials(token, basic)


def _secret(path: str | None, from_env: str | None, flag: str, env_name: str) -> bytes | None:
    if path:
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_SECRET_BYTES + 1)
        except OSError as exc:
            raise CredentialsError(f"{flag} {path}: {exc.strerror}") from None
        where = f"{flag} {Path(path).name}"
    elif from_env:
        raw, where = from_env.encode("utf-8"), env_name
    else:
        return None
    secret = raw.strip()
    if not secret or len(raw) > MAX_SECRET_BYTES or b"\n" in secret:
        raise CredentialsError(f"{where}: expected one line of at most {MAX_SECRET_BYTES} bytes")
    return secret
