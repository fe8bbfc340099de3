"""Never silent on an error: when no signature knows a log's error, say what it resembles.

While the logs are scanned, lines that read as errors are kept (a traceback's last line,
`ERROR`/`FATAL`/`Error:` lines, `错误`/`失败`/`异常`). When no specific signature matched,
the last such exception line (or error line) is compared with every conclusion (its titles,
explanation and signatures, in both languages) and every knowledge-base article by BM25, and
the best few come back as "similar, not a known signature", with a low confidence and the
error line they were compared with. How many, from what score, and how sure each is are the
ranking's data (ranking.py, `evidence.similar`).

The BM25 is the library's own index (library/textindex.py), not a package such as `bm25s`:
it already tokenises Chinese as character bigrams next to English words, weighs fields (a
title counts more than a body), needs no numpy or scipy on a client that may have neither, and
indexes these few hundred documents in milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from runbook.format.model import LANGS, Runbook, Text
from runbook.library.textindex import K1, UNIGRAM_QUERY_WEIGHT, B, Index, query_terms
from runbook.triage.hits import LineHit
from runbook.triage.ranking import RANKING
from runbook.triage.verdict import MAX_TAXONOMY, SIMILAR, Match, confidence

if TYPE_CHECKING:
    from runbook.library.kb import KnowledgeBase

WEIGHTS = {"title": 3.0, "signature": 2.0, "explanation": 1.0, "body": 0.5}


Article = tuple[str, dict[str, str], list[str], str]  # slug, title per language, taxonomy, text


def articles_of(kb: KnowledgeBase | None) -> list[Article]:
    """The knowledge base's articles as BM25 documents: titles in every language, the English
    summary and body."""
    if kb is None:
        return []
    out = []
    for slug, versions in sorted(kb.articles.items()):
        titles = {lang: article.title for lang, article in versions.items()}
        english = versions.get("en") or next(iter(versions.values()))
        out.append((slug, titles, list(english.taxonomy), english.summary + "\n" + english.body))
    return out


class SimilarityIndex:
    """Conclusions and articles as BM25 documents."""

    def __init__(self, runbooks: Iterable[Runbook], articles: list[Article]) -> None:
        self.index = Index(WEIGHTS)
        self.items: list[tuple[str, str, str, Text, list[str]]] = []  # kind, runbook, id, title, taxonomy
        for runbook in sorted(runbooks, key=lambda r: r.id):
            for conclusion in runbook.conclusions.values():
                if not conclusion.taxonomy:
                    continue
                self.index.add(_conclusion_fields(runbook, conclusion.id))
                self.items.append(("conclusion", runbook.id, conclusion.id, conclusion.title,
                                   conclusion.taxonomy))
        for slug, titles, taxonomy, body in articles:
            self.index.add([*(("title", t) for t in titles.values()), ("body", body)])
            self.items.append(("article", "", slug, Text(titles.get("en", slug), titles.get("zh", slug)),
                               taxonomy))

    def similar(self, line: LineHit, top: int | None = None, text: str | None = None) -> list[Match]:
        """The conclusions and articles `line` resembles most (the ranking's `top` few), best first;
        `text`: what to compare instead of the line's own text (a cut traceback's library frames)."""
        rules = RANKING["evidence"]["similar"]
        top = rules["top"] if top is None else top
        scores = self.index.scores(query_terms(line.text if text is None else text))
        ranked = sorted((i for i, s in enumerate(scores) if s >= rules["min_score"]),
                        key=lambda i: -scores[i])[:top]
        best = scores[ranked[0]] if ranked else 1.0
        out = []
        for i in ranked:
            kind, runbook, item_id, title, taxonomy = self.items[i]
            sure = confidence("similar", {"score": scores[i], "best": best}, SIMILAR)
            out.append(Match(runbook, item_id if kind == "conclusion" else "", item_id, title,
                             taxonomy[:MAX_TAXONOMY], SIMILAR, sure, scores[i], [], line, kind))
        return out


    def resembling(self, text: str, top: int,
                   why_words: int) -> list[tuple[str, str, Text, list[str], list[str]]]:
        """The conclusions `text` (a few lines, no error among them) resembles most:
        (runbook, conclusion, title, taxonomy, the words they share, rarest first).

        Only words count: numbers and short or common words are what every progress line
        shares with every conclusion (`step 48` is not Xid 48)."""
        query = {t: w for t, w in query_terms(text).items() if _is_word(t)}
        scores = self.index.scores(query)
        min_score = RANKING["evidence"]["similar"]["min_score"]
        ranked = sorted((i for i, s in enumerate(scores)
                         if s >= min_score and self.items[i][0] == "conclusion"), key=lambda i: -scores[i])
        out = []
        for i in ranked[:top]:
            _, runbook, item_id, title, taxonomy = self.items[i]
            held = set().union(*self.index.docs[i].values())
            shared = sorted((t for t in query if t in held), key=lambda t: (-self.index.idf(t), t))
            out.append((runbook, item_id, title, taxonomy[:MAX_TAXONOMY], shared[:why_words]))
        return out

    def export(self) -> dict[str, Any]:
        """The index as the triage page reads it (site/triage_export.py): each document's fields
        with their term counts, in the order Python sums them, and the BM25 constants."""
        docs = [{"kind": kind, "runbook": runbook, "id": item_id,
                 "fields": [[name, dict(counts)] for name, counts in doc.items()]}
                for (kind, runbook, item_id, _, _), doc in zip(self.items, self.index.docs, strict=True)]
        return {"weights": WEIGHTS, "k1": K1, "b": B, "unigram_weight": UNIGRAM_QUERY_WEIGHT,
                "common": sorted(_COMMON), "docs": docs}


_COMMON = frozenset({"the", "and", "for", "with", "was", "are", "not", "but", "from", "this", "that",
                     "into", "its", "has", "have", "had", "you", "all", "per", "out", "one", "two",
                     "use", "used"})


def _is_word(term: str) -> bool:
    if any("\u3400" <= ch <= "\u9fff" for ch in term):
        return True
    return len(term) >= 3 and any(ch.isalpha() for ch in term) and term not in _COMMON


def _conclusion_fields(runbook: Runbook, conclusion_id: str) -> list[tuple[str, str]]:
    conclusion = runbook.conclusions[conclusion_id]
    fields = [("title", conclusion.title.get(lang)) for lang in LANGS]
    fields += [("explanation", conclusion.explanation.get(lang)) for lang in LANGS]
    fields += [("signature", _literal(s.pattern)) for s in runbook.signatures
               if s.conclusion == conclusion_id]
    return fields


def _literal(pattern: str) -> str:
    """The words of a regex, its syntax dropped: `CUDA out of memory|torch\\.OutOfMemoryError`."""
    return re.sub(r"\\[a-zA-Z]|[\\^$.|?*+()\[\]{}]", " ", pattern)
