"""Hiding secrets in what `runbook collect` writes: environment values, text, JSON data.

Two name rules, because the two places differ:

* An environment variable is secret when its name contains TOKEN, KEY, SECRET, PASSWORD,
  PASSWD or CREDENTIAL anywhere (case-insensitive): HF_TOKEN, WANDB_API_KEY; NCCL_IB_HCA is not.
* In free text (logs, config files, command lines) a `name=value` / `name: value` /
  `"name": "value"` / `--name value` is secret when one of those words ends the name or is
  followed by a separator or a digit (api_key, hfToken, AWS_SECRET_ACCESS_KEY). Followed by a
  letter it is another word: `max_tokens: 2048`, `tokenizer: /models/x` and `KeyError: 'w'`
  are what a diagnosis needs, and they are everywhere in training configs and logs.

Credentials inside URLs (`scheme://user:pass@host` -> `scheme://user:***@host`, and a bare
`scheme://token@host`), `Bearer ...` tokens and the caller's own regexes are hidden too.
Every function is idempotent: redacting redacted text changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "***redacted***"
URL_PASSWORD = "***"
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")

_WORDS = "|".join(w.lower() for w in SECRET_WORDS)
# The secret word ends the name, or a separator or digit follows it (not a letter: KeyError stays).
_TEXT_SECRET = re.compile(rf"(?i:{_WORDS})(?![A-Za-z])")
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_QUOTED = r""""(?:[^"\\\n]|\\.)*"|'[^'\n]*'"""
# An unquoted value runs to the end of the line (a multi-word passphrase after `password:` is
# hidden whole) but stops at a delimiter (`,` `;` `}` `]`), and before a following flag
# (` --lr 3`) or assignment (` user=bob`): those are other fields.
_NEXT_FIELD = r"[ \t]+(?:--?[A-Za-z]|[A-Za-z_][\w.\-]*[ \t]*[=:])"
_UNQUOTED = rf"""[^\s,;}}\]"'](?:(?!{_NEXT_FIELD})[^\n,;}}\]"'])*"""
# A name starts a word (after at most a `-` or `--`): scanning never restarts inside a word, so
# a long run of letters costs linear time, not quadratic.
_ASSIGNMENT = re.compile(
    r"""(?P<q>["']?)(?<![A-Za-z0-9_.])(?<![A-Za-z0-9_.]-)"""
    rf"""(?P<name>{_NAME})(?P=q)(?P<sep>[ \t]*(?:=|:(?!//))[ \t]*)(?P<value>{_QUOTED}|{_UNQUOTED})""")
_FLAG = re.compile(rf"(?P<dash>(?<![\w-])--?)(?P<name>{_NAME})(?P<sep>[ \t]+)(?P<value>[^\s\-][^\s]*)")
# The password runs to the last @ before the path: a password may itself hold an @.
_URL_USERINFO = re.compile(r"(?P<scheme>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^/\s:@]*)"
                           r"(?::(?P<password>[^/\s]*))?@")
_BEARER = re.compile(r"(?P<kind>\bBearer[ \t]+)(?P<value>[A-Za-z0-9._~+/=\-]{8,})")


def is_secret_env_name(name: str) -> bool:
    """The environment rule: the name contains a secret word anywhere."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def is_secret_text_name(name: str) -> bool:
    """The free-text rule: a secret word not followed by a lower-case letter."""
    return _TEXT_SECRET.search(name) is not None


def compile_patterns(patterns: Iterable[str]) -> list[re.Pattern[str]]:
    """The caller's extra patterns; ValueError with a one-line message for a bad one."""
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ValueError(f"--redact {pattern!r}: not a valid regular expression: {exc}") from None
    return compiled


class Redactor:
    """Applies the built-in rules and the caller's extra patterns."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.extra = compile_patterns(extra)

    def env(self, name: str, value: str) -> str:
        """The value to show for an environment variable."""
        if is_secret_env_name(name):
            return REDACTED
        return self.text(value)

    def text(self, text: str) -> str:
        """Text with every secret shape hidden (logs, configs, command output)."""
        text = _URL_USERINFO.sub(_url, text)
        text = _ASSIGNMENT.sub(_assignment, text)
        text = _FLAG.sub(_flag, text)
        text = _BEARER.sub(lambda m: m.group("kind") + REDACTED, text)
        for pattern in self.extra:
            text = pattern.sub(_extra, text)
        return text

    def data(self, value: Any, key: str | None = None) -> Any:
        """JSON-like data with secret-named fields and secrets inside strings hidden."""
        if isinstance(value, dict):
            return {k: self.data(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.data(v) for v in value]
        if key is not None and is_secret_text_name(key) and isinstance(value, (str, int, float)) \
                and not isinstance(value, bool):
            return REDACTED
        if isinstance(value, str):
            return self.text(value)
        return value


def _url(m: re.Match[str]) -> str:
    if m.group("password") is not None:
        return f"{m.group('scheme')}{m.group('user')}:{URL_PASSWORD}@"
    if m.group("user"):  # https://TOKEN@host: the user part is the credential
        return f"{m.group('scheme')}{URL_PASSWORD}@"
    return m.group(0)


def _assignment(m: re.Match[str]) -> str:
    if not is_secret_text_name(m.group("name")):
        return m.group(0)
    value = m.group("value")
    quote = value[0] if value[:1] in ("'", '"') else ""
    shown = f"{quote}{REDACTED}{quote}"
    return f"{m.group('q')}{m.group('name')}{m.group('q')}{m.group('sep')}{shown}"


def _flag(m: re.Match[str]) -> str:
    if not is_secret_text_name(m.group("name")):
        return m.group(0)
    return f"{m.group('dash')}{m.group('name')}{m.group('sep')}{REDACTED}"


def _extra(m: re.Match[str]) -> str:
    """The whole match, or only its groups when the pattern has some (`password is (\\S+)`)."""
    if not m.re.groups:
        return REDACTED
    spans = sorted(m.span(i) for i in range(1, m.re.groups + 1) if m.span(i)[0] >= 0)
    out, cursor = [], m.start()
    for start, end in spans:
        if start < cursor:
            continue  # nested in a group already hidden
        out += [m.string[cursor:start], REDACTED]
        cursor = end
    out.append(m.string[cursor:m.end()])
    return "".join(out)
