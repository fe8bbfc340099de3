"""`runbook triage`: scanning logs for the `signatures` runbooks declare.

Logs are read once, as streams, in blocks of lines, so logs of any size are scanned in
constant memory (per signature and file only the first and last few matched lines are
kept). Each block is normalised (lognorm.py); lines that differ only in their digits (step,
loss and timing lines, most of any training log) are grouped, and a regex that treats all
digits alike runs once per group (regexinfo.py); a regex whose required text is absent from
the block does not run at all. The regexes run on RE2 (format/patterns.py): each search
takes time linear in the block, whatever a contributed pattern looks like.

What the scan found becomes a ranked list of failures in verdict.py.
"""

from __future__ import annotations

import bisect
import warnings
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from runbook.format.model import Signature
from runbook.format.patterns import LinearRegex, PatternError, compile_linear
from runbook.library.runbooks import Library
from runbook.triage.advice_rules import ADVICE
from runbook.triage.errorlines import ErrorLines, may_hold_error
from runbook.triage.hits import STDIN, LineHit, SignatureHit
from runbook.triage.lognorm import ANSI, join_wrapped, normalize_block
from runbook.triage.readings.releases import Releases
from runbook.triage.readings.series import Series
from runbook.triage.readings.spread import Spread, may_state_facts
from runbook.triage.readings.stacks import Stacks
from runbook.triage.regexinfo import (
    NeedleIndex,
    Needs,
    digit_uniform,
    mask_digits,
    may_match,
    required_text,
)
from runbook.triage.resolver import PatternKey, log_patterns
from runbook.triage.score import is_generic, kept_lines, specificity
from runbook.triage.sources import Source, line_rank, line_time
from runbook.triage.verdict import Match, kept_texts, rank

BLOCK_LINES = 4096
BLOCK_CHARS = 1 << 19
TIME_LOOKBACK = 20  # lines above a matched line searched for a timestamp
TEXT_MAX = 240  # characters of a matched line shown
FULL_MAX = 4096  # characters of a long matched line kept for its facts (an OOM message is ~600)


@dataclass(frozen=True)
class _Compiled:
    """A signature as the scanner holds it: its runbook and what one match of it weighs."""

    n: int  # its place in the library's signatures: a key that stays put
    runbook: str
    signature: Signature
    weight: float
    generic: bool


@dataclass
class _Pattern:
    """One distinct regex and everything that wants to know where it matched."""

    regex: LinearRegex
    needs: list[Needs]  # what a matching line must contain (lowercased, digits as 0)
    uniform: bool  # digits all alike to it: one match per group of lines
    signatures: list[_Compiled] = field(default_factory=list)
    keys: list[PatternKey] = field(default_factory=list)  # log-check step patterns


