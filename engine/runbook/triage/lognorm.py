"""Normalising log lines before signatures are matched.

Launchers, loggers and terminals decorate every line: ANSI colours, timestamps,
rank prefixes (`[rank3]:`, `[default2]:`, `(TaskRunner pid=1)`, `[1,3]<stderr>:`),
NCCL's `host:pid:tid [dev]`, `kubectl logs --prefix`'s `[pod/NAME/CONTAINER]`. A paste adds its
own: a Markdown quote (`> `), or HTML's escapes when it was copied from a web page's source
(`&lt;`, `&quot;`). Signatures are written against the message, so the decoration goes.
Lines that a terminal, syslog or a container runtime cut in two are joined again where that
can be told (`join_wrapped`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from runbook.checks.facts._text import ANSI

_TIMESTAMPS = (
    # 2024-05-01T12:00:00.123Z, 2024-05-01 12:00:00,123, 2024/05/01 12:00:00 (+ optional brackets)
    r"\[?\d{4}[-/]\d{2}[-/]\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2}| ?UTC)?\]?",
    r"\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?",  # [12:00:00] or 12:00:00.123
    # syslog: `May  1 12:00:00 gpu001 kernel:` (host and tag optional)
    r"[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?: [\w.-]+ [\w./-]+(?:\[\d+\])?:)?",
    r"\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}\]",  # dmesg -T
    r"\[ *\d+\.\d+\]",  # dmesg: [12345.678901]
    r"(?:stdout|stderr) [PF](?= )",  # CRI container log stream + partial/full flag
)
_RANKS = (
    r"\[(?:rank|default|Rank) ?\d+\]:",  # [rank3]: (torch), [default2]: (torchrun --tee)
    r"[Rr]ank[ _]?\d+:",  # rank 3:
    r"\((?:[\w.]+ )?pid=\d+(?:, ip=[\w.:]+)?\)",  # Ray: (TaskRunner pid=1), (pid=1, ip=10.0.0.1)
    r"\[\d+,\d+\]<std(?:out|err|in)>:",  # Open MPI --tag-output: [1,3]<stderr>:
    r"[\w.-]+:\d+:\d+ \[\d+\]",  # NCCL: gpu001:4242:4300 [3]
    # srun --label: `3: `; not the rank Horovod's stall inspector lists its stalled tensors under
    # (`6: [horovod_allreduce.0, horovod_allreduce.1 ...]`): that number is what the line says
    r"\d{1,5}:(?= (?!\[[\w./-]*[A-Za-z_][\w./-]*(?:, |\]\s*$| \.\.\.)))",
    r"[a-z][\w.-]*[-_]\d+ +\|(?= )",  # docker compose: `sglang-1  | `
    r"\[pod/[\w.-]+/[\w.-]+\]",  # kubectl logs --prefix: [pod/trainer-worker-0/pytorch]
    r">(?!>)",  # a Markdown quote `> ` (not Python's `>>> ` prompt)
)
_ANY_PREFIX = "|".join(_TIMESTAMPS + _RANKS)
_PREFIX_SOURCE = rf"(?:[ \t]*(?:{_ANY_PREFIX})[ \t]*(?:[|\-:](?=[ \t]))?)+[ \t]*"

PREFIX = re.compile(r"\A" + _PREFIX_SOURCE)
PREFIX_LINES = re.compile("^" + _PREFIX_SOURCE, re.MULTILINE)
CRI_PARTIAL = re.compile(r"\S+ (?:stdout|stderr) P ")
# HTML's escapes of a log copied from a page's source, and what they stand for
ENTITIES = {"&lt;": "<", "&gt;": ">", "&amp;": "&", "&quot;": '"', "&#34;": '"', "&apos;": "'",
            "&#39;": "'", "&#x27;": "'", "&nbsp;": " "}
ENTITY = re.compile("|".join(ENTITIES))

# Lines cut at a terminal's width or a logger's record limit are this long (characters).
MAX_JOINED = 65536  # characters: a logical line stops growing here
RECORD_START = 8  # a line starting with the cut line's first characters is a record of its own
WRAP_WIDTHS = frozenset({80, 100, 120, 128, 132, 150, 160, 180, 200, 220, 240, 250, 256,
                         1024, 2048, 4096, 8192, 16384})


def normalize(line: str) -> str:
    """One line without colours, HTML escapes, leading timestamps and rank prefixes."""
    if "\x1b" in line:
        line = ANSI.sub("", line)
    if "&" in line:
        line = unescape(line)
    return PREFIX.sub("", line, count=1)


def normalize_block(text: str) -> str:
    """`normalize` on every line of a block of lines joined by newlines, in one pass."""
    if "\x1b" in text:
        text = ANSI.sub("", text)
    if "&" in text:
        text = unescape(text)
    return PREFIX_LINES.sub("", text)


def unescape(text: str) -> str:
    """HTML's common escapes replaced by what they stand for, in one pass (`&amp;lt;` is `&lt;`)."""
    return ENTITY.sub(lambda m: ENTITIES[m.group(0)], text)


