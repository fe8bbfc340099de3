"""Hiding secrets in what is kept or shown: environment values, text, JSON data.

Two name rules, because the two places differ:

* An environment variable is secret when its name contains TOKEN, KEY, SECRET, PASSWORD,
  PASSWD or CREDENTIAL anywhere (case-insensitive): HF_TOKEN, WANDB_API_KEY; NCCL_IB_HCA is not.
* In free text (logs, config files, command lines) a `name=value` / `name: value` /
  `"name": "value"` / `--name value` is secret when one of those words ends the name or is
  followed by a separator or a digit (api_key, hfToken, AWS_SECRET_ACCESS_KEY). Followed by a
  letter it is another word: `max_tokens: 2048`, `tokenizer: /models/x` and `KeyError: 'w'`
  are what a diagnosis needs, and they are everywhere in training configs and logs.
  An upper-case name (`HF_TOKENS`, `MY_KEYRING`) is an environment variable's: the first rule.

Credentials inside URLs (`scheme://user:pass@host` -> `scheme://user:***@host`, and a bare
`scheme://token@host`), `Authorization:` header values, `Bearer ...` tokens, PEM private-key
blocks (also JSON-escaped, as in a GCP service-account file), credentials whose shape gives
them away wherever they stand (AWS access key ids, GCP API keys and OAuth tokens, Hugging
Face, GitHub, Slack and `sk-` API keys, JWTs) and the caller's own regexes are hidden too.
Every function is idempotent: redacting redacted text changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
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
# (` --lr 3`) or assignment (` user=bob`, ` {user: bob`): those are other fields. A `name=` with
# nothing after it is a base64 token's padding, not a field.
_NEXT_FIELD = r"[ \t]+[{(\[]?(?:--?[A-Za-z]|[A-Za-z_][\w.\-]*[ \t]*[=:][ \t]*[^\s=])"
_UNQUOTED = rf"""[^\s,;}}\]"'](?:(?!{_NEXT_FIELD})[^\n,;}}\]"'])*"""
# Only a secret name matches (the text rule, or the environment rule for an upper-case name), so
# an ordinary `args: Namespace(` never swallows the `hf_token='...'` that follows it. The name is
# captured once in a lookahead and consumed by backreference (an atomic group in Python 3.10), and
# each rule is one lookahead over it: no name is rescanned, whatever follows it.
_NAME_CHAR = r"[A-Za-z0-9_.\-]"
_IS_SECRET_NAME = (rf"(?:(?={_NAME_CHAR}*?(?i:{_WORDS})(?![A-Za-z]))"
                   rf"|(?=[A-Z0-9_]*?(?:{'|'.join(SECRET_WORDS)}))(?=[A-Z0-9_]*(?!{_NAME_CHAR})))")
# A name starts a word (after at most a `-` or `--`): scanning never restarts inside a word, so
# a long run of letters costs linear time, not quadratic.
_ASSIGNMENT = re.compile(
    r"""(?P<q>["']?)(?<![A-Za-z0-9_.])(?<![A-Za-z0-9_.]-)(?<![A-Za-z0-9_.]--)"""
    rf"""(?=(?P<name>{_NAME})){_IS_SECRET_NAME}(?P=name)(?P=q)"""
    rf"""(?P<sep>[ \t]*(?:=|:(?!//))[ \t]*)(?P<value>{_QUOTED}|{_UNQUOTED})""")
_FLAG = re.compile(rf"(?P<dash>(?<![\w-])--?)(?P<name>{_NAME})(?P<sep>[ \t]+)(?P<value>[^\s\-][^\s]*)")
# The password runs to the last @ before the path: a password may itself hold an @. It may hold
# a `/` too (generated database passwords do) when a host follows its @ and it does not start
# like a port (`http://host:8080/a@b` is a path); at most 200 characters are looked through.
_URL_USERINFO = re.compile(
    r"(?P<scheme>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^/\s:@]*)"
    r"(?::(?P<password>[^/\s]*|(?=[^\s@]{1,200}@[A-Za-z0-9\[][^\s/@]*(?:[/?#\s]|$))(?!\d+/)[^\s@]+))?@")
