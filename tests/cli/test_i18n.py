"""`runbook i18n stamp`: fingerprints written, nothing else touched, one-sided changes refused."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

# Comments, flow and block mappings, a folded and a literal block scalar, quoting styles.
RUNBOOK = """\
# A runbook kept by hand: this comment must survive stamping.
apiVersion: runbook/v1
id: demo
version: 1.0.0
title: {en: Demo runbook, zh: 演示运行手册}   # end-of-line comment
summary:
  en: >-
    Checks that the training process is alive, with a folded
    paragraph that must keep its line breaks.
  zh: '检查训练进程是否存活'
  # a comment after the last key of a text
start: alive
steps:
  alive:
    title: {en: "Is the process alive?", zh: 进程是否存活？}
    check: {type: process, with: {match: train}, timeout: 5s}
    branches:
      - when: not result.found
        goto: gone
        note: {en: No process matched, zh: 没有匹配的进程}
    default: fine
conclusions:
  gone:
    severity: warning
    taxonomy: [hang.dataloader]
    title: {en: The process is gone, zh: 进程不见了}
    explanation:
      en: |
        No process matched.
        Look at the job's log.
      zh: |
        没有匹配的进程。
        请查看作业日志。
  fine:
    severity: ok
    taxonomy: []
    title: {en: All fine, zh: 一切正常}
    explanation: {en: The process runs, zh: 进程在运行}
changelog:
  - {version: 1.0.0, en: First version, zh: 第一版}
