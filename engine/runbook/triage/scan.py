"""`runbook triage`: which runbooks a log points to, from the `signatures` runbooks declare.

The log is read once, as a stream, in blocks of lines, so a log of any size is scanned
in constant memory (per signature only the first and last few matched lines are kept).
Each block is normalised (lognorm.py); lines that differ only in their digits (step,
loss and timing lines, most of any training log) are grouped, and a regex that treats
all digits alike runs once per group (regexinfo.py); a regex whose required text is
absent from the block does not run at all. Runbooks are ranked by the signatures they
matched (score.py) and name the failure classes their entry step leads to
(resolver.py).
"""

from __future__ import annotations

import re
import warnings
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from runbook.library.runbooks import Library
from runbook.triage.lognorm import ANSI, join_wrapped, normalize_block
from runbook.triage.regexinfo import Needs, digit_uniform, mask_digits, may_match, required_text
from runbook.triage.resolver import PatternKey, TaxonomyResolver, log_patterns
from runbook.triage.score import KEEP_LINES, count_factor, is_generic, recency_factor, specificity

SCHEMA = "runbook-triage/v1"
BLOCK_LINES = 4096
BLOCK_CHARS = 1 << 19
TEXT_MAX = 240  # characters of a matched line shown
MATCH_LINES = 10  # matched lines shown per runbook


@dataclass(frozen=True)
class LineHit:
    """One matched line: its number in the log (from 1) and its text."""

    line_no: int
    text: str


@dataclass
class SignatureHit:
    """What one signature of one runbook matched in the log."""

    runbook: str
    pattern: str
    goto: str | None
    weight: float
    generic: bool
    count: int = 0
    first: list[LineHit] = field(default_factory=list)
    last: deque[LineHit] = field(default_factory=lambda: deque(maxlen=KEEP_LINES))
    score: float = 0.0

    @property
    def last_line(self) -> int:
        return self.last[-1].line_no if self.last else 0

    def lines(self) -> list[LineHit]:
        """The first and last matched lines, each once, in log order."""
        seen = {hit.line_no for hit in self.first}
        return self.first + [hit for hit in self.last if hit.line_no not in seen]


@dataclass
class Match:
    """A runbook the log points to: where to enter it, what it concludes, and why."""

    runbook: str
    entry: str
    taxonomy: list[str]
    score: float
    signatures: list[SignatureHit]  # best first

    def lines(self, limit: int = MATCH_LINES) -> list[LineHit]:
        """Matched lines of all its signatures in log order; the first 3 and the last ones."""
        by_number = {hit.line_no: hit for sig in self.signatures for hit in sig.lines()}
        ordered = [by_number[n] for n in sorted(by_number)]
        return ordered if len(ordered) <= limit else ordered[:3] + ordered[3 - limit:]

    def why(self, lang: str = "en") -> str:
        """One line saying what matched, in `lang`."""
        best = self.signatures[0]
        pattern = best.pattern if len(best.pattern) <= 60 else best.pattern[:57] + "..."
        more = len(self.signatures) - 1
        if lang == "zh":
            where = (f"最后一处在第 {best.last_line} 行" if best.count > 1 else f"第 {best.last_line} 行")
            text = f"{best.count} 行匹配 '{pattern}'（{where}）"
            return text + (f"；另有 {more} 个特征匹配" if more else "")
        if best.count > 1:
            text = f"{best.count} lines match '{pattern}' (last at line {best.last_line})"
        else:
            text = f"1 line matches '{pattern}' (line {best.last_line})"
        return text + (f"; {more} more signature{'s' if more > 1 else ''} match" if more else "")

    def to_json(self, lang: str = "en") -> dict[str, Any]:
        return {
            "runbook": self.runbook, "entry": self.entry, "taxonomy": self.taxonomy,
            "score": round(self.score, 2), "why": self.why(lang),
            "lines": [{"line_no": h.line_no, "text": h.text} for h in self.lines()],
            "signatures": [{"pattern": s.pattern, "goto": s.goto, "count": s.count,
                            "last_line": s.last_line, "score": round(s.score, 2)}
                           for s in self.signatures],
        }


