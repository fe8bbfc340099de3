"""What a tool gives back before the SDK wraps it: structured content and a short text, or a
`ToolInputError` whose message is the one line an assistant reads to fix its call. The modules
that call the engine use these two, so they never import the SDK."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ToolInputError(ValueError):
    """Bad input (an unknown runbook, a bad node expression, a missing file): one line naming what
    to fix. The server answers it as an error result, never as a traceback."""


@dataclass
class Answer:
    structured: dict[str, Any]
    text: str


def one_line(text: str) -> str:
    """A message folded onto one line (a reason quoted from a file can hold newlines)."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ToolInputError(f"{name}: {value} is not between {low} and {high}")
