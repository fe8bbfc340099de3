"""From matched signatures to failures: one match per conclusion, causes before consequences.

Each signature names the conclusion its line is evidence for (its `conclusion`, or a
conclusion as its `goto`; for an older runbook without either, the reachable conclusion whose
text the matched lines share most words with). Hits for the same conclusion, in every file,
make one `Match`, which carries that conclusion's own taxonomy ids (at most three).

What a match weighs, how sure it is and where it goes in the list are the ranking's data
(ranking.py), applied here and in ordering.py. As it stands: every root cause before every
knock-on (a watchdog timeout, gloo's "connection closed by peer", the elastic agent's exit
report follow from a failure elsewhere); specific signatures before generic ones; then the
earliest: by timestamp where the lines have comparable ones, else by file and line. In a
multi-rank job the first failure is the cause: the others are what the rest of the job did
about it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runbook.checks import facts as message_facts
from runbook.format.model import Conclusion, Runbook, Text
from runbook.library.runbooks import Library
from runbook.triage.formula import evaluate
from runbook.triage.hits import LineHit, SignatureHit
from runbook.triage.ordering import order as order_by_ranking
from runbook.triage.ordering import position, role_rank
from runbook.triage.ranking import RANKING
from runbook.triage.readings import releases
from runbook.triage.readings.series import HEALTHY, describe_reading
from runbook.triage.resolver import PatternKey, TaxonomyResolver
from runbook.triage.score import strength

MAX_TAXONOMY = 3
CAUSE, KNOCK_ON, SIMILAR, HEALTHY_ROLE = "cause", "knock-on", "similar", "healthy"
# a role as the text report and the MCP tool name it
ROLE_WORDS = {"en": {CAUSE: "cause", KNOCK_ON: "knock-on", SIMILAR: "similar", HEALTHY_ROLE: "healthy"},
              "zh": {CAUSE: "根因", KNOCK_ON: "后果", SIMILAR: "相似", HEALTHY_ROLE: "正常"}}


@dataclass
class Match:
    """One failure the logs show: a conclusion of a runbook, and the lines that say so."""

    runbook: str
    entry: str  # where `runbook run` enters: the signature's goto, or the runbook's start
    conclusion: str
    title: Text
    taxonomy: list[str]
    role: str  # cause | knock-on | similar (text similarity, not a known signature)
    confidence: float  # 0..1
    score: float
    signatures: list[SignatureHit] = field(default_factory=list)  # best first
    similar_to: LineHit | None = None  # for `similar`: the error line that was compared
    kind: str = "conclusion"  # or "article" (a knowledge-base article, for `similar` only)
    catch_all: bool = False  # its conclusion is the library's last resort (`generic: true`)
    reading: dict[str, Any] | None = None  # for a `reading` match: what the dump or the numbers show
    cases: tuple[tuple[float, Any], ...] = ()  # for a `case` match: (similarity, cases.Case), nearest first
    release: dict[str, Any] | None = None  # a release bug the version and lines show (releases.py)

    @property
    def first(self) -> LineHit | None:
        """The earliest matched line: the one the order of matches goes by."""
        lines = [hit.first[0] for hit in self.signatures if hit.first]
        if self.similar_to is not None:
            lines.append(self.similar_to)
        return min(lines, key=position) if lines else None

    @property
    def generic(self) -> bool:
        if self.reading is not None:
            return False  # a dump or a series that names a cause is specific evidence
        return all(hit.generic for hit in self.signatures)

    def lines(self, limit: int | None = None) -> list[LineHit]:
        """Matched lines of all its signatures in log order; when more than `limit` (the
        ranking's `lines.shown`), the first `lines.shown_first` and the last ones."""
        shown = RANKING["lines"]
        limit = shown["shown"] if limit is None else limit
        head = min(shown["shown_first"], limit)
        by_place = {(h.source.path, h.line_no): h for sig in self.signatures for h in sig.lines()}
        if self.similar_to is not None:
            by_place[(self.similar_to.source.path, self.similar_to.line_no)] = self.similar_to
        ordered = sorted(by_place.values(), key=position)
        return ordered if len(ordered) <= limit else ordered[:head] + ordered[len(ordered) - (limit - head):]

    def why(self, lang: str = "en") -> str:
        """One line saying what matched, in `lang`."""
        zh = lang == "zh"
        if self.reading is not None:
            said = describe_reading(self.reading, lang)
            return f"没有错误行；{said}" if zh else f"no error line names it; {said}"
        if self.kind == "case":
            head = "相似，不是已知特征：" if zh else "similar, not a known signature: "
            return head + self._reports(lang)
        if self.role == SIMILAR and self.similar_to is not None:
            line = _clip(self.similar_to.text, 100)
            text = (f"相似，不是已知特征：与错误行 '{line}'（{self.similar_to.where}）文字相近" if zh
                    else f"similar, not a known signature: its text resembles the error line '{line}' "
                         f"({self.similar_to.where})")
            return text + (("；也" if zh else "; and ") + self._reports(lang) if self.cases else "")
        said = self._signature_why(lang)
        if self.release is not None:
            return releases.describe(self.release, lang) + ("；" if zh else "; ") + said
        return said

    def _signature_why(self, lang: str) -> str:
        zh = lang == "zh"
        best = self.signatures[0]
        pattern = _clip(best.pattern, 60)
        count = sum(hit.count for hit in self.signatures if hit.pattern == best.pattern)
        more = len({hit.pattern for hit in self.signatures}) - 1
        first = self.first
        where = first.where if first else ""
        if zh:
            text = f"{count} 行匹配 '{pattern}'（最早在 {where}）"
            return text + (f"；另有 {more} 个特征匹配" if more else "")
        text = f"{count} line{'s' if count > 1 else ''} match '{pattern}' (first at {where})"
        return text + (f"; {more} more signature{'s' if more > 1 else ''} match" if more else "")

    def _reports(self, lang: str) -> str:
        """The known cases it rests on, nearest first: `like 2 diagnosed public reports: URL (0.41); ...`."""
        near = "; ".join(f"{case.source} ({similarity:.2f})" for similarity, case in self.cases[:3])
        if lang == "zh":
            return f"像 {len(self.cases)} 份已诊断的公开报告：{near}"
        return f"like {len(self.cases)} diagnosed public report{'s' if len(self.cases) > 1 else ''}: {near}"

    def facts(self) -> dict[str, Any]:
        """The facts of the error messages among its matched lines (checks/facts/: amounts, PIDs,
        devices, versions, sequence numbers), the evidence a person reads first."""
        return message_facts.extract([line.whole for line in self.lines()])

    def to_json(self, lang: str = "en") -> dict[str, Any]:
        first = self.first
        return {
            "kind": self.kind, "runbook": self.runbook, "entry": self.entry,
            "conclusion": {"id": self.conclusion, "title": self.title.get(lang), "taxonomy": self.taxonomy},
            "taxonomy": self.taxonomy, "role": self.role, "confidence": round(self.confidence, 2),
            "score": round(self.score, 2), "why": self.why(lang), "reading": self.reading,
            "first": _line_json(first) if first else None,
            "lines": [_line_json(h) for h in self.lines()],
            "facts": self.facts(),
            "cases": [{"source": case.source, "similarity": similarity, "entry": case.entry}
                      for similarity, case in self.cases],
            "release": self.release,
            "signatures": [{"pattern": s.pattern, "goto": s.signature.goto, "role": s.signature.role,
                            "file": s.source.path, "count": s.count, "first_line": s.first_line,
                            "last_line": s.last_line} for s in self.signatures],
        }


def rank(library: Library, hits: list[SignatureHit], counts: Mapping[PatternKey, int],
         bugs: Sequence[dict[str, Any]] = ()) -> list[Match]:
    """Matches of the hits, one per conclusion, in the order described above; `bugs`: the release
    bugs the log's versions and lines show (releases.py), which take the matches of their lines."""
    resolver = TaxonomyResolver(library, counts)
    grouped: dict[tuple[str, str], list[SignatureHit]] = {}
    named: dict[tuple[str, str], Conclusion] = {}
    for hit in hits:
        runbook = library.get(hit.runbook)
        if runbook is None:
            continue
        located = _conclusion_of(resolver, runbook, hit)
        if located is None:
            continue
        book_id, conclusion = located
        grouped.setdefault((book_id, conclusion.id), []).append(hit)
        named[(book_id, conclusion.id)] = conclusion
    roles = _refine(library, grouped, named)
    target = _release_bugs(library, grouped, named, bugs)
    matches = [_match(library, key, named[key], group, roles.get(key)) for key, group in grouped.items()]
    for match in matches:
        if (match.runbook, match.conclusion) == target:  # the bug its own lines show, else the first
            texts = kept_texts(match.signatures)
            match.release = next((b for b in bugs if releases.shows(b, texts)), bugs[0])
    return order(matches)


def kept_texts(hits: list[SignatureHit]) -> list[str]:
    """The lines the hits kept, as whole as they were kept (what message facts are read from)."""
    return [line.whole for hit in hits for line in hit.lines()]


def _release_bugs(library: Library, grouped: dict[tuple[str, str], list[SignatureHit]],
                  named: dict[tuple[str, str], Conclusion], bugs: Sequence[dict[str, Any]],
                  ) -> tuple[str, str] | None:
    """Move to releases.CONCLUSION the hits whose lines are a release bug's own, and those of its
    runbook's last-resort conclusions (`generic: true`: an NCCL error nothing explains, which the
    bug does); its key, or None when no bug was found or the library lacks the conclusion."""
    book_id, _, conclusion_id = releases.CONCLUSION.partition(":")
    runbook = library.get(book_id)
    if not bugs or runbook is None or conclusion_id not in runbook.conclusions:
        return None
    target = (book_id, conclusion_id)
    for key in [k for k in grouped if k != target]:
        texts = kept_texts(grouped[key])
        if (key[0] == book_id and named[key].generic) or any(releases.shows(bug, texts) for bug in bugs):
            grouped.setdefault(target, []).extend(grouped.pop(key))
            named[target] = runbook.conclusions[conclusion_id]
    return target


def _refine(library: Library, grouped: dict[tuple[str, str], list[SignatureHit]],
            named: dict[tuple[str, str], Conclusion]) -> dict[tuple[str, str], str]:
    """Move the hits of a conclusion to a more specific one where their lines' facts say so (the
    ranking's `refine` rules), merged with that conclusion's own hits when it has some; the role
    a rule gives the conclusion it moved hits to."""
    roles: dict[tuple[str, str], str] = {}
    for rule in RANKING["refine"]:
        book, _, conclusion = rule["conclusion"].partition(":")
        key = (book, conclusion)
        hits = grouped.get(key)
        if not hits:
            continue
        family, name = rule["fact"]
        lines = sorted({(h.source.path, h.line_no): h.whole for hit in hits for h in hit.lines()}.items())
        facts = message_facts.FAMILIES[family]([whole for _, whole in lines]) or {}
        book_id, _, conclusion_id = rule["becomes"].partition(":")
        runbook = library.get(book_id)
        if facts.get(name) is not True or runbook is None or conclusion_id not in runbook.conclusions:
            continue
        target = (book_id, conclusion_id)
        grouped.setdefault(target, []).extend(grouped.pop(key))
        named[target] = runbook.conclusions[conclusion_id]
        if rule.get("role"):
            roles[target] = rule["role"]
    return roles


def order(matches: list[Match]) -> list[Match]:
    """Matches in the ranking's order (ordering.py): causes first, specific before generic,
    then earliest (by time where comparable)."""
    return order_by_ranking(matches)


def _conclusion_of(resolver: TaxonomyResolver, runbook: Runbook,
                   hit: SignatureHit) -> tuple[str, Conclusion] | None:
    named = hit.signature.conclusion
    if named and named in runbook.conclusions:
        return runbook.id, runbook.conclusions[named]
    evidence = " ".join(line.text for line in hit.lines())
    ranked = resolver.ranked(runbook, hit.signature.goto or runbook.start, evidence)
    return ranked[0] if ranked else None


def _match(library: Library, key: tuple[str, str], conclusion: Conclusion,
           hits: list[SignatureHit], role: str | None = None) -> Match:
    """The match of a conclusion's hits; `role`: a refine rule's, else the most telling one of
    its signatures (one cause signature: a cause)."""
    book_id, _ = key
    strengths = {id(h): strength(h.weight, h.count, h.generic) for h in hits}
    hits.sort(key=lambda h: (-strengths[id(h)], h.first_line))
    best = hits[0]
    role = role or min((h.signature.role for h in hits), key=role_rank)
    score = sum(strengths[id(h)] for h in hits)
    generic = all(h.generic for h in hits)
    runbook = library.get(best.runbook)
    entry = best.signature.goto or (runbook.start if runbook else conclusion.id)
    if best.runbook != book_id:  # the signature led into another runbook's conclusion
        entry = conclusion.id
    sure = confidence("signature", {"weight": best.weight, "count": best.count, "generic": generic,
                                    "score": score}, role)
    return Match(book_id, entry, conclusion.id, conclusion.title, conclusion.taxonomy[:MAX_TAXONOMY],
                 role, sure, score, hits, catch_all=conclusion.generic)


def from_readings(library: Library, readings: list[dict[str, Any]]) -> list[Match]:
    """A match per conclusion the readings name (stacks.py, series.py), the first reading of each;
    a healthy reading names no failure and makes none here (`healthy` answers with it)."""
    knock_ons = RANKING["evidence"]["reading"]["knock_on"]
    out: dict[str, Match] = {}
    for reading in readings:
        named = reading.get("conclusion")
        if not named or named in out or reading["reading"] in HEALTHY:
            continue
        match = _reading_match(library, reading, KNOCK_ON if named in knock_ons else CAUSE)
        if match is not None:
            out[named] = match
    return list(out.values())


def healthy(library: Library, readings: list[dict[str, Any]]) -> list[Match]:
    """The first reading that says the numbers look well (a steady loss, a loss scale still
    calibrating) as a match of its conclusion in the `healthy` role: the answer for a paste where
    nothing else was found. The verdict stays no-error: it names no failure."""
    for reading in readings:
        match = _reading_match(library, reading, HEALTHY_ROLE) if reading["reading"] in HEALTHY else None
        if match is not None:
            return [match]
    return []


def _reading_match(library: Library, reading: dict[str, Any], role: str) -> Match | None:
    """The match of the conclusion a reading names, in `role`; None when the library lacks it."""
    book_id, _, conclusion_id = str(reading.get("conclusion") or "").partition(":")
    runbook = library.get(book_id)
    if runbook is None or conclusion_id not in runbook.conclusions:
        return None
    conclusion = runbook.conclusions[conclusion_id]
    return Match(book_id, conclusion_id, conclusion_id, conclusion.title, conclusion.taxonomy[:MAX_TAXONOMY],
                 role, confidence("reading", {"guess": bool(reading.get("guess"))}, role), 0.0,
                 catch_all=conclusion.generic, reading=reading)


def confidence(evidence: str, names: Mapping[str, Any], role: str) -> float:
    """How sure a match is, 0..1: the ranking's confidence of its kind of `evidence` (for a
    signature: a long literal one near 0.95, a generic one near 0.2), times the share its role
    keeps (a knock-on says less about what to fix than a cause), rounded."""
    shares = {entry["id"]: entry["confidence"] for entry in RANKING["roles"]}
    sure = evaluate(RANKING["evidence"][evidence]["confidence"], names) * shares[role]
    return round(sure, RANKING["confidence_digits"])


def _line_json(line: LineHit) -> dict[str, Any]:
    return {"file": line.source.path, "line_no": line.line_no, "text": line.text,
            "rank": line.rank, "host": line.source.host, "time": line.time}


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