@dataclass
class _Pattern:
    """One distinct regex and everything that wants to know where it matched."""

    regex: re.Pattern[str]
    needs: list[Needs]  # what a matching line must contain (lowercased, digits as 0)
    uniform: bool  # digits all alike to it: one match per group of lines
    hits: list[SignatureHit] = field(default_factory=list)
    keys: list[PatternKey] = field(default_factory=list)  # log-check step patterns


@dataclass
class _Block:
    """Normalised lines of one block, grouped by their text with every digit turned into 0."""

    lines: list[str]
    groups: list[tuple[str, str, list[int]]]  # (masked line, lowercased, indices of its lines)
    lowered: str  # every distinct masked line, lowercased: what the block may contain

    @classmethod
    def of(cls, texts: list[str]) -> _Block:
        normalised = normalize_block("\n".join(texts))
        by_text: dict[str, list[int]] = {}
        for index, masked in enumerate(mask_digits(normalised).split("\n")):
            by_text.setdefault(masked, []).append(index)
        lowered = "\n".join(by_text).lower()
        groups = [(masked, low, indices)
                  for (masked, indices), low in zip(by_text.items(), lowered.split("\n"), strict=True)]
        return cls(normalised.split("\n"), groups, lowered)


class Triage:
    """Scans a log for every runbook's signatures, then ranks the runbooks that matched."""

    def __init__(self, library: Library, on_warning: Callable[[str], None] | None = None) -> None:
        self.library = library
        self.lines = 0
        self._warn = on_warning or (lambda message: warnings.warn(message, stacklevel=3))
        self._patterns: dict[str, _Pattern] = {}
        self._hits: list[SignatureHit] = []
        self._counts: dict[PatternKey, int] = {}
        self._compile()

    def _compile(self) -> None:
        for runbook in self.library.runbooks():
            for signature in runbook.signatures:
                pattern = self._pattern(signature.pattern, f"{runbook.path}: signature")
                if pattern is not None:
                    hit = SignatureHit(runbook.id, signature.pattern, signature.goto,
                                       specificity(pattern.regex), is_generic(pattern.regex))
                    pattern.hits.append(hit)
                    self._hits.append(hit)
        for key, source in log_patterns(self.library).items():
            pattern = self._pattern(source, None)
            if pattern is not None:
                pattern.keys.append(key)

    def _pattern(self, source: str, where: str | None) -> _Pattern | None:
        if source not in self._patterns:
            try:
                self._patterns[source] = _Pattern(re.compile(source, re.MULTILINE),
                                                  required_text(source), digit_uniform(source))
            except (re.error, OverflowError, RecursionError) as exc:
                if where:  # log-check patterns are the lint's business, not triage's
                    self._warn(f"{where} {source!r} is not a valid regex ({exc}); skipped")
                return None
        return self._patterns[source]

    def feed(self, lines: Iterable[str]) -> None:
        """Scan more lines of the log, given without their line endings."""
        numbers: list[int] = []
        texts: list[str] = []
        size = 0
        # A newline inside a "line" would make the block's lines disagree with `numbers`.
        one_line = (line.replace("\n", " ") if "\n" in line else line for line in lines)
        for first, last, text in join_wrapped(one_line, self.lines + 1):
            numbers.append(first)
            texts.append(text)
            self.lines = last
            size += len(text)
            if len(texts) >= BLOCK_LINES or size >= BLOCK_CHARS:
                self._scan(numbers, texts)
                numbers, texts, size = [], [], 0
        if texts:
            self._scan(numbers, texts)

    def _scan(self, numbers: list[int], texts: list[str]) -> None:
        block = _Block.of(texts)
        for pattern in self._patterns.values():
            if not may_match(pattern.needs, block.lowered):
                continue
            found = _find(pattern, block)
            if not found:
                continue
            for key in pattern.keys:
                self._counts[key] = self._counts.get(key, 0) + len(found)
            if pattern.hits:
                keep = found[:KEEP_LINES] + found[max(KEEP_LINES, len(found) - KEEP_LINES):]
                shown = [LineHit(numbers[i], _shown(texts[i], block.lines[i], start)) for i, start in keep]
                for hit in pattern.hits:
                    _record(hit, len(found), shown)

    def matches(self) -> list[Match]:
        """Runbooks that matched, best first."""
        matched = [hit for hit in self._hits if hit.count]
        latest = sorted({hit.last_line for hit in matched if not hit.generic}, reverse=True)
        rank = {line: i for i, line in enumerate(latest)}
        for hit in matched:
            recency = 1.0 if hit.generic else recency_factor(rank[hit.last_line])
            hit.score = hit.weight * count_factor(hit.count) * recency
        by_runbook: dict[str, list[SignatureHit]] = {}
        for hit in matched:
            by_runbook.setdefault(hit.runbook, []).append(hit)
        resolver = TaxonomyResolver(self.library, self._counts)
        out = [self._match(rid, hits, resolver) for rid, hits in by_runbook.items()]
        out.sort(key=lambda m: (-m.score, -m.signatures[0].last_line, m.runbook))
        return out

    def _match(self, runbook_id: str, hits: list[SignatureHit], resolver: TaxonomyResolver) -> Match:
        runbook = self.library.get(runbook_id)
        assert runbook is not None
        hits.sort(key=lambda h: (-h.score, -h.last_line))
        evidence = " ".join(line.text for hit in hits for line in hit.lines())
        taxonomy: list[str] = []
        for hit in hits:
            for tid in resolver.resolve(runbook, hit.goto or runbook.start, evidence):
                if tid not in taxonomy:
                    taxonomy.append(tid)
        return Match(runbook_id, hits[0].goto or runbook.start, taxonomy,
                     sum(h.score for h in hits), hits)


