"""A secret planted anywhere, in any field, never survives the redactor: in text, in JSON data,
in environment values. Redacting twice changes nothing."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runbook.run.redact import REDACTED, Redactor

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# A planted secret starts with a marker no generated filler holds, so finding it means it leaked.
MARK = "Zq7"
SECRETS = st.text(alphabet=_ALNUM + "_-+/=.~", min_size=9, max_size=40).map(lambda s: MARK + s)
# A token as a URL's whole user part (`https://TOKEN@host`): API tokens never hold a `/`, and
# `https://host/@user` is a path, not a credential.
TOKENS = st.text(alphabet=_ALNUM + "_-", min_size=9, max_size=40).map(lambda s: MARK + s)
WORDS = ["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"]


def _secret_env_names() -> st.SearchStrategy[str]:
    part = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", max_size=8)
    return st.tuples(part, st.sampled_from(WORDS), part).map(lambda t: t[0] + t[1] + t[2]).filter(
        lambda n: n[0].isalpha() or n[0] == "_")


def _secret_field_names() -> st.SearchStrategy[str]:
    """Names as configs and code write them: api_key, hfToken, wandb.api_key, AWS_SECRET_ACCESS_KEY."""
    word = st.sampled_from(WORDS)
    return st.one_of(
        _secret_env_names(),
        st.tuples(st.sampled_from(["", "api_", "hf_", "wandb.", "db.", "aws_secret_access_", "access_",
                                   "private_", "auth_", "my-", "x."]), word).map(
            lambda t: t[0] + t[1].lower()),
        st.tuples(st.sampled_from(["api", "hf", "auth", "secretAccess", "session", "refresh"]), word).map(
            lambda t: t[0] + t[1].capitalize()),
        st.sampled_from(["SecretAccessKey", "SessionToken", "private_key", "private_key_id", "client_secret",
                         "password", "passwd", "token", "key", "apiKey", "secret"]))


def _aws_key_id() -> st.SearchStrategy[str]:
    body = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16)
    return st.tuples(st.sampled_from(["AKIA", "ASIA"]), body).map("".join)


def _pem(body: str, escaped: bool) -> str:
    newline = "\\n" if escaped else "\n"
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return newline.join(["-----BEGIN PRIVATE KEY-----", *lines, "-----END PRIVATE KEY-----", ""])


def _planted() -> st.SearchStrategy[tuple[str, str]]:
    """(text holding the secret, the secret) in every shape the redactor knows. A flag stands
    between spaces, as on a command line."""
    name, secret = _secret_field_names(), SECRETS
    return st.one_of(
        st.tuples(name, st.sampled_from(["=", ": ", " = ", ":"]), secret).map(
            lambda t: (t[0] + t[1] + t[2], t[2])),
        st.tuples(name, secret).map(lambda t: (f'"{t[0]}": "{t[1]}"', t[1])),
        st.tuples(name, secret).map(lambda t: (f"'{t[0]}': '{t[1]}'", t[1])),
        st.tuples(name, secret).map(lambda t: (f"export {t[0]}='{t[1]} with spaces'", t[1])),
        st.tuples(name, secret).map(lambda t: (f" --{t[0]} {t[1]} ", t[1])),
        st.tuples(name, secret).map(lambda t: (f" --{t[0]}={t[1]} ", t[1])),
        st.tuples(st.sampled_from(["postgres", "https", "redis", "mongodb+srv", "amqp"]),
                  st.text(alphabet=_ALNUM, min_size=1, max_size=8), secret).map(
            lambda t: (f"{t[0]}://{t[1]}:{t[2]}@db.example.invalid:5432/x", t[2])),
        TOKENS.map(lambda s: (f"https://{s}@git.example.invalid/o/r.git", s)),
        secret.map(lambda s: (f"Authorization: Bearer {s}", s)),
        secret.map(lambda s: (f"-H 'Authorization: Basic {s}'", s)),
        secret.map(lambda s: (f"Bearer {s}", s)),
        _aws_key_id().map(lambda k: (f"using key {k} now", k)),
        st.text(alphabet=_ALNUM, min_size=35, max_size=35).map(lambda s: ("AIza" + s, "AIza" + s)),
        st.text(alphabet=_ALNUM, min_size=34, max_size=40).map(lambda s: ("hf_" + s, "hf_" + s)),
        st.tuples(st.text(alphabet=_ALNUM + "+/", min_size=64, max_size=300), st.booleans()).map(
            lambda t: (_pem(MARK + t[0], t[1]), MARK + t[0][:40])),
        st.tuples(st.text(alphabet=_ALNUM + "+/", min_size=64, max_size=200)).map(
            lambda t: (json.dumps({"type": "service_account", "private_key_id": MARK + t[0][:20],
                                   "private_key": _pem(MARK + t[0], False), "client_email": "x@y.iam"}),
                       MARK + t[0][:20])),
    )


_FILLER = st.text(alphabet=_ALNUM + " .,:;()[]{}#|/-_\t", max_size=60)
# A field starts after whitespace or a delimiter (an opening bracket after a space), and ends at
# whitespace, a delimiter or a closing bracket: `a{token: x` glued to a word is not a field.
_BEFORE = st.sampled_from([" ", "\n", "\t", "; ", ", ", "\r\n", " | ", "\n\n", " {", " [", " (", "\n{"])
_AFTER = st.sampled_from([" ", "\n", "\t", ";", ",", "\r\n", " | ", "}", "]", ")", "\n}"])


def _in_context() -> st.SearchStrategy[tuple[str, list[str]]]:
    """Log-like text: filler lines with secrets planted between them at field boundaries."""
    piece = st.tuples(_FILLER, _BEFORE, _planted(), _AFTER)
    return st.lists(piece, min_size=1, max_size=5).map(lambda pieces: (
        "".join(f + a + p[0] + b for f, a, p, b in pieces), [p[1] for _, _, p, _ in pieces]))


def _assert_hidden(redacted: str, secrets: list[str], original: str) -> None:
    for secret in secrets:
        assert secret not in redacted, f"{secret!r} survived in {redacted!r} (from {original!r})"


@settings(max_examples=settings.default.max_examples * 20)
@given(planted=_in_context())
def test_no_secret_survives_in_text(planted: tuple[str, list[str]]) -> None:
    text, secrets = planted
    redactor = Redactor()
    once = redactor.text(text)
    _assert_hidden(once, secrets, text)
    assert redactor.text(once) == once, "redacting twice changes the text"


@settings(max_examples=settings.default.max_examples * 8)
@given(name=_secret_env_names(), value=st.text(max_size=60))
def test_environment_values_with_secret_names_are_hidden_whole(name: str, value: str) -> None:
    assert Redactor().env(name, value) == REDACTED


@settings(max_examples=settings.default.max_examples * 8)
@given(name=st.text(alphabet="ABCDEFGHIJLMNOQRUVWXZ_", min_size=1, max_size=12),
       planted=_planted())
def test_other_environment_values_keep_no_secret_shape(name: str, planted: tuple[str, str]) -> None:
    """DATABASE_URL=postgres://u:pass@h, a bearer token in NOTES: the value is searched."""
    text, secret = planted
    assert secret not in Redactor().env(name, text)


