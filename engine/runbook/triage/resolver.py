"""The failure classes a triage entry point leads to: taxonomy ids of the reachable conclusions.

From the entry step, every branch and default is followed (into other runbooks too);
the conclusions found are listed by how much their text has in common with the matched
log lines, then nearest first. Steps that read a log with named
patterns are replayed against the log that was triaged: a branch that reads only
`result.patterns.<name>.count` (and whether the log exists) is decided by this log, so a step that
asks "how did the job end?" leads only to the ending this log shows.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from runbook.format.model import Conclusion, Runbook, Step
from runbook.library.index import step_patterns
from runbook.library.runbooks import Library
from runbook.library.textindex import terms

PatternKey = tuple[str, str, str]  # (runbook id, step id, pattern name)
DEPTH_DISCOUNT = 0.5  # a conclusion one step farther needs this much more in common
STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is", "it",
    "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "with", "not", "no", "but",
    "if", "then", "than", "into", "after", "before", "per", "via", "all", "any", "can", "will", "may",
    "one", "two"})


def log_patterns(library: Library) -> dict[PatternKey, str]:
    """Every named pattern of every log-reading step in the library (from its index)."""
    return library.log_patterns()


class TaxonomyResolver:
    """Taxonomy ids reachable from a step, given how often each log pattern matched the log."""

    def __init__(self, library: Library, counts: Mapping[PatternKey, int]) -> None:
        self.library = library
        self.counts = counts
        self._idf: dict[str, float] | None = None

    def resolve(self, runbook: Runbook, target: str, evidence: str = "") -> list[str]:
        """Ids of the conclusions reachable from `target`, each once, best first (`ranked`)."""
        out: list[str] = []
        for _, conclusion in self.ranked(runbook, target, evidence):
            out.extend(t for t in conclusion.taxonomy if t not in out)
        return out

    def ranked(self, runbook: Runbook, target: str, evidence: str = "") -> list[tuple[str, Conclusion]]:
        """(runbook id, conclusion) of each conclusion with taxonomy ids reachable from `target`.

        Conclusions whose text shares the most (rare) words with `evidence` (the matched
        log lines) come first, nearer ones before farther ones. When replaying the log
        rules out every conclusion that carries ids, all reachable ones count: the
        signature still points there.
        """
        found = self._walk(runbook, target, replay=True) or self._walk(runbook, target, replay=False)
        words = {w for w in terms(evidence) if w not in STOP_WORDS}
        ranked = sorted(enumerate(found), key=lambda item: (
            -self._relevance(item[1][2], words) / (1 + DEPTH_DISCOUNT * item[1][0]), item[0]))
        return [(book, conclusion) for _, (_, book, conclusion) in ranked]

    def _walk(self, runbook: Runbook, target: str, replay: bool) -> list[tuple[int, str, Conclusion]]:
        """(depth, runbook id, conclusion) of each reachable conclusion with taxonomy ids,
        nearest first."""
        found: list[tuple[int, str, Conclusion]] = []
        seen: set[tuple[str, str]] = set()
        queue: deque[tuple[int, Runbook, str]] = deque([(0, runbook, target)])
        while queue:
            depth, book, node_id = queue.popleft()
            located, node_id = _locate(self.library, book, node_id)
            if located is None or (located.id, node_id) in seen:
                continue
            seen.add((located.id, node_id))
            node = located.node(node_id)
            if isinstance(node, Conclusion) and node.taxonomy:
                found.append((depth, located.id, node))
            elif isinstance(node, Step):
                queue.extend((depth + 1, located, nxt) for nxt in self._next(located, node, replay))
        return found

    def _relevance(self, conclusion: Conclusion, words: set[str]) -> float:
        """Rarity of the evidence's words found in the conclusion's text (its title counts twice)."""
        if not words:
            return 0.0
        if self._idf is None:
            self._idf = self.library.derived("triage-conclusion-idf", lambda: _idf(self.library), _is_idf)
        title, body = _words(conclusion)
        return sum(self._idf.get(w, 0.0) * (2.0 if w in title else 1.0) for w in words & (title | body))

    def _next(self, runbook: Runbook, step: Step, replay: bool) -> list[str]:
        names = step_patterns(step) if replay else {}
        targets: list[str] = []
        for branch in step.branches:
            decided = self._decide(runbook, step, branch.when, names) if names else None
            if decided is False:
                continue
            targets.append(branch.goto)
            if decided is True:
                return targets
        return targets + ([step.default] if step.default else [])

    def _decide(self, runbook: Runbook, step: Step, when: str, names: dict[str, str]) -> bool | None:
        """True/False when the condition reads only what this log already tells, else None.

        The log was read, so `result.exists` is true and `result.timed_out` false; the
        pattern counts are those of the whole log.
        """
        from runbook.format import expr

        try:
            expression = _compiled(when)
        except expr.ExprError:
            return None
        if not expression.reads or not all(_known(path, names) for path in expression.reads):
            return None
        patterns = {name: _pattern_result(self.counts.get((runbook.id, step.id, name), 0))
                    for name in names}
        result = {"exists": True, "timed_out": False, "patterns": patterns}
        try:
            return expr.truthy(expression.evaluate({"result": result}))
        except Exception:  # a condition this replay cannot answer
            return None


def _locate(library: Library, runbook: Runbook, target: str) -> tuple[Runbook | None, str]:
    """The runbook and node id a `goto` names (`step`, `other-runbook:step`, `other:start`)."""
    if ":" in target:
        rid, _, node_id = target.partition(":")
        other = library.get(rid)
        if other is None:
            return None, node_id
        return other, other.start if node_id == "start" else node_id
    return runbook, runbook.start if target == "start" and "start" not in runbook.steps else target


def _known(path: str, names: dict[str, str]) -> bool:
    """Whether replaying the log answers `path`: `result.exists`, `result.timed_out`, or a count."""
    if path in ("result.exists", "result.timed_out"):
        return True
    parts = path.split(".")
    return len(parts) >= 4 and parts[:2] == ["result", "patterns"] and parts[2] in names \
        and parts[3] == "count"


def _pattern_result(count: int) -> dict[str, Any]:
    return {"count": count, "last_line": None, "last_line_no": None, "last_groups": [],
            "last_value": None}


def _idf(library: Library) -> dict[str, float]:
    """Inverse document frequency of each word over every conclusion in the library."""
    counts: dict[str, int] = {}
    total = 0
    for runbook in library.runbooks():
        for conclusion in runbook.conclusions.values():
            total += 1
            title, body = _words(conclusion)
            for word in title | body:
                counts[word] = counts.get(word, 0) + 1
    return {word: math.log(1 + total / n) for word, n in counts.items()}


def _is_idf(value: object) -> bool:
    """Whether a value kept in the load cache is what `_idf` returns."""
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, float)
                                           for k, v in value.items())


def _words(conclusion: Conclusion) -> tuple[frozenset[str], frozenset[str]]:
    """Words of a conclusion's title and of its explanation, in both languages."""
    return (_text_words(conclusion.title.en + " " + conclusion.title.zh),
            _text_words(conclusion.explanation.en + " " + conclusion.explanation.zh))


@lru_cache(maxsize=4096)
def _text_words(text: str) -> frozenset[str]:
    return frozenset(w for w in terms(text) if len(w) > 1 and w not in STOP_WORDS)


@lru_cache(maxsize=1024)
def _compiled(source: str) -> Any:
    from runbook.format import expr

    return expr.compile_expression(source)