class _Joined:
    """Lines joined by newlines as UTF-8 bytes, and where each line starts: what RE2 searches."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.data = "\n".join(lines).encode("utf-8", "replace")
        self.starts = [0]
        at = self.data.find(b"\n")
        while at >= 0:
            self.starts.append(at + 1)
            at = self.data.find(b"\n", at + 1)

    def search_lines(self, regex: LinearRegex) -> list[tuple[int, int]]:
        """(line index, byte offset of the match in the line) of each line that matches."""
        found: list[tuple[int, int]] = []
        pos = 0
        while pos <= len(self.data):
            hit = regex.search(self.data, pos)
            if hit is None:
                break
            index = bisect.bisect_right(self.starts, hit[0]) - 1
            found.append((index, hit[0] - self.starts[index]))
            if index + 1 >= len(self.starts):
                break
            pos = self.starts[index + 1]
        return found


@dataclass
class _Block:
    """Normalised lines of one block, grouped by their text with every digit turned into 0."""

    lines: list[str]
    groups: list[tuple[str, list[int]]]  # (masked line, indices of its lines)
    lowered: str  # every distinct masked line, lowercased: what the block may contain
    _plain: _Joined | None = None
    _masked: _Joined | None = None

    @classmethod
    def of(cls, texts: list[str]) -> _Block:
        normalised = normalize_block("\n".join(texts))
        by_text: dict[str, list[int]] = {}
        for index, masked in enumerate(mask_digits(normalised).split("\n")):
            by_text.setdefault(masked, []).append(index)
        return cls(normalised.split("\n"), list(by_text.items()), "\n".join(by_text).lower())

    def find(self, pattern: _Pattern) -> list[tuple[int, int]]:
        """(line index, byte offset in the line) of each line of the block the regex matches."""
        if pattern.uniform:  # lines that differ only in digits match alike: search one of each
            if self._masked is None:
                self._masked = _Joined(masked for masked, _ in self.groups)
            return sorted((i, start) for group, start in self._masked.search_lines(pattern.regex)
                          for i in self.groups[group][1])
        if self._plain is None:
            self._plain = _Joined(self.lines)
        return self._plain.search_lines(pattern.regex)


PatternFacts = tuple[list[Needs], bool, float, bool]  # required text, digit-uniform, weight, generic


def _facts(source: str) -> PatternFacts:
    return required_text(source), digit_uniform(source), specificity(source), is_generic(source)


def _pattern_facts(sources: list[str]) -> dict[str, PatternFacts]:
    return {source: _facts(source) for source in set(sources) if isinstance(source, str)}


def _are_facts(value: object) -> bool:
    """A cached value of the shape _pattern_facts writes (anything else is computed again)."""
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, tuple) and len(v) == 4 for k, v in value.items())


class Triage:
    """Scans logs for every runbook's signatures; verdict.py ranks what it found."""

    def __init__(self, library: Library, on_warning: Callable[[str], None] | None = None) -> None:
        self.library = library
        self.lines = 0  # of the file being fed
        self.total_lines = 0
        self.sources: list[Source] = []
        self._warn = on_warning or (lambda message: warnings.warn(message, stacklevel=3))
        self._patterns: dict[str, _Pattern] = {}
        self._hits: dict[tuple[int, Source], SignatureHit] = {}
        self.counts: dict[PatternKey, int] = {}
        self.errors = ErrorLines()
        self.tail: deque[str] = deque(maxlen=ADVICE["tail_lines"])  # what advice.py reads
        # the same lines as written: a launcher's prefix (Ray's `(LLMRayActor pid=...)`) is gone
        # from `tail`, but it names what ran (logends.py: an RL job's actors)
        self.raw_tail: deque[str] = deque(maxlen=ADVICE["tail_lines"])
        self.spread = Spread()  # versions and settings per host or rank, compared at the end
        self.series = Series()  # metric values per rank, read at the end (series.py)
        self.stacks = Stacks()  # the threads of pasted stack dumps (stacks.py)
        self.releases = Releases()  # the NCCL versions the logs state (releases.py)
        self._source = STDIN
        self._compile()

    def _compile(self) -> None:
        signatures = list(self.library.signatures())  # from the index: nothing loaded
        steps = log_patterns(self.library)
        # What each regex requires and weighs comes from its parse tree: derived once per
        # library content and kept in the load cache, so a warm triage parses no regex again.
        facts = self.library.derived("triage-pattern-facts", lambda: _pattern_facts(
            [s.pattern for _, _, s in signatures] + list(steps.values())), _are_facts)
        n = 0
        for runbook_id, file, signature in signatures:
            pattern = self._pattern(signature.pattern, f"{file}: signature", facts)
            if pattern is not None:
                _, _, weight, generic = facts.get(signature.pattern) or _facts(signature.pattern)
                pattern.signatures.append(_Compiled(n, runbook_id, signature, weight, generic))
                n += 1
        for key, source in steps.items():
            pattern = self._pattern(source, None, facts)
            if pattern is not None:
                pattern.keys.append(key)
        self._ordered = list(self._patterns.values())
        self._needles = NeedleIndex.build([p.needs for p in self._ordered])

    def _pattern(self, source: str, where: str | None, facts: dict[str, PatternFacts]) -> _Pattern | None:
        if source not in self._patterns:
            try:
                regex = compile_linear(source)
            except PatternError as exc:
                if where:  # log-check patterns are the lint's business, not triage's
                    self._warn(f"{where} {source!r}: {exc}; skipped")
                return None
            needs, uniform, _, _ = facts.get(source) or _facts(source)
            self._patterns[source] = _Pattern(regex, needs, uniform)
        return self._patterns[source]

    def start(self, source: Source) -> None:
        """The lines fed from now on belong to `source` (numbered from 1 again)."""
        self._source = source
        self.sources.append(source)
        self.lines = 0
        self.series.start(source)
        self.stacks.start(source)

    def feed(self, lines: Iterable[str]) -> None:
        """Scan more lines of the current log, given without their line endings."""
        numbers: list[int] = []
        texts: list[str] = []
        size = 0
        # A newline inside a "line" would make the block's lines disagree with `numbers`.
        one_line = (line.replace("\n", " ") if "\n" in line else line for line in lines)
        for first, last, text in join_wrapped(one_line, self.lines + 1):
            numbers.append(first)
            texts.append(text)
            self.total_lines += last - self.lines
            self.lines = last
            size += len(text)
            if len(texts) >= BLOCK_LINES or size >= BLOCK_CHARS:
                self._scan(numbers, texts)
                numbers, texts, size = [], [], 0
        if texts:
            self._scan(numbers, texts)

    def _scan(self, numbers: list[int], texts: list[str]) -> None:
        block = _Block.of(texts)
        self.tail.extend(block.lines[-ADVICE["tail_lines"]:])
        self.raw_tail.extend(texts[-ADVICE["tail_lines"]:])
        self._see_errors(numbers, texts, block)
        if may_state_facts(block.lowered):
            for number, raw, line in zip(numbers, texts, block.lines, strict=True):
                self.spread.see(raw, line, self._source, number)
        self.series.block(numbers, texts, block.lines, block.lowered)
        self.stacks.block(numbers, texts, block.lines, block.lowered, self._source)
        self.releases.block(block.lines, block.lowered)
        times: dict[int, str | None] = {}  # each line's own timestamp, read once per block
        for pattern in self._candidates(block.lowered):
            found = block.find(pattern)
            if not found:
                continue
            for key in pattern.keys:
                self.counts[key] = self.counts.get(key, 0) + len(found)
            if pattern.signatures:
                kept = kept_lines()
                keep = found[:kept] + found[max(kept, len(found) - kept):]
                shown = [self._line_hit(numbers[i], texts[i], block.lines[i], start,
                                        _time_above(texts, i, times)) for i, start in keep]
                for compiled in pattern.signatures:
                    self._record(compiled, len(found), shown)

    def _candidates(self, lowered: str) -> list[_Pattern]:
        """The patterns whose required text the block holds (regexinfo.may_match), in order."""
        if self._needles is None:
            return [p for p in self._ordered if may_match(p.needs, lowered)]
        return [self._ordered[i] for i in self._needles.candidates(lowered)]

    def _see_errors(self, numbers: list[int], texts: list[str], block: _Block) -> None:
        """Keep the block's last error lines (one line of each group of lines alike)."""
        if not may_hold_error(block.lowered):
            return
        lowered = block.lowered.split("\n")
        last = sorted(indices[-1] for (_, indices), low in zip(block.groups, lowered, strict=True)
                      if may_hold_error(low))
        for i in last:
            self.errors.see(block.lines[i], self._line_hit(numbers[i], texts[i], block.lines[i], 0,
                                                           line_time(texts[i])))

    def _line_hit(self, number: int, raw: str, line: str, start: int, time: str | None) -> LineHit:
        rank = line_rank(raw)
        return LineHit(number, _shown(raw, line, start), self._source,
                       rank if rank is not None else self._source.rank, time,
                       line[:FULL_MAX] if len(raw) > TEXT_MAX else "")

    def _record(self, compiled: _Compiled, count: int, shown: list[LineHit]) -> None:
        key = (compiled.n, self._source)
        hit = self._hits.get(key)
        if hit is None:
            hit = self._hits[key] = SignatureHit(compiled.runbook, compiled.signature, compiled.weight,
                                                 compiled.generic, self._source)
        hit.count += count
        kept = kept_lines()
        for line in shown:
            if len(hit.first) < kept and (not hit.first or hit.first[-1].line_no < line.line_no):
                hit.first.append(line)
            if not hit.last or hit.last[-1].line_no < line.line_no:
                hit.last.append(line)

    def hits(self) -> list[SignatureHit]:
        """Every signature that matched, per file, in the order the files were read."""
        return list(self._hits.values())

    def matches(self) -> list[Match]:
        """The failures the logs show, ranked (verdict.rank), with the release bugs the stated
        versions and the excerpt's lines show (releases.py)."""
        hits = self.hits()
        kept = [h.whole for kind in (self.errors.exceptions, self.errors.errors, self.errors.tracebacks)
                for h in kind]
        kept += kept_texts(hits)
        return rank(self.library, hits, self.counts, self.releases.bugs([*self.tail, *kept]))