_UP_TO_AT = re.compile(r"[^\s@]*@")  # from after `://` to an `@`, no whitespace between
_BEARER = re.compile(r"(?P<kind>\bBearer[ \t]+)(?P<value>[A-Za-z0-9._~+/=\-]{8,})")
# `Authorization: Basic dXNlcjpw`, `-H 'authorization: token ghp_x'`: the value after the scheme.
_AUTH_HEADER = re.compile(
    r"""(?P<head>(?<![A-Za-z0-9_\-])(?i:proxy-)?(?i:authorization)["']?[ \t]*[:=][ \t]*["']?"""
    r"""(?:(?i:bearer|basic|digest|token|bot|negotiate)[ \t]+)?)"""
    r"""(?P<value>\*\*\*redacted\*\*\*|[A-Za-z0-9._~+/=\-]+)""")
# A PEM private key's body: base64 lines, `Proc-Type:` headers, JSON-escaped line ends (a GCP
# service-account file), up to its END line, or to where the base64 stops when the text was cut.
_PEM = re.compile(
    r"(?P<begin>-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----)"
    r"(?P<body>(?:\*\*\*redacted\*\*\*|[A-Za-z0-9+/=\s:,.]|\\[nr]|-(?!----END ))*)"
    r"(?P<end>-----END (?P=kind)-----)?")
# A PEM key split over the items of a list: its BEGIN line with no END after it, its body lines.
_PEM_OPEN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?!.*-----END )")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY")
_PEM_LINE = re.compile(r"[A-Za-z0-9+/=]{16,}|^\s*[A-Za-z0-9+/=]*\s*$|^(?:Proc-Type|DEK-Info|Version|Comment):"
                       r"|\*\*\*redacted")
PEM_MAX_LINES = 200  # a 16384-bit RSA key is about 180 lines
MIN_SECRET_VALUE = 6  # characters; shorter parameter values are not searched for
# Credentials whose shape alone gives them away, wherever they stand.
_KNOWN_TOKENS = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}"  # AWS access key ids
    r"|AIza[0-9A-Za-z_\-]{35}|ya29\.[0-9A-Za-z_\-]{20,}"  # GCP API keys, OAuth access tokens
    r"|hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}|sk-[A-Za-z0-9_\-]{20,}"  # Slack, OpenAI-style keys
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"  # JWTs
    r")(?![A-Za-z0-9])")
# What every _KNOWN_TOKENS match starts with.
_TOKEN_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA", "AIza",
                   "ya29.", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "sk-", "eyJ")
_TOKEN_PREFIX = re.compile("|".join(map(re.escape, _TOKEN_PREFIXES)))  # one scan, not one per prefix
# An environment variable's name: in text too, a secret word anywhere in it makes it secret.
_ENV_NAME = re.compile(r"(?=[A-Z0-9_]*[A-Z])[A-Z_][A-Z0-9_]*")


