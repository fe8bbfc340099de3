"""Translations that don't rot: fingerprints of English/Chinese pairs, and warnings when one side moves.

A text object may carry `fp: "xxxxxxxx/yyyyyyyy"`: the first 8 hex digits of the
sha256 of its English and of its Chinese (each stripped), written by `runbook i18n
stamp` when the two were last known to say the same thing. If only one side's hash
changed since, the other side is a stale translation. Without a fingerprint, the
same comparison is made against the text at a git revision (`lint --base REV`).
Knowledge-base articles keep one `fp` of their two bodies in both front matters.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from runbook.format.problems import DocPath, Problem, format_path
from runbook.format.yamlpos import Positions
from runbook.library.kb import KnowledgeBase, front_matter_meta, split_front_matter


class Revision(Protocol):
    """Files as they were at an older revision (`runbook.versions.gitrev.Revision` is one)."""

    def read(self, file: Path) -> str | None: ...


TEXT_KEYS = {"en", "zh", "fp", "version"}  # `version`: a changelog entry is a text too
FINGERPRINT = re.compile(r"[0-9a-f]{8}/[0-9a-f]{8}")

CURRENT, UNSTAMPED, EN_CHANGED, ZH_CHANGED, BOTH_CHANGED = (
    "current", "unstamped", "en-changed", "zh-changed", "both-changed")


def short_hash(text: str) -> str:
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:8]


def fingerprint(en: str, zh: str) -> str:
    return f"{short_hash(en)}/{short_hash(zh)}"


def state(en: str, zh: str, fp: str | None) -> str:
    """How a pair stands against its fingerprint: current, unstamped, or which side changed."""
    if not fp or not FINGERPRINT.fullmatch(fp):
        return UNSTAMPED
    en_fp, zh_fp = fp.split("/")
    en_same, zh_same = short_hash(en) == en_fp, short_hash(zh) == zh_fp
    if en_same and zh_same:
        return CURRENT
    return ZH_CHANGED if en_same else EN_CHANGED if zh_same else BOTH_CHANGED


def compare(old_en: str, old_zh: str, en: str, zh: str) -> str:
    """How a pair stands against the same pair at an older revision."""
    en_same, zh_same = old_en.strip() == en.strip(), old_zh.strip() == zh.strip()
    if en_same == zh_same:
        return CURRENT  # both moved, or neither: nothing says which one is behind
    return ZH_CHANGED if en_same else EN_CHANGED


@dataclass(frozen=True)
class TextRef:
    """One English/Chinese pair in a runbook document."""

    path: DocPath
    en: str
    zh: str
    fp: str | None


def texts(value: Any, path: DocPath = ()) -> Iterator[TextRef]:
    """Every text object (`{en, zh[, fp]}`, changelog entries included) in a document."""
    if isinstance(value, dict):
        if _is_text(value):
            fp = value.get("fp")
            yield TextRef(path, value["en"], value["zh"], fp if isinstance(fp, str) else None)
            return
        for key, child in value.items():
            yield from texts(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from texts(child, (*path, i))


def _is_text(value: dict[Any, Any]) -> bool:
    return (isinstance(value.get("en"), str) and isinstance(value.get("zh"), str)
            and set(value) <= TEXT_KEYS)


def stale_message(where: str, how: str, stamp_target: str) -> tuple[str, str]:
    """(field to point at, message) for a pair that is not current; `where` is its doc path."""
    stamp = f"runbook i18n stamp {stamp_target}"
    if how == EN_CHANGED:
        return "zh", (f"stale translation: {where}.en changed since {where}.zh was translated "
                      f"(update the Chinese, then run: {stamp})")
    if how == ZH_CHANGED:
        return "en", (f"stale translation: {where}.zh changed since {where}.en was translated "
                      f"(update the English, then run: {stamp})")
    return "fp", (f"fingerprint out of date: {where}.en and {where}.zh both changed since it was "
                  f"stamped (if they say the same thing, run: {stamp})")


def runbook_problems(file: str, data: Any, positions: Positions, old: Any = None) -> list[Problem]:
    """Stale-translation warnings of one runbook document; `old`: the document at a base revision."""
    old_texts = {t.path: t for t in texts(old)} if old is not None else {}
    problems: list[Problem] = []
    for text in texts(data):
        how = state(text.en, text.zh, text.fp)
        before = old_texts.get(text.path)
        if how == UNSTAMPED and before is not None:
            how = compare(before.en, before.zh, text.en, text.zh)
        if how in (CURRENT, UNSTAMPED):
            continue
        field, message = stale_message(format_path(text.path), how, file)
        where: DocPath = (*text.path, field)
        problems.append(Problem(file, *positions.of(where), where, message, "warning"))
    return problems


# ---- knowledge-base articles ----


def article_text(front: str | dict[str, Any], body: str) -> str:
    """What an article's fingerprint covers: its title, its summary and its body.

    `front` is the front matter block (with its `---` lines) or the parsed mapping.
    """
    meta = front_matter_meta(front) if isinstance(front, str) else front
    return f"{meta.get('title') or ''}\n{meta.get('summary') or ''}\n{body.strip()}"


def kb_problems(kb: KnowledgeBase, revision: Revision | None = None) -> list[Problem]:
    """Stale-translation warnings of every article that exists in both languages."""
    problems: list[Problem] = []
    for versions in kb.articles.values():
        en, zh = versions.get("en"), versions.get("zh")
        if en is None or zh is None:
            continue  # the kb loader reports the missing language
        folder = str(Path(en.path).parent)
        en_fp, zh_fp = en.meta.get("fp"), zh.meta.get("fp")
        for article, fp in ((en, en_fp), (zh, zh_fp)):
            if fp is not None and not FINGERPRINT.fullmatch(str(fp)):
                problems.append(Problem(article.path, 1, 1, ("fp",), f"{fp!r} is not a fingerprint "
                                        f"(xxxxxxxx/yyyyyyyy: run: runbook i18n stamp {folder})",
                                        "warning"))
        if en_fp != zh_fp:
            problems.append(Problem(zh.path, 1, 1, ("fp",), f"fp differs from {en.path}'s (both files "
                                    f"keep the same fingerprint: run: runbook i18n stamp {folder})",
                                    "warning"))
            continue
        en_text, zh_text = article_text(en.meta, en.body), article_text(zh.meta, zh.body)
        how = state(en_text, zh_text, str(en_fp) if en_fp else None)
        if how == UNSTAMPED and revision is not None:
            how = _compare_at(revision, Path(en.path), Path(zh.path), en_text, zh_text)
        if how in (CURRENT, UNSTAMPED):
            continue
        behind = zh if how == EN_CHANGED else en
        problems.append(Problem(behind.path, behind.body_line, 1, ("body",),
                                kb_stale_message(en.path, zh.path, how, folder), "warning"))
    return problems


def _compare_at(revision: Revision, en_path: Path, zh_path: Path, en: str, zh: str) -> str:
    old_en, old_zh = revision.read(en_path), revision.read(zh_path)
    if old_en is None or old_zh is None:
        return UNSTAMPED  # new since the revision: nothing to compare with
    en_parts, zh_parts = split_front_matter(old_en), split_front_matter(old_zh)
    if en_parts is None or zh_parts is None:
        return UNSTAMPED
    return compare(article_text(*en_parts), article_text(*zh_parts), en, zh)


def kb_stale_message(en_path: str, zh_path: str, how: str, folder: str) -> str:
    stamp = f"runbook i18n stamp {folder}"
    if how == EN_CHANGED:
        return (f"stale translation: {en_path} changed since {zh_path} was translated "
                f"(update the Chinese, then run: {stamp})")
    if how == ZH_CHANGED:
        return (f"stale translation: {zh_path} changed since {en_path} was translated "
                f"(update the English, then run: {stamp})")
    return (f"fingerprint out of date: {en_path} and {zh_path} both changed since they were "
            f"stamped (if they say the same thing, run: {stamp})")