def triage(lines: Iterable[str], library: Library,
           on_warning: Callable[[str], None] | None = None) -> list[Match]:
    """The failures `lines` show, ranked."""
    scanner = Triage(library, on_warning)
    scanner.feed(line.rstrip("\r\n") for line in lines)
    return scanner.matches()


def _shown(raw: str, line: str, start: int) -> str:
    """The line as logged; when long, its prefix (rank, time) and the part around the match."""
    if "\x1b" in raw:
        raw = ANSI.sub("", raw)
    if len(raw) <= TEXT_MAX:
        return raw
    start = len(line.encode("utf-8")[:start].decode("utf-8", "ignore"))  # bytes -> characters
    prefix = raw[: max(0, min(len(raw) - len(line), 60))] if raw.endswith(line) else ""
    begin = max(0, start - 60)
    piece = line[begin:begin + TEXT_MAX]
    return prefix + ("…" if begin else "") + piece + ("…" if begin + TEXT_MAX < len(line) else "")


def _time_above(texts: list[str], index: int, times: dict[int, str | None]) -> str | None:
    """A matched line's time: its own timestamp or, for a line without one (a traceback's last
    line), the nearest one in the TIME_LOOKBACK lines above it in the block."""
    for i in range(index, max(-1, index - TIME_LOOKBACK - 1), -1):
        if i not in times:
            times[i] = line_time(texts[i])
        if times[i] is not None:
            return times[i]
    return None
