"""A small BM25 index over English and Chinese text, with weighted fields.

Chinese has no spaces between words, so CJK text is indexed as character bigrams
(and unigrams, which weigh less in a query of more than one character); Latin text as
lowercased words, with hyphenated words kept whole as well as split (`nvidia-smi`
is `nvidia-smi`, `nvidia` and `smi`) and a plural `s` dropped.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # a character class's ranges (the triage page's too)
_RUNS = re.compile(rf"[{CJK}]+|[a-z0-9]+(?:[-_.][a-z0-9]+)*")
_CJK_RUN = re.compile(rf"[{CJK}]")
_SEPARATORS = re.compile(r"[-_.]")
UNIGRAM_QUERY_WEIGHT = 0.2  # a single character of a longer Chinese query
K1 = 1.2
B = 0.75


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def terms(text: str) -> list[str]:
    """Index terms of `text`: words, and CJK unigrams and bigrams."""
    out: list[str] = []
    for run in _RUNS.findall(text.lower()):
        if run[0] > "z":  # a CJK run: the other kind starts with [a-z0-9]
            out.extend(run)
            out.extend(run[i:i + 2] for i in range(len(run) - 1))
        else:
            out.extend(_word_terms(run))
    return out


@functools.lru_cache(maxsize=1 << 16)
def _word_terms(word: str) -> tuple[str, ...]:
    # Cached: a library or a log repeats its words many times.
    parts = _SEPARATORS.split(word)
    if len(parts) == 1:
        return (_stem(word),)
    return (_stem(word), *(_stem(p) for p in parts if p))


def query_terms(text: str) -> dict[str, float]:
    """Terms of a query with their weights: CJK single characters count little next to bigrams."""
    found = terms(text)
    bigrams = {t for t in found if len(t) == 2 and _CJK_RUN.match(t)}
    weights: dict[str, float] = {}
    for term in found:
        single_cjk = len(term) == 1 and _CJK_RUN.match(term) is not None
        weight = UNIGRAM_QUERY_WEIGHT if single_cjk and any(term in b for b in bigrams) else 1.0
        weights[term] = max(weights.get(term, 0.0), weight)
    return weights


@dataclass
class Index:
    """BM25 per field, weighted and summed: documents are made of named fields.

    Each field is length-normalised on its own, so a word in a short title counts fully
    however long the rest of the document is, and on top of what the body adds.
    """

    weights: dict[str, float]  # field name -> weight
    docs: list[dict[str, Counter[str]]] = field(default_factory=list)
    lengths: list[dict[str, int]] = field(default_factory=list)
    df: Counter[str] = field(default_factory=Counter)
    totals: Counter[str] = field(default_factory=Counter)  # field name -> summed length

    def add(self, fields: Iterable[tuple[str, str]]) -> int:
        """Add a document given as (field name, text) pairs; returns its number."""
        doc: dict[str, Counter[str]] = {}
        for name, text in fields:
            doc.setdefault(name, Counter()).update(terms(text))
        lengths = {name: sum(counts.values()) for name, counts in doc.items()}
        self.docs.append(doc)
        self.lengths.append(lengths)
        self.totals.update(lengths)
        self.df.update({term for counts in doc.values() for term in counts})
        return len(self.docs) - 1

    def idf(self, term: str) -> float:
        """Inverse document frequency of `term` (0 when no document has it)."""
        df = self.df.get(term, 0)
        return math.log(1 + len(self.docs) / df) if df else 0.0  # never 0 for a word all share

    def scores(self, query: dict[str, float]) -> list[float]:
        """Score of every document: per field BM25, weighted by the field's weight, summed."""
        n = len(self.docs)
        average = {name: total / n for name, total in self.totals.items()} if n else {}
        out = [0.0] * n
        for term, weight in query.items():
            idf = self.idf(term)
            if not idf:
                continue
            for i, doc in enumerate(self.docs):
                for name, counts in doc.items():
                    tf = counts.get(term)
                    if tf:
                        norm = K1 * (1 - B + B * self.lengths[i][name] / (average.get(name) or 1.0))
                        out[i] += weight * self.weights.get(name, 1.0) * idf * tf * (K1 + 1) / (tf + norm)
        return out