def join_wrapped(lines: Iterable[str], start: int = 1) -> Iterator[tuple[int, int, str]]:
    """(first line number, last line number, text) of each logical line, cut lines joined.

    A line is joined with the next when a container runtime marked it partial (CRI
    `stdout P`), or when it is exactly as long as a terminal or logger cuts lines and
    does not end in a space, while the next line goes on (lower case, a digit or punctuation,
    at most one leading space) without a prefix of its own and without starting as the cut line
    did (a logger's `[titan] 2026-…` record of the same width). A line of any length that
    stops inside a parenthesis, mid-word (`WorkNCCL(S`), is joined with a next line that goes
    on and closes it (`eqNum=1522789, …)`): a paste cut at the width of somebody's window.
    `lines` come without line endings.
    """
    pending: str | None = None
    open_paren = False  # `pending` stops inside a parenthesis: the next line must close it
    partial = False  # the last piece of `pending` was marked partial by a container runtime
    first = 0
    number = start - 1
    for number, line in enumerate(lines, start):
        if pending is not None:
            goes_on = (_continues(line) and not line.startswith(pending[:RECORD_START])
                       and (not open_paren or _closes(line)))
            if (partial or goes_on) and len(pending) < MAX_JOINED:
                pending += PREFIX.sub("", line, count=1) if partial else line
                partial = _is_partial(line)
                open_paren = False
                if not (partial or _is_cut(line)):
                    yield first, number, pending
                    pending = None
                continue
            yield first, number - 1, pending
            pending = None
        open_paren = _stops_in_parenthesis(line)
        if len(line) not in WRAP_WIDTHS and " P " not in line[:48] and not open_paren:
            yield number, number, line  # the common case, fast
            continue
        partial = _is_partial(line)
        if partial or open_paren or _is_cut(line):
            pending, first = line, number
        else:
            yield number, number, line
    if pending is not None:
        yield first, number, pending


def _stops_in_parenthesis(line: str) -> bool:
    """A line cut mid-word inside a parenthesis: `... WorkNCCL(S`."""
    return line[-1:].isalnum() and line.rfind("(") > line.rfind(")")


def _closes(line: str) -> bool:
    """Whether `line` closes more parentheses than it opens."""
    return line.count(")") > line.count("(")


def _is_partial(line: str) -> bool:
    return " P " in line[:48] and CRI_PARTIAL.match(line) is not None


def _is_cut(line: str) -> bool:
    return len(line) in WRAP_WIDTHS and not line[-1].isspace()


def _continues(line: str) -> bool:
    """Whether `line` reads as the rest of a cut line rather than a record of its own."""
    rest = line[1:] if line.startswith(" ") else line  # a cut just before a space
    if not rest or rest[0].isspace():
        return False
    first = rest[0]
    return (first.islower() or first.isdigit() or first in ".,;:()[]{}'\"/_-") and not PREFIX.match(line)
