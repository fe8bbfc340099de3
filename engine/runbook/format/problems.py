"""Problems found in a file, printed as `file:line:col: path.in.doc: message`."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DocPath = tuple[str | int, ...]


def format_path(path: DocPath) -> str:
    """`("steps", "gpu", "branches", 1, "goto")` -> `steps.gpu.branches[1].goto`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(document)"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    column: int
    path: DocPath
    message: str
    severity: str = "error"  # error | warning

    def __str__(self) -> str:
        tag = "" if self.severity == "error" else "warning: "
        return f"{self.file}:{self.line}:{self.column}: {format_path(self.path)}: {tag}{self.message}"


def errors(problems: Sequence[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]
