"""Never an empty answer: when triage names no cause, say what the excerpt lacks, what to
collect next (with the exact commands), and, when no line reads as an error at all, which
conclusions the excerpt resembles and why. The rules are data (advice_rules.py), shared with
the site's triage page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from runbook.format.model import Text
from runbook.triage.advice_rules import ADVICE

ADVISED_VERDICTS = ("no-error", "similar")  # a cause or a knock-on needs no advice


@dataclass(frozen=True)
class Closest:
    """A conclusion the excerpt resembles (no signature matched, no error line)."""

    runbook: str
    conclusion: str
    title: Text
    taxonomy: list[str]
    shared: list[str]  # the words they share, rarest first: why it was offered

    def to_json(self, lang: str) -> dict[str, Any]:
        return {"runbook": self.runbook, "conclusion": self.conclusion, "title": self.title.get(lang),
                "taxonomy": self.taxonomy, "shared_words": self.shared}


@dataclass
class Advice:
    shape: str  # the id of the shape that describes the excerpt
    closest: list[Closest] = field(default_factory=list)

    def lacks(self, lang: str) -> str:
        return _shape(self.shape)["text"][lang]

    def collect(self) -> list[dict[str, Any]]:
        return [{"id": key, **ADVICE["collect"][key]} for key in _shape(self.shape)["collect"]]

    def to_json(self, lang: str) -> dict[str, Any]:
        return {"shape": self.shape, "lacks": self.lacks(lang),
                "collect": [{"id": c["id"], "command": c["command"], "instead": c.get("instead"),
                             "why": c["why"][lang]} for c in self.collect()],
                "closest": [c.to_json(lang) for c in self.closest]}


def shape_of(tail: Iterable[str], verdict: str) -> str:
    """The first shape (advice_rules.py) whose test holds on the excerpt's last lines."""
    return _shape_of([line for line in tail if line.strip()], verdict)


def _shape_of(lines: list[str], verdict: str) -> str:
    for shape in ADVICE["shapes"]:
        if _holds(shape, lines, verdict):
            return str(shape["id"])
    raise AssertionError("advice_rules.py: the last shape must be `always`")


def advise(tail: Iterable[str], verdict: str, resembling: Any = None) -> Advice | None:
    """Advice for a triage whose verdict names no cause; None when it named one.

    `resembling(text, top, why_words)`: fallback.SimilarityIndex.resembling, asked only when no
    line reads as an error (a `similar` verdict already lists what the error line resembles).
    """
    if verdict not in ADVISED_VERDICTS:
        return None
    lines = [line for line in tail if line.strip()]
    advice = Advice(_shape_of(lines, verdict))
    rules = ADVICE["closest"]
    if verdict == "no-error" and resembling is not None and lines:
        query = "\n".join(lines[-rules["query_lines"]:])
        advice.closest = [Closest(*found) for found in resembling(query, rules["top"], rules["why_words"])]
    return advice


def _shape(shape_id: str) -> dict[str, Any]:
    return next(s for s in ADVICE["shapes"] if s["id"] == shape_id)


def _holds(shape: dict[str, Any], lines: list[str], verdict: str) -> bool:
    test = shape["test"]
    if test == "always":
        return True
    if test == "none":
        return not lines
    if test == "verdict":
        return verdict == shape["verdict"]
    if not lines:
        return False
    pattern = re.compile(shape["pattern"])
    if test == "last":
        return pattern.search(lines[-1]) is not None
    if test == "any":
        return any(pattern.search(line) for line in lines)
    if test == "share":
        return sum(1 for line in lines if pattern.search(line)) >= shape["share"] * len(lines)
    raise ValueError(f"advice_rules.py: shape {shape['id']}: unknown test {test!r}")
