"""Translation fingerprints: which side of an English/Chinese pair moved, in runbooks and articles."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from runbook.format.yamlpos import parse
from runbook.i18n.translations import (
    BOTH_CHANGED,
    CURRENT,
    EN_CHANGED,
    UNSTAMPED,
    ZH_CHANGED,
    article_text,
    compare,
    fingerprint,
    kb_problems,
    runbook_problems,
    state,
    texts,
)
from runbook.library.kb import load_kb
from runbook.versions.gitrev import Revision


def test_fingerprint_is_sha256_prefixes_of_the_stripped_texts() -> None:
    en, zh = hashlib.sha256(b"Hello").hexdigest()[:8], hashlib.sha256("你好".encode()).hexdigest()[:8]
    assert fingerprint("  Hello\n", "你好\n") == f"{en}/{zh}"


@pytest.mark.parametrize("en, zh, expected", [
    ("Hello", "你好", CURRENT), ("Hello!", "你好", EN_CHANGED), ("Hello", "您好", ZH_CHANGED),
    ("Hello!", "您好", BOTH_CHANGED),
])
def test_state_says_which_side_moved(en: str, zh: str, expected: str) -> None:
    assert state(en, zh, fingerprint("Hello", "你好")) == expected


@pytest.mark.parametrize("fp", [None, "", "not-a-fingerprint", "ABCDEF12/abcdef12"])
def test_no_usable_fingerprint_is_unstamped(fp: str | None) -> None:
    assert state("Hello", "你好", fp) == UNSTAMPED


def test_compare_with_an_older_pair() -> None:
    assert compare("a", "甲", "a ", "甲") == CURRENT
    assert compare("a", "甲", "b", "甲") == EN_CHANGED
    assert compare("a", "甲", "a", "乙") == ZH_CHANGED
    assert compare("a", "甲", "b", "乙") == CURRENT  # both moved: nothing says which is behind


def test_texts_finds_every_pair_and_only_pairs() -> None:
    data = {"title": {"en": "T", "zh": "标题", "fp": "0" * 8 + "/" + "1" * 8},
            "steps": {"a": {"check": {"with": {"en": "x", "zh": "y", "other": 1}},
                            "branches": [{"when": "x", "goto": "b", "note": {"en": "N", "zh": "注"}}]}},
            "changelog": [{"version": "1.0.0", "en": "First", "zh": "第一版"}]}
    assert [(t.path, t.fp) for t in texts(data)] == [
        (("title",), "00000000/11111111"), (("steps", "a", "branches", 0, "note"), None),
        (("changelog", 0), None)]


def test_runbook_problems_point_at_the_side_that_is_behind() -> None:
    fp = fingerprint("Old title", "标题")
    text = f"id: x\ntitle: {{en: New title, zh: 标题, fp: {fp}}}\nsummary: {{en: S, zh: 摘要}}\n"
    data, positions = parse(text)
    [problem] = runbook_problems("x.yaml", data, positions)
    assert str(problem) == ("x.yaml:2:28: title.zh: warning: stale translation: title.en changed "
                            "since title.zh was translated (update the Chinese, then run: "
                            "runbook i18n stamp x.yaml)")


def test_without_fingerprint_the_base_revision_decides() -> None:
    old, _ = parse("summary: {en: S, zh: 摘要}\ntitle: {en: T, zh: 标题}\n")
    data, positions = parse("summary: {en: S, zh: 新摘要}\ntitle: {en: T2, zh: 标题2}\n")
    [problem] = runbook_problems("x.yaml", data, positions, old)
    assert problem.path == ("summary", "en") and (problem.line, problem.column) == (1, 15)
    assert "summary.zh changed since summary.en was translated (update the English" in problem.message
    assert runbook_problems("x.yaml", data, positions) == []  # no base, no fingerprint: nothing known


def article(kb: Path, slug: str, en_body: str, zh_body: str, fp: str | None = None,
            zh_fp: str | None = None) -> Path:
    folder = kb / slug
    folder.mkdir(parents=True, exist_ok=True)
    for lang, body, value in (("en", en_body, fp), ("zh", zh_body, zh_fp if zh_fp else fp)):
        extra = f"fp: {value}\n" if value else ""
        (folder / f"{lang}.md").write_text(f"---\nid: {slug}\nlang: {lang}\ntitle: T\nsummary: S\n"
                                           f"{extra}---\n\n{body}\n", "utf-8")
    return folder


def article_fp(en_body: str, zh_body: str) -> str:
    """The fingerprint `article` files get: their title and summary are T and S."""
    meta = {"title": "T", "summary": "S"}
    return fingerprint(article_text(meta, en_body), article_text(meta, zh_body))


def test_kb_article_with_one_body_changed(tmp_path: Path) -> None:
    folder = article(tmp_path, "demo", "New English.", "中文。", article_fp("Old English.", "中文。"))
    [problem] = kb_problems(load_kb([tmp_path]))
    assert (problem.file, problem.line, problem.severity) == (str(folder / "zh.md"), 8, "warning")
    assert problem.message.startswith(f"stale translation: {folder / 'en.md'} changed since "
                                      f"{folder / 'zh.md'} was translated (update the Chinese")


def test_kb_article_in_step_or_unstamped_is_quiet(tmp_path: Path) -> None:
    article(tmp_path, "a", "English.", "中文。", article_fp("English.", "中文。"))
    article(tmp_path, "b", "English.", "中文。")
    assert kb_problems(load_kb([tmp_path])) == []


def test_kb_article_whose_title_changed_in_one_language_is_stale(tmp_path: Path) -> None:
    folder = article(tmp_path, "a", "English.", "中文。", article_fp("English.", "中文。"))
    zh = folder / "zh.md"
    zh.write_text(zh.read_text("utf-8").replace("title: T\n", "title: 新标题\n"), "utf-8")
    [problem] = kb_problems(load_kb([tmp_path]))
    assert problem.file == str(folder / "en.md")
    assert problem.message.startswith(f"stale translation: {zh} changed since {folder / 'en.md'}")


def test_kb_fingerprints_must_agree_and_be_well_formed(tmp_path: Path) -> None:
    good = article_fp("English.", "中文。")
    article(tmp_path, "a", "English.", "中文。", good, zh_fp="0" * 8 + "/" + "0" * 8)
    article(tmp_path, "b", "English.", "中文。", "stale")
    found = kb_problems(load_kb([tmp_path]))
    messages = [(Path(p.file).parent.name, p.message.split(" (")[0]) for p in found]
    assert messages == [("a", f"fp differs from {tmp_path / 'a' / 'en.md'}'s"),
                        ("b", "'stale' is not a fingerprint"), ("b", "'stale' is not a fingerprint")]


def test_kb_without_fingerprint_is_compared_with_the_base_revision(tmp_path: Path) -> None:
    folder = article(tmp_path / "kb", "demo", "English.", "中文。")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "kb"]):
        subprocess.run(["git", *args], cwd=tmp_path, env=env, check=True, capture_output=True)
    zh = folder / "zh.md"
    zh.write_text(zh.read_text("utf-8").replace("中文。", "更新后的中文。"), "utf-8")
    [problem] = kb_problems(load_kb([tmp_path / "kb"]), Revision("main"))
    assert problem.file == str(folder / "en.md")
    assert "update the English" in problem.message
