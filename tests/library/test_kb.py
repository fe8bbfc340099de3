"""The knowledge base: articles in both languages, front matter, links both ways."""

from __future__ import annotations

from pathlib import Path

from runbook.library.kb import check_links, load_kb
from runbook.library.runbooks import load_library

ROOT = Path(__file__).resolve().parents[2]
SEED_ARTICLES = {"dataloader-token-buffer", "nvidia-smi-hang-ray-workers",
                 "training-troubleshooting-guide", "live-debugging-with-probing",
                 "gkd-hang-quick-card"}


def test_every_seed_is_an_article_in_both_languages() -> None:
    kb = load_kb([ROOT / "kb"])
    assert not kb.problems, [str(p) for p in kb.problems]
    assert set(kb.articles) >= SEED_ARTICLES
    for slug in SEED_ARTICLES:
        en, zh = kb.article(slug, "en"), kb.article(slug, "zh")
        assert en and zh and en.runbooks == zh.runbooks and en.taxonomy == zh.taxonomy
        assert any("\u4e00" <= ch <= "\u9fff" for ch in zh.title)
        assert en.meta["seed"] == zh.meta["seed"]


def write_article(base: Path, slug: str, lang: str, runbooks: str, body: str, **extra: str) -> None:
    folder = base / slug
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"id": slug, "lang": lang, "title": "T", "summary": "S", **extra}
    front = "\n".join(f"{k}: {v}" for k, v in meta.items())
    (folder / f"{lang}.md").write_text(f"---\n{front}\nruntime: x\nrunbooks: {runbooks}\n---\n{body}\n")


def test_broken_articles_and_links_are_reported(tmp_path: Path) -> None:
    kb_dir = tmp_path / "kb"
    write_article(kb_dir, "good", "en", "[training-hang]", "See [it](runbook:training-hang).")
    write_article(kb_dir, "good", "zh", "[training-hang]", "见 [它](kb:missing-article).")
    write_article(kb_dir, "lonely", "en", "[no-such-runbook]", "text", taxonomy="[hang.nope]")
    kb = load_kb([kb_dir])
    assert [p.message for p in kb.problems] == [
        "article 'lonely' has no zh.md (every article exists in English and Chinese)"]
    library = load_library([ROOT / "runbooks"])
    messages = [(Path(p.file).name, p.message, p.severity)
                for p in check_links(kb, {r.id: r for r in library.runbooks()})]
    assert ("zh.md", "link to kb:missing-article: no such article", "error") in messages
    assert ("en.md", "no runbook named 'no-such-runbook'", "error") in messages
    assert any(m.startswith("unknown taxonomy id 'hang.nope'") for _, m, _ in messages)
    assert ("en.md", "runbook 'training-hang' does not link back (add kb:good to a conclusion's "
            "see_also)", "warning") in messages


def test_a_runbook_link_to_a_missing_article_names_the_closest_and_its_line(tmp_path: Path) -> None:
    kb_dir = tmp_path / "kb"
    for lang in ("en", "zh"):
        write_article(kb_dir, "disk-full-notes", lang, "[]", "text")
    books = tmp_path / "books"
    books.mkdir()
    text = (ROOT / "tests" / "data" / "broken" / "03-goto-nowhere.yaml").read_text("utf-8")
    fine = "    explanation: {en: All fine, zh: 一切正常}"
    text = text.replace("goto: gonee", "goto: gone").replace(
        fine, f"{fine}\n    see_also:\n    - kb:disk-full-note\n    - kb:zzzz")
    (books / "linked.yaml").write_text(text, "utf-8")
    library = load_library([books])
    assert not library.problems, [str(p) for p in library.problems]
    found = [str(p) for p in check_links(load_kb([kb_dir]), {r.id: r for r in library.runbooks()})]
    line = text.splitlines().index("    - kb:disk-full-note") + 1
    assert found == [
        f"{books}/linked.yaml:{line}:7: conclusions.fine.see_also[0]: no kb article named 'disk-full-note'"
        " (did you mean 'disk-full-notes'?)",
        f"{books}/linked.yaml:{line + 1}:7: conclusions.fine.see_also[1]: no kb article named 'zzzz'"]