def is_secret_env_name(name: str) -> bool:
    """The environment rule: the name contains a secret word anywhere."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


@lru_cache(maxsize=4096)  # a report of many nodes asks about the same few keys again and again
def is_secret_text_name(name: str) -> bool:
    """The free-text rule: a secret word not followed by a letter; an upper-case name (an
    environment variable's) follows the environment rule."""
    if _ENV_NAME.fullmatch(name):
        return is_secret_env_name(name)
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


TEXT_MEMO_MAX = 65_536  # strings whose redacted form a Redactor keeps


class Redactor:
    """Applies the built-in rules, the caller's extra patterns and the exact values it was told
    are secret (`values`: a `--set hf_token=...` is hidden wherever it shows, whatever its shape)."""

    def __init__(self, extra: Iterable[str] = (), values: Iterable[Any] = ()) -> None:
        self.extra = compile_patterns(extra)
        # Short values would hide ordinary text; a value inside the marker would make it grow.
        self.values = sorted({str(v) for v in values if len(str(v)) >= MIN_SECRET_VALUE
                              and str(v) not in REDACTED}, key=len, reverse=True)
        # text() of strings seen before: a report of many nodes repeats most of its strings
        # (titles, explanations, step names, evidence alike across nodes).
        self._texts: dict[str, str] = {}

    def text(self, text: str) -> str:
        """Text with every secret shape hidden (logs, configs, command output)."""
        done = self._texts.get(text)
        if done is None:
            done = self._hide(text)
            # Once full, the memo keeps what it holds: the strings a report repeats come early,
            # and clearing it for 100,000 node names would make every node recompute them.
            if len(self._texts) < TEXT_MEMO_MAX:
                self._texts[text] = done
        return done

    @classmethod
    def for_params(cls, params: dict[str, Any], extra: Iterable[str] = ()) -> Redactor:
        """A redactor that also hides the values of secret-named parameters (`hf_token`)."""
        return cls(extra, secret_values(params))

    def env(self, name: str, value: str) -> str:
        """The value to show for an environment variable."""
        if is_secret_env_name(name):
            return REDACTED
        return self.text(value)

    def _hide(self, text: str) -> str:
        # Tokens before assignments: a base64 token's trailing `=` reads like a `name=` field.
        text = self.credentials(text)
        if "=" in text or ":" in text:
            text = _ASSIGNMENT.sub(_assignment, text)
        if "-" in text:
            text = _FLAG.sub(_flag, text)
        for pattern in self.extra:
            text = pattern.sub(_extra, text)
        return text

    def credentials(self, text: str) -> str:
        """Only what is a credential by its shape or value: the redactor's values, PEM keys,
        passwords in URLs, authorization headers, bearer and known tokens. Not `name=value`
        fields: for prose and code (the site), where `key=lambda o: ...` is no secret."""
        for value in self.values:
            text = text.replace(value, REDACTED)
        # Each pattern runs only where the literal text it cannot match without is present: a
        # substring test is far cheaper than a regex scan of a whole page that holds no secret.
        if "-----BEGIN " in text:
            text = _PEM.sub(lambda m: m.group("begin") + REDACTED + (m.group("end") or ""), text)
        if "@" in text and _has_userinfo_shape(text):
            text = _URL_USERINFO.sub(_url, text)
        if "authorization" in text.lower():
            text = _AUTH_HEADER.sub(lambda m: m.group("head") + REDACTED, text)
        if "Bearer" in text:
            text = _BEARER.sub(lambda m: m.group("kind") + REDACTED, text)
        if _TOKEN_PREFIX.search(text):
            text = _KNOWN_TOKENS.sub(lambda m: REDACTED, text)
        return text

    def data(self, value: Any, key: str | None = None) -> Any:
        """JSON-like data with secret-named fields and secrets inside strings hidden. A dict or
        list that shows up more than once (a report of many nodes holds each distinct answer
        once, shared by the nodes that gave it) is redacted once, and its copy shared alike."""
        return self._data(value, key, {})

    def _data(self, value: Any, key: str | None, done: dict[int, Any]) -> Any:
        if isinstance(value, (dict, list)):
            # A container's redacted form depends on its content alone (the key matters only
            # for scalars); `value` is alive through the call, so its id is not reused.
            known = done.get(id(value))
            if known is not None:
                return known
            if isinstance(value, dict):
                copied: Any = {k: self._data(v, str(k), done) for k, v in value.items()}
            else:
                copied = [self._data(v, None, done) for v in _hide_split_keys(value)]
            done[id(value)] = copied
            return copied
        if key is not None and is_secret_text_name(key) and isinstance(value, (str, int, float)) \
                and not isinstance(value, bool):
            return REDACTED
        if isinstance(value, str):
            return self.text(value)
        return value


def secret_values(params: dict[str, Any]) -> list[str]:
    """The values of secret-named parameters, as text."""
    return [str(v) for k, v in params.items()
            if is_secret_text_name(str(k)) and isinstance(v, (str, int, float)) and not isinstance(v, bool)]


def _hide_split_keys(items: list[Any]) -> list[Any]:
    """A list of lines (a log's tail) with a PEM key's body lines hidden: each line alone has no
    shape, only the BEGIN line before them tells. Hiding stops at the END line, at a line with no
    base64 in it, or after PEM_MAX_LINES."""
    out: list[Any] = []
    hiding = 0
    for item in items:
        if hiding and isinstance(item, str) and not _PEM_END.search(item) and _PEM_LINE.search(item):
            out.append(REDACTED)
            hiding -= 1
            continue
        hiding = 0
        if isinstance(item, str) and _PEM_OPEN.search(item):
            hiding = PEM_MAX_LINES
        out.append(item)
    return out


def _has_userinfo_shape(text: str) -> bool:
    """Whether some `://` has an `@` after it before any whitespace, as every _URL_USERINFO match
    has: a page full of links and no credential is then not scanned by that regex at all."""
    start = text.find("://")
    while start != -1:
        if _UP_TO_AT.match(text, start + 3):
            return True
        start = text.find("://", start + 3)
    return False


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
