"""What a scan found: matched lines and, per signature and file, how often and where."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from runbook.format.model import Signature
from runbook.triage.score import kept_lines
from runbook.triage.sources import Source

STDIN = Source("<stdin>")


@dataclass(frozen=True)
class LineHit:
    """One matched line: its file, its number there (from 1), its text, rank and time."""

    line_no: int
    text: str
    source: Source = STDIN
    rank: int | None = None
    time: str | None = None
    full: str = ""  # the whole line (up to FULL_MAX) when `text` is cut for display: its facts

    @property
    def whole(self) -> str:
        """The line as far as it was kept: what message facts are read from."""
        return self.full or self.text

    @property
    def where(self) -> str:
        """`file:line` for a person."""
        return f"{self.source.path}:{self.line_no}"


@dataclass
class SignatureHit:
    """What one signature of one runbook matched in one log file."""

    runbook: str
    signature: Signature
    weight: float
    generic: bool
    source: Source = STDIN
    count: int = 0
    first: list[LineHit] = field(default_factory=list)
    last: deque[LineHit] = field(default_factory=lambda: deque(maxlen=kept_lines()))

    @property
    def pattern(self) -> str:
        return self.signature.pattern

    @property
    def first_line(self) -> int:
        return self.first[0].line_no if self.first else 0

    @property
    def last_line(self) -> int:
        return self.last[-1].line_no if self.last else 0

    def lines(self) -> list[LineHit]:
        """The first and last matched lines, each once, in log order."""
        seen = {hit.line_no for hit in self.first}
        return self.first + [hit for hit in self.last if hit.line_no not in seen]