_SHAPES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(alphabet=_ALNUM + " ", max_size=10)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet=_ALNUM + "_", max_size=8),
                                                                inner, max_size=3),
    max_leaves=10)


def _json_with_secrets(draw: Any) -> tuple[Any, list[str]]:
    secrets: list[str] = []

    def plant(value: Any) -> Any:
        if isinstance(value, dict) and draw(st.booleans()):
            if draw(st.booleans()):
                secret = draw(SECRETS)
                value[draw(_secret_field_names())] = secret
            else:
                text, secret = draw(_planted())
                value[draw(st.sampled_from(["msg", "cmdline", "line", "url", "notes", "stdout"]))] = text
            secrets.append(secret)
        if isinstance(value, list) and draw(st.booleans()):
            text, secret = draw(_planted())
            value.append(text)
            secrets.append(secret)
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
        for child in children:
            plant(child)
        return value

    return plant(draw(st.dictionaries(st.text(alphabet=_ALNUM, max_size=6), _SHAPES, max_size=4))), secrets


@settings(max_examples=settings.default.max_examples * 4)
@given(data=st.data())
def test_no_secret_survives_in_nested_json_data(data: st.DataObject) -> None:
    value, secrets = _json_with_secrets(data.draw)
    redactor = Redactor()
    once = redactor.data(value)
    dumped = json.dumps(once)
    for secret in secrets:
        assert secret not in dumped, f"{secret!r} survived in {dumped}"
    assert redactor.data(once) == once
    json.loads(dumped)  # still JSON


def _every_pattern(redactor: Redactor, text: str) -> str:
    """The redactor's text rules with no substring guard in front of any pattern."""
    from runbook.run import redact as r

    for value in redactor.values:
        text = text.replace(value, REDACTED)
    text = r._PEM.sub(lambda m: m.group("begin") + REDACTED + (m.group("end") or ""), text)
    text = r._URL_USERINFO.sub(r._url, text)
    text = r._AUTH_HEADER.sub(lambda m: m.group("head") + REDACTED, text)
    text = r._BEARER.sub(lambda m: m.group("kind") + REDACTED, text)
    text = r._KNOWN_TOKENS.sub(lambda m: REDACTED, text)
    text = r._ASSIGNMENT.sub(r._assignment, text)
    return r._FLAG.sub(r._flag, text)


FRAGMENTS = ["-----BEGIN RSA PRIVATE KEY-----\nMIIEow", "-----END RSA PRIVATE KEY-----", "https://",
             "u:p4ss@host/", "@", "Authorization: Basic ", "AUTHORIZATION=", "Bearer ", "bearer ",
             "AKIAABCDEFGHIJKLMNOP", "hf_" + "a" * 34, "ghp_" + "b" * 36, "sk-" + "c" * 24,
             "eyJhbGciOi.eyJzdWIiOi.sig12345", "xoxb-123456789012", "ya29." + "d" * 24, "password=",
             "--token ", " ", "\n", ":", "=", "-", "x", "key"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), SECRETS), max_size=12))
def test_the_guards_before_each_pattern_change_nothing(parts: list[str]) -> None:
    """A pattern is skipped only when the text lacks a literal it cannot match without."""
    text = "".join(parts)
    redactor = Redactor()
    assert redactor.text(text) == _every_pattern(redactor, text)
