"""One triage of one or many logs: read them, rank what they show, say it in one sentence.

The verdict is one of:

- `cause`: a root cause matched; the summary names it, with its file, rank, host and time,
  and the knock-ons elsewhere that follow from it;
- `knock-on`: only consequences matched (timeouts, peers gone); the cause is earlier in the
  log or on another rank, and `training-hang` / `ddp-errors` find it on the nodes;
- `similar`: the logs hold errors no signature knows; the matches are what they resemble;
- `no-error`: no signature matched and no line reads as an error.

A `similar` or `no-error` triage also carries advice (advice.py): what the excerpt lacks, what
to collect next, and, with no error line, the conclusions the excerpt resembles.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from runbook.library.kb import KnowledgeBase
from runbook.library.runbooks import Library
from runbook.triage.advice import Advice, advise, shape_of
from runbook.triage.cases import KnownCases, case_matches, case_terms, shipped
from runbook.triage.fallback import SimilarityIndex, articles_of
from runbook.triage.hits import LineHit
from runbook.triage.logstream import LogShape, open_log, read_lines
from runbook.triage.ordering import role_rank
from runbook.triage.ranking import RANKING
from runbook.triage.readings import logends, topology
from runbook.triage.readings.series import describe as describe_numbers
from runbook.triage.readings.series import describe_reading
from runbook.triage.readings.spread import as_readings, describe
from runbook.triage.scan import Triage
from runbook.triage.sources import Source
from runbook.triage.verdict import KNOCK_ON, SIMILAR, Match, from_readings, healthy, order

SCHEMA = "runbook-triage/v1"
NEXT_RUNBOOKS = ("training-hang", "ddp-errors")  # where to look for a cause the logs don't show


@dataclass
class TriageResult:
    """What `runbook triage` found in its logs."""

    sources: list[Source]
    lines: int
    matches: list[Match]
    verdict: str
    notes: list[str] = field(default_factory=list)
    advice: Advice | None = None  # when the verdict names no cause
    differences: list[dict[str, Any]] = field(default_factory=list)  # spread.py: across hosts/ranks
    readings: list[dict[str, Any]] = field(default_factory=list)  # stacks.py, series.py: dumps, numbers
    error_line: LineHit | None = None  # the line compared for similarity (errorlines.query_line)
    terms: Counter[str] = field(default_factory=Counter)  # what it was compared with known cases by

    def summary(self, lang: str = "en") -> str:
        """One or two sentences for a person: what failed, where, and what followed."""
        zh = lang == "zh"
        if self.verdict == "no-error" and (self.differences or self.readings):
            said = ([describe(self.differences, lang)] if self.differences else []) + (
                [describe_numbers(self.readings, lang)] if self.readings else [])
            return ("日志中没有错误行；" if zh else "no error line; ") + ("；" if zh else "; ").join(said)
        if self.verdict == "no-error":
            return ("日志中没有错误行，也没有匹配任何特征" if zh
                    else "no error found: no line reads as an error and no signature matches")
        if self.verdict == "similar":
            line = self.matches[0].similar_to if self.matches else self.error_line
            where = line.where if line else ""
            if not self.matches:  # an error line (or a cut traceback) that resembles no conclusion
                return (f"没有已知特征匹配错误行（{where}），它也不像任何已知结论" if zh
                        else f"no known signature matches the error line ({where}), and it resembles no "
                             "known conclusion")
            return (f"没有已知特征匹配；错误行（{where}）与下面的结论相似" if zh
                    else f"no known signature matches; the error line ({where}) resembles what follows")
        first = self.matches[0]
        if self.verdict == KNOCK_ON:
            head = _describe(first, lang)
            runbooks = " / ".join(NEXT_RUNBOOKS)
            return (f"{head}；这是后果：根因更早，或在另一个 rank 上（在节点上运行 runbook run {runbooks}）"
                    if zh else f"{head}; this is a consequence: the cause is earlier, or on another rank "
                         f"(run `runbook run {'` / `'.join(NEXT_RUNBOOKS)}` on the nodes)")
        text = _describe(first, lang)
        after = next((m for m in self.matches if m.role == KNOCK_ON), None)
        if after is not None:
            text += ("；" if zh else "; ") + _following(after, lang)
        return text

    def to_json(self, lang: str = "en") -> dict[str, Any]:
        return {"schema": SCHEMA, "source": self.sources[0].path if len(self.sources) == 1 else None,
                "sources": [{"file": s.path, "host": s.host, "rank": s.rank} for s in self.sources],
                "lines": self.lines, "verdict": self.verdict, "summary": self.summary(lang),
                "notes": self.notes, "matches": [m.to_json(lang) for m in self.matches],
                "advice": self.advice.to_json(lang) if self.advice else None,
                "differences": self.differences, "readings": self.readings}


# How a source's lines are read: given its shape to fill, a context manager giving the lines.
Reader = Callable[[LogShape], AbstractContextManager[Iterator[str]]]


def triage_sources(library: Library, kb: KnowledgeBase | None, sources: list[Source],
                   on_warning: Any = None, cases: KnownCases | None = None) -> TriageResult:
    """Read every source (raises LogSourceError for one that cannot be read) and rank;
    `cases`: the known cases to compare with (the shipped ones by default)."""
    return _triage(library, kb, [(s, partial(open_log, "-" if s.path == "<stdin>" else s.path))
                                 for s in sources], on_warning, cases)


def triage_text(library: Library, kb: KnowledgeBase | None, text: str, name: str = "<pasted>",
                on_warning: Any = None, cases: KnownCases | None = None) -> TriageResult:
    """A log pasted as text (the MCP server's triage_log), read like a file's bytes."""
    raw = io.BytesIO(text.encode("utf-8"))
    return _triage(library, kb, [(Source(name), lambda shape: nullcontext(read_lines(raw, shape)))],
                   on_warning, cases)


def _triage(library: Library, kb: KnowledgeBase | None, readers: list[tuple[Source, Reader]],
            on_warning: Any, cases: KnownCases | None = None) -> TriageResult:
    scanner = Triage(library, on_warning)
    notes: list[str] = []
    binary = False
    # with several files, a file names who wrote a line
    scanner.spread.sources = scanner.series.sources = len(readers)
    for source, read in readers:
        shape = LogShape()
        scanner.start(source)
        with read(shape) as lines:
            scanner.feed(lines)
        prefix = f"{source.path}: " if len(readers) > 1 else ""
        notes.extend(prefix + note for note in shape.notes())
        binary = binary or shape.binary
    return rank_all(library, kb, scanner, [source for source, _ in readers], notes, binary, cases)


def rank_all(library: Library, kb: KnowledgeBase | None, scanner: Triage, sources: list[Source],
             notes: list[str], binary: bool = False, cases: KnownCases | None = None) -> TriageResult:
    """Rank what the scanner found; `binary`: some source looked binary (its "last line" is noise)."""
    matches = scanner.matches()
    specific = [m for m in matches if not m.generic]
    tail = list(scanner.tail)
    readings = scanner.stacks.readings() + scanner.series.readings() + topology.readings(tail)
    differences = scanner.spread.differences()
    if not (matches or readings or differences or scanner.errors.any() or binary):
        readings = logends.readings(tail, shape_of(tail, "no-error"), list(scanner.raw_tail))
    if not specific:  # what a dump, the numbers or a difference across hosts name outranks a
        read = from_readings(library, readings + as_readings(differences))  # generic line of theirs
        named = {(m.runbook, m.conclusion) for m in read}
        matches = order([*read, *(m for m in matches if (m.runbook, m.conclusion) not in named)])
        specific = read
    line = scanner.errors.query_line()
    index: SimilarityIndex | None = None
    if not specific and line is not None:
        index = SimilarityIndex(library.runbooks(), articles_of(kb))
        said = {(m.runbook, m.conclusion) for m in matches}  # a resemblance says nothing new there
        matches = [*matches, *(m for m in index.similar(line, text=scanner.errors.query_text())
                               if (m.runbook, m.conclusion) not in said)]
    verdict = _verdict(matches, line)
    if verdict == "no-error":
        matches = healthy(library, readings)  # the numbers read as well: that is the answer
        if not matches:  # else what the last lines' words resemble says nothing more
            index = index or SimilarityIndex(library.runbooks(), articles_of(kb))
    advice = advise(scanner.tail, verdict, index.resembling if index else None)
    count = case_terms(scanner.tail)  # the last lines as normalised, as the page reads them too
    if verdict != "no-error":
        matches = _with_cases(library, matches, verdict, shipped() if cases is None else cases, count)
    return TriageResult(sources, scanner.total_lines, matches, verdict, notes, advice, differences, readings,
                        line, count)


def _with_cases(library: Library, matches: list[Match], verdict: str, cases: KnownCases,
                count: Counter[str]) -> list[Match]:
    """The known cases' votes added as `similar` matches: when a signature or a reading named a
    cause or a knock-on, votes for conclusions not named yet, after its matches, as long as the
    answer is shorter than the ranking's `fill_to`; when only resemblance speaks (`similar`), the
    votes ranked together with BM25's matches (`_fused`)."""
    rules = RANKING["evidence"]["case"]
    votes = case_matches(library, cases.votes(count, rules["neighbours"], rules["min_similarity"]))
    if verdict == SIMILAR:
        return _fused(matches, votes)
    named = {f"{m.runbook}:{m.conclusion}" for m in matches}
    said_no = _refused_by_facts(named)
    new = [m for m in votes if f"{m.runbook}:{m.conclusion}" not in named | said_no][: rules["fill_to"]]
    return [*matches, *new[: max(0, rules["fill_to"] - len(matches))]]


def _refused_by_facts(named: set[str]) -> set[str]:
    """The conclusions a `refine` rule of the ranking leads to from a conclusion still named: its
    lines' facts did not move it there, so no known report's resemblance names it either."""
    return {rule["becomes"] for rule in RANKING["refine"] if rule["conclusion"] in named}


def _fused(text: list[Match], votes: list[Match]) -> list[Match]:
    """BM25's matches (`text`, best first) and the known cases' votes in one order: a vote's
    score over the best vote's, damped while its nearest report is less than `full_similarity`
    alike, plus `text_weight` times a text match's score over the best one's. A conclusion both
    name is one match: the text's, with the reports it rests on. At most as many as the two
    lists would show: BM25's `top` and `fill_to` votes."""
    rules = RANKING["evidence"]["case"]
    best_text = max((m.score for m in text), default=1.0) or 1.0
    best_vote = max((m.score for m in votes), default=1.0) or 1.0
    scored: dict[tuple[str, str, str], tuple[float, Match]] = {}
    for m in text:
        scored[(m.kind, m.runbook, m.conclusion)] = (rules["text_weight"] * m.score / best_text, m)
    for vote in votes:
        key = ("conclusion", vote.runbook, vote.conclusion)
        nearest = vote.cases[0][0] if vote.cases else 0.0
        weight = vote.score / best_vote * min(1.0, nearest / rules["full_similarity"])
        if key in scored:
            score, m = scored[key]
            scored[key] = (score + weight, replace(m, cases=vote.cases))
        else:
            scored[key] = (weight, vote)
    limit = RANKING["evidence"]["similar"]["top"] + rules["fill_to"]
    ranked = sorted(enumerate(scored.values()), key=lambda item: (-round(item[1][0], 9), item[0]))
    return [m for _, (_, m) in ranked][:limit]


def _verdict(matches: list[Match], error_line: LineHit | None) -> str:
    """The most telling role any match has (ranking.py `roles`); with none, `similar` where a line
    reads as an error (no signature knows it, and it may resemble nothing), else `no-error`."""
    return min((m.role for m in matches), key=role_rank,
               default=SIMILAR if error_line is not None else "no-error")


def _who(line: LineHit | None, lang: str) -> str:
    if line is None:
        return ""
    zh = lang == "zh"
    parts = []
    if line.rank is not None:
        parts.append(f"rank {line.rank}")
    if line.source.host:
        parts.append(f"（{line.source.host}）" if zh else f"on {line.source.host}")
    return " ".join(parts)


def _describe(match: Match, lang: str) -> str:
    if match.reading is not None:  # no line says it: the dump or the numbers do
        colon = "：" if lang == "zh" else ": "
        return f"{match.title.get(lang)}{colon}{describe_reading(match.reading, lang)}"
    first = match.first
    who = _who(first, lang)
    when = f" at {first.time}" if first and first.time and lang != "zh" else (
        f"于 {first.time}" if first and first.time else "")
    where = first.where if first else ""
    title = match.title.get(lang)
    if lang == "zh":
        return f"{who + '：' if who else ''}{title}{when}（{where}）"
    return f"{who + ': ' if who else ''}{title}{when} ({where})"


def _following(match: Match, lang: str) -> str:
    first = match.first
    who = _who(first, lang)
    title = match.title.get(lang)
    when = first.time if first and first.time else (first.where if first else "")
    said = ("，" if lang == "zh" else ", ").join(p for p in (who, when) if p)
    if lang == "zh":  # a reading has no line: then nothing in brackets
        return f"之后的“{title}”{'（' + said + '）' if said else ''}是它的后果"
    return f"the later “{title}”{' (' + said + ')' if said else ''} follows from it"