def triage(lines: Iterable[str], library: Library,
           on_warning: Callable[[str], None] | None = None) -> list[Match]:
    """Runbooks whose signatures match `lines`, best first."""
    scanner = Triage(library, on_warning)
    scanner.feed(line.rstrip("\r\n") for line in lines)
    return scanner.matches()


def _find(pattern: _Pattern, block: _Block) -> list[tuple[int, int]]:
    """(line index, match start in the line) of each line of the block the regex matches."""
    found: list[tuple[int, int]] = []
    for masked, lowered, indices in block.groups:
        if not may_match(pattern.needs, lowered):
            continue
        if pattern.uniform:  # lines that differ only in digits match alike: search one
            m = pattern.regex.search(masked)
            if m:
                found.extend((i, m.start()) for i in indices)
            continue
        for i in indices:
            m = pattern.regex.search(block.lines[i])
            if m:
                found.append((i, m.start()))
    return sorted(found)


def _shown(raw: str, line: str, start: int) -> str:
    """The line as logged; when long, its prefix (rank, time) and the part around the match."""
    if "\x1b" in raw:
        raw = ANSI.sub("", raw)
    if len(raw) <= TEXT_MAX:
        return raw
    prefix = raw[: max(0, min(len(raw) - len(line), 60))] if raw.endswith(line) else ""
    begin = max(0, start - 60)
    piece = line[begin:begin + TEXT_MAX]
    return prefix + ("…" if begin else "") + piece + ("…" if begin + TEXT_MAX < len(line) else "")


def _record(hit: SignatureHit, count: int, shown: list[LineHit]) -> None:
    hit.count += count
    for line in shown:
        if len(hit.first) < KEEP_LINES and (not hit.first or hit.first[-1].line_no < line.line_no):
            hit.first.append(line)
        if not hit.last or hit.last[-1].line_no < line.line_no:
            hit.last.append(line)