"""
N_TEXTS = 9


def short(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()[:8]


def without_fp(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_fp(v) for k, v in value.items() if k != "fp"}
    if isinstance(value, list):
        return [without_fp(v) for v in value]
    return value


@pytest.fixture
def runbook(tmp_path: Path) -> Path:
    path = tmp_path / "runbooks" / "demo.yaml"
    path.parent.mkdir()
    path.write_text(RUNBOOK, "utf-8")
    return path


def test_stamp_adds_only_fp_keys_and_keeps_comments_and_layout(runbook_cli, runbook: Path) -> None:
    out = runbook_cli("i18n", "stamp", str(runbook))
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{runbook}: {N_TEXTS} fingerprint(s) written\n"
    after = runbook.read_text("utf-8")
    assert without_fp(yaml.safe_load(after)) == yaml.safe_load(RUNBOOK)
    # Every line of the file is still there, in order, only with fingerprints added.
    stripped = re.sub(r", fp: [0-9a-f]{8}/[0-9a-f]{8}\}", "}", after)
    assert re.sub(r"(?m)^ *fp: [0-9a-f]{8}/[0-9a-f]{8}\n", "", stripped) == RUNBOOK
    assert (f"title: {{en: Demo runbook, zh: 演示运行手册, fp: {short('Demo runbook')}/"
            f"{short('演示运行手册')}}}   # end-of-line comment") in after
    # A new key goes after the text's last key, before the comment that follows it.
    assert "  zh: '检查训练进程是否存活'\n  fp: " in after
    assert after.index("  # a comment after the last key of a text") > after.index("  zh: '检查")
    data = yaml.safe_load(after)
    explanation = data["conclusions"]["gone"]["explanation"]
    assert explanation["fp"] == f"{short(explanation['en'])}/{short(explanation['zh'])}"


def test_stamped_file_lints_clean_and_stamping_again_changes_nothing(runbook_cli, runbook: Path) -> None:
    assert runbook_cli("i18n", "stamp", str(runbook)).returncode == 0
    stamped = runbook.read_text("utf-8")
    out = runbook_cli("lint", "--strict", str(runbook))
    assert (out.returncode, out.stdout) == (0, ""), out.stdout
    out = runbook_cli("i18n", "stamp", str(runbook))
    assert (out.returncode, out.stdout) == (0, "")
    assert "0 fingerprint(s) written in 0 of 1" in out.stderr
    assert runbook.read_text("utf-8") == stamped


def test_one_sided_change_warns_and_stamp_refuses_it_without_accept(runbook_cli, runbook: Path) -> None:
    runbook_cli("i18n", "stamp", str(runbook))
    runbook.write_text(runbook.read_text("utf-8").replace("en: All fine", "en: Everything is fine"))
    out = runbook_cli("lint", str(runbook))
    assert out.returncode == 0
    warning = (f"{runbook}:39:41: conclusions.fine.title.zh: warning: stale translation: "
               "conclusions.fine.title.en changed since conclusions.fine.title.zh was translated "
               f"(update the Chinese, then run: runbook i18n stamp {runbook})")
    assert out.stdout.splitlines() == [warning]
    assert runbook_cli("lint", "--strict", str(runbook)).returncode == 2
    before = runbook.read_text("utf-8")
    out = runbook_cli("i18n", "stamp", str(runbook))
    assert out.returncode == 1
    assert out.stdout.splitlines() == [warning]
    assert "1 stale translation(s) left unstamped" in out.stderr
    assert runbook.read_text("utf-8") == before
    out = runbook_cli("i18n", "stamp", "--accept", str(runbook))
    assert out.returncode == 0
    assert "1 fingerprint(s) written (1 accepted as in step)" in out.stdout
    assert runbook_cli("lint", "--strict", str(runbook)).returncode == 0


def test_chinese_changed_alone_points_at_the_english(runbook_cli, runbook: Path) -> None:
    runbook_cli("i18n", "stamp", str(runbook))
    runbook.write_text(runbook.read_text("utf-8").replace("zh: 第一版", "zh: 第一个版本"))
    out = runbook_cli("lint", str(runbook))
    assert "changelog[0].en: warning: stale translation: changelog[0].zh changed since " \
           "changelog[0].en was translated (update the English" in out.stdout


def test_both_sides_changed_is_an_outdated_fingerprint_that_stamp_refreshes(runbook_cli,
                                                                              runbook: Path) -> None:
    runbook_cli("i18n", "stamp", str(runbook))
    runbook.write_text(runbook.read_text("utf-8").replace("en: All fine", "en: Everything is fine")
                       .replace("zh: 一切正常", "zh: 一切都正常"))
    out = runbook_cli("lint", str(runbook))
    assert "conclusions.fine.title.fp: warning: fingerprint out of date" in out.stdout
    out = runbook_cli("i18n", "stamp", str(runbook))
    assert out.returncode == 0 and "1 fingerprint(s) written" in out.stdout
    assert runbook_cli("lint", "--strict", str(runbook)).returncode == 0


def test_block_sequences_without_indent_keep_their_layout(runbook_cli, runbook: Path) -> None:
    text = RUNBOOK.replace("    branches:\n      - when: not result.found\n        goto: gone\n"
                           "        note:", "    branches:\n    - when: not result.found\n"
                           "      goto: gone\n      note:").replace("  - {version", "- {version")
    runbook.write_text(text, "utf-8")
    assert runbook_cli("i18n", "stamp", str(runbook)).returncode == 0
    after = runbook.read_text("utf-8")
    stripped = re.sub(r", fp: [0-9a-f]{8}/[0-9a-f]{8}\}", "}", after)
    assert re.sub(r"(?m)^ *fp: [0-9a-f]{8}/[0-9a-f]{8}\n", "", stripped) == text


def write_article(kb: Path, slug: str, en_body: str, zh_body: str) -> Path:
    folder = kb / slug
    folder.mkdir(parents=True)
    for lang, title, body in (("en", "Demo article", en_body), ("zh", "演示文章", zh_body)):
        (folder / f"{lang}.md").write_text(f"---\nid: {slug}\nlang: {lang}\ntitle: {title}\n"
                                           f"summary: {title}\n---\n\n{body}\n", "utf-8")
    return folder


def test_articles_get_one_fingerprint_of_title_summary_and_body(runbook_cli, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    folder = write_article(kb, "demo", "The English body.", "中文正文。")
    out = runbook_cli("i18n", "stamp", str(kb))
    assert out.returncode == 0, out.stderr
    en_text = "Demo article\nDemo article\nThe English body."
    zh_text = "演示文章\n演示文章\n中文正文。"
    value = f"{short(en_text)}/{short(zh_text)}"
    for lang in ("en", "zh"):
        text = (folder / f"{lang}.md").read_text("utf-8")
        assert text.startswith(f"---\nid: demo\nlang: {lang}\n")
        assert f"\nfp: {value}\n---\n" in text
    assert runbook_cli("lint", "--strict", str(kb)).returncode == 0


def test_article_body_changed_in_one_language_is_stale(runbook_cli, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    folder = write_article(kb, "demo", "The English body.", "中文正文。")
    runbook_cli("i18n", "stamp", str(folder))
    en = folder / "en.md"
    en.write_text(en.read_text("utf-8").replace("The English body.", "The English body, longer."))
    out = runbook_cli("lint", str(kb))
    assert out.returncode == 0
    assert out.stdout.splitlines() == [
        f"{folder / 'zh.md'}:8:1: body: warning: stale translation: {en} changed since "
        f"{folder / 'zh.md'} was translated (update the Chinese, then run: runbook i18n stamp {folder})"]
    assert runbook_cli("lint", "--strict", str(kb)).returncode == 2
    assert runbook_cli("i18n", "stamp", str(kb)).returncode == 1
    assert runbook_cli("i18n", "stamp", "--accept", str(kb)).returncode == 0
    assert runbook_cli("lint", "--strict", str(kb)).returncode == 0


def test_missing_path_and_broken_yaml_are_one_line_exit_2(runbook_cli, tmp_path: Path) -> None:
    out = runbook_cli("i18n", "stamp", str(tmp_path / "nope.yaml"))
    assert out.returncode == 2
    assert out.stderr == f"runbook i18n stamp: {tmp_path / 'nope.yaml'}: no such file or directory\n"
    broken = tmp_path / "broken.yaml"
    broken.write_text("title: {en: a, zh: b}\nsteps: [\n", "utf-8")
    out = runbook_cli("i18n", "stamp", str(broken))
    assert out.returncode == 2
    assert out.stderr.startswith(f"runbook i18n stamp: {broken}:3:1: YAML syntax error")
    assert "Traceback" not in out.stderr
    assert broken.read_text("utf-8") == "title: {en: a, zh: b}\nsteps: [\n"


def test_every_library_file_stamps_to_fp_keys_only(runbook_cli, tmp_path: Path) -> None:
    """The repository's own runbooks and articles: a stamp changes nothing but `fp`."""
    copy = tmp_path / "runbooks"
    shutil.copytree(ROOT / "runbooks", copy)
    shutil.copytree(ROOT / "kb", tmp_path / "kb")
    out = runbook_cli("i18n", "stamp", str(copy), str(tmp_path / "kb"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "re-laid out" not in out.stderr
    for path in sorted(copy.glob("*.yaml")):
        before = yaml.safe_load((ROOT / "runbooks" / path.name).read_text("utf-8"))
        assert without_fp(yaml.safe_load(path.read_text("utf-8"))) == without_fp(before), path.name
    out = runbook_cli("lint", "--strict", str(copy), str(tmp_path / "kb"))
    assert out.returncode == 0, out.stdout
