"""Signature patterns: one regex, three engines that must agree on it.

A signature is matched by `runbook triage` on the client with RE2 (google-re2), which runs in
time linear in the log whatever the pattern (no backtracking: `(a|aa)+$` cannot make triage
slow), and by the site's triage page in the browser with JavaScript's RegExp. The lint refuses
a pattern when either engine would read it differently from Python's `re`:

- RE2 lacks look-around, back-references, possessive and atomic groups, and `\\Z`;
- JavaScript lacks `\\A`, `\\Z`, `\\z`, POSIX classes (`[[:alpha:]]`), `(?P=name)`, flags set
  in the middle of a pattern (`a(?i)b`) and the `(?s)`/`(?m)`/`(?x)` flags; named groups are
  written `(?P<name>...)` here and become `(?<name>...)` there.

A signature is searched in one line at a time: a match never spans two lines.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any

try:  # a wheel for every platform the client runs on; without it, Python's re (not linear)
    import re2 as _re2
except ImportError:  # pragma: no cover - exercised only where the wheel is missing
    _re2 = None

LINEAR = _re2 is not None
_LEADING_FLAGS = re.compile(r"\A\(\?([imsx]+)\)")
_JS_REFUSED = (
    (re.compile(r"(?<!\\)(?:\\\\)*\\[AZz]"), "\\A, \\Z and \\z (use ^ and $: a pattern sees one line)"),
    (re.compile(r"\[\[:\w+:\]"), "POSIX classes such as [[:alpha:]] (write the class out)"),
    (re.compile(r"\(\?P="), "back-references (?P=name)"),
    (re.compile(r"(?<!\\)\(\?<[=!]"), "look-behind"),
    (re.compile(r"(?<!\\)\(\?[=!]"), "look-ahead"),
)


class PatternError(ValueError):
    """A pattern one of the engines cannot take; the message says why, in one line."""


@dataclass(frozen=True)
class LinearRegex:
    """A compiled signature: `search(text, pos)` over bytes of many lines joined by newlines
    finds the first line at or after `pos` that matches, never crossing a line's end."""

    source: str
    _compiled: Any

    def search(self, data: bytes, pos: int = 0) -> tuple[int, int] | None:
        """(start, end) byte offsets of the first match at or after `pos`, or None."""
        found = self._compiled.search(data, pos)
        return (found.start(), found.end()) if found else None


def compile_linear(source: str) -> LinearRegex:
    """The pattern on RE2, over UTF-8 bytes, with `^`/`$` at line ends and no match across
    lines. Raises PatternError when RE2 cannot take it."""
    reason = python_problem(source)
    if reason:
        raise PatternError(reason)
    if _re2 is None:  # pragma: no cover
        return LinearRegex(source, re.compile(source.encode("utf-8"), re.MULTILINE))
    options = _re2.Options()
    options.log_errors = False  # the reason comes back in the exception, not on stderr
    options.never_nl = True
    try:
        return LinearRegex(source, _re2.compile(b"(?m)" + source.encode("utf-8"), options))
    except _re2.error as exc:
        raise PatternError(f"RE2 (linear-time matching) cannot take it: {_reason(exc)}") from None


def python_problem(source: str) -> str | None:
    """Why Python's `re` refuses the pattern, or None."""
    try:
        with warnings.catch_warnings():  # "possible nested set": the portability check says more
            warnings.simplefilter("ignore", FutureWarning)
            re.compile(source)
    except (re.error, OverflowError, RecursionError) as exc:
        return f"not a valid regular expression: {exc}"
    return None


def portability_problem(source: str) -> str | None:
    """Why this pattern would not mean the same on RE2 and in JavaScript, or None."""
    reason = python_problem(source)
    if reason:
        return reason
    if _re2 is not None:
        try:
            compile_linear(source)
        except PatternError as exc:
            return str(exc)
    for refused, what in _JS_REFUSED:
        if refused.search(source):
            return f"uses {what}, which RE2 or JavaScript do not support"
    body = _LEADING_FLAGS.sub("", source)
    if re.search(r"(?<!\\)\(\?[imsx]+\)", body):
        return "sets a flag in the middle of the pattern (JavaScript allows (?i) only at its start)"
    flags = _LEADING_FLAGS.match(source)
    if flags and set(flags.group(1)) - {"i"}:
        return "uses a (?s), (?m) or (?x) flag: a pattern sees one line; write it without"
    if re.search(r"(?<!\\)\(\?[a-z]*[msx][a-z-]*:", body):
        return "uses a scoped (?s:...), (?m:...) or (?x:...) group; only (?i:...) is portable"
    return None


def to_javascript(source: str) -> tuple[str, str]:
    """(source, flags) for JavaScript's RegExp with the same meaning on one line."""
    flags = ""  # not "u": it makes an escape such as \- a syntax error, as Python does not
    leading = _LEADING_FLAGS.match(source)
    if leading and "i" in leading.group(1):
        flags += "i"
        source = source[leading.end():]
    return re.sub(r"(?<!\\)\(\?P<", "(?<", source), flags


def _reason(exc: Exception) -> str:
    text = exc.args[0] if exc.args else exc
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
