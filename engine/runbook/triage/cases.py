"""Known cases: public reports whose diagnosis a person labelled, and which of them a log resembles.

Signatures recognise a message they were written for; a report nobody wrote a signature for
often still looks like one somebody already diagnosed (the same stack, library, launcher and
words). `data/known_cases.json` holds the terms of the triage corpus's `dev` logs
(tests/data/triage-corpus/, each labelled with the conclusion a person wants; built by
`scripts/known_cases.py`), and a log is compared with each by the cosine of their TF-IDF
vectors. The `neighbours` nearest cases at `min_similarity` or more vote for their conclusions,
weighted by similarity (ranking.py, `evidence.case`); result.py adds the votes as `similar`
matches after what the signatures found, each naming the reports it rests on. The same log
pasted again finds its own report: a known case is recognised as such.

The corpus's `holdout` logs are never in the file: they keep measuring logs nobody has seen.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from runbook.library.runbooks import Library
from runbook.library.textindex import terms
from runbook.triage.verdict import MAX_TAXONOMY, SIMILAR, Match, confidence

SCHEMA = "runbook-known-cases/v1"
CASES_FILE = Path(__file__).resolve().parents[1] / "data" / "known_cases.json"
MAX_DIGITS = 4  # in a term compared: `h100`, `cuda12` are words, `a3f29c81d` an address


def case_terms(lines: Iterable[str]) -> Counter[str]:
    """The terms a log is compared by: its words of two characters or more that start with a
    letter and hold at most four digits (`cuda12`, `h100`, `sm_90`); numbers, versions, PIDs and
    addresses are what one log has and no other shares."""
    return Counter(t for line in lines for t in terms(line) if len(t) > 1 and _wordlike(t))


def _wordlike(term: str) -> bool:
    return not term[0].isdigit() and sum(ch.isdigit() for ch in term) <= MAX_DIGITS


@dataclass(frozen=True)
class Case:
    """One labelled report: where it was posted, the conclusions a person accepts, first the one
    wanted, and the name of its corpus entry."""

    source: str
    conclusions: tuple[str, ...]
    entry: str


@dataclass(frozen=True)
class Vote:
    """A conclusion the nearest cases name: its summed similarity and the cases, nearest first."""

    conclusion: str  # runbook:conclusion
    score: float
    cases: tuple[tuple[float, Case], ...]


class KnownCases:
    """The cases as unit-length TF-IDF vectors, in an inverted index for sparse dot products."""

    def __init__(self, cases: list[Case], counts: list[Counter[str]]) -> None:
        self.cases = cases
        self._counts = counts
        documents = Counter(term for c in counts for term in c)
        self._idf = {term: math.log(len(cases) / n) for term, n in documents.items()}
        self._postings: dict[str, list[tuple[int, float]]] = {}
        for i, count in enumerate(counts):
            for term, weight in self.vector(count).items():
                self._postings.setdefault(term, []).append((i, weight))

    @classmethod
    def empty(cls) -> KnownCases:
        return cls([], [])

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KnownCases:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"known cases: schema {data.get('schema')!r}, expected {SCHEMA}")
        items = data["cases"]
        return cls([Case(c["source"], tuple(c["conclusions"]), c["entry"]) for c in items],
                   [Counter(c["terms"]) for c in items])

    def indexed(self) -> list[tuple[Case, Counter[str]]]:
        """Each case with the terms it was indexed by."""
        return list(zip(self.cases, self._counts, strict=True))

    def without(self, source: str) -> KnownCases:
        """The same cases less those of `source` (how a benchmark judges a case's own log)."""
        kept = [i for i, case in enumerate(self.cases) if case.source != source.strip()]
        return KnownCases([self.cases[i] for i in kept], [self._counts[i] for i in kept])

    def vector(self, count: Counter[str]) -> dict[str, float]:
        """`count` weighted by (1 + log tf) * idf and scaled to unit length; a term no case has
        weighs as much as the rarest (it makes the log less like every case)."""
        rarest = math.log(len(self.cases) or 1)
        weights = {t: (1 + math.log(n)) * self._idf.get(t, rarest) for t, n in count.items()}
        weights = {t: w for t, w in weights.items() if w > 0}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        return {t: w / norm for t, w in weights.items()}

    def nearest(self, count: Counter[str], top: int, min_similarity: float) -> list[tuple[float, Case]]:
        """The `top` cases most like `count` at `min_similarity` or more, nearest first."""
        sums: dict[int, float] = {}
        for term, weight in self.vector(count).items():
            for i, theirs in self._postings.get(term, ()):
                sums[i] = sums.get(i, 0.0) + weight * theirs
        ranked = sorted(sums.items(), key=lambda item: (-item[1], item[0]))
        return [(round(s, 4), self.cases[i]) for i, s in ranked[:top] if s >= min_similarity]

    def votes(self, count: Counter[str], top: int, min_similarity: float) -> list[Vote]:
        """The conclusions the nearest cases want, by summed similarity, most first."""
        by_conclusion: dict[str, list[tuple[float, Case]]] = {}
        for similarity, case in self.nearest(count, top, min_similarity):
            if case.conclusions:
                by_conclusion.setdefault(case.conclusions[0], []).append((similarity, case))
        votes = [Vote(c, round(sum(s for s, _ in near), 4), tuple(near)) for c, near in by_conclusion.items()]
        return sorted(votes, key=lambda v: (-v.score, v.conclusion))


@cache
def shipped() -> KnownCases:
    """The cases that ship with runbook (an empty set when the file is absent)."""
    if not CASES_FILE.is_file():
        return KnownCases.empty()
    return KnownCases.from_json(json.loads(CASES_FILE.read_text(encoding="utf-8")))


def case_matches(library: Library, votes: list[Vote]) -> list[Match]:
    """The votes as `similar` matches of their conclusions (a conclusion the library no longer
    has is skipped), with the ranking's confidence."""
    total = sum(v.score for v in votes) or 1.0
    out = []
    for vote in votes:
        runbook_id, _, conclusion_id = vote.conclusion.partition(":")
        runbook = library.get(runbook_id)
        conclusion = runbook.conclusions.get(conclusion_id) if runbook else None
        if conclusion is None:
            continue
        sure = confidence("case", {"similarity": vote.cases[0][0], "share": vote.score / total}, SIMILAR)
        out.append(Match(runbook_id, conclusion_id, conclusion_id, conclusion.title,
                         list(conclusion.taxonomy)[:MAX_TAXONOMY], SIMILAR, sure, vote.score, kind="case",
                         cases=vote.cases))
    return out
