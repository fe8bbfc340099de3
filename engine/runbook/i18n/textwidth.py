"""Display width of terminal text: CJK characters take two columns."""

from __future__ import annotations

import re
import unicodedata

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def width(text: str) -> int:
    plain = _ANSI.sub("", text)
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 0 if unicodedata.combining(ch)
               else 1 for ch in plain)


def pad(text: str, columns: int) -> str:
    """`text` followed by spaces up to `columns` display columns."""
    return text + " " * max(0, columns - width(text))


def clip(text: str, columns: int) -> str:
    """`text` cut to `columns` display columns, with an ellipsis when cut."""
    if width(text) <= columns:
        return text
    out = ""
    for ch in text:
        if width(out + ch) > columns - 1:
            break
        out += ch
    return out + "…"
