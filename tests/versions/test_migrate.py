"""Migrating runbook files between apiVersions: same tree, same comments, same quoting."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from runbook.format.engine_version import API_VERSION, API_VERSIONS
from runbook.format.loader import load_file, load_text
from runbook.format.roundtrip import guess_indent
from runbook.versions import migrate
from runbook.versions.migrate import MigrateError, migrate_text

DATA = Path(__file__).resolve().parents[1] / "data" / "migrate"
BETA = DATA / "v1beta1" / "checkpoint-stale.yaml"
V1 = DATA / "v1" / "checkpoint-stale.yaml"


def migrated(text: str) -> str:
    result = migrate_text(text)
    assert (result.from_version, result.to_version) == ("runbook/v1beta1", API_VERSION)
    return result.text


def model(runbook: Any) -> dict[str, Any]:
    """The loaded tree without what depends on the file's bytes and place."""
    fields = dataclasses.asdict(runbook)
    return {k: v for k, v in fields.items() if k not in ("path", "digest")}


def test_the_migrated_fixture_loads_cleanly_and_equals_the_hand_written_v1() -> None:
    text = migrated(BETA.read_text("utf-8"))
    result = load_text(text, "migrated.yaml")
    assert result.problems == []
    assert result.runbook is not None
    expected = load_file(V1)
    assert expected.problems == [] and expected.runbook is not None
    assert model(result.runbook) == model(expected.runbook)


def test_every_comment_survives() -> None:
    source = BETA.read_text("utf-8")
    comments = [line.split("#", 1)[1].strip() for line in source.splitlines()
                if re.search(r"(^|\s)#\s", line)]
    assert len(comments) >= 8  # the fixture has comments in every kind of place
    text = migrated(source)
    for comment in comments:
        assert f"# {comment}" in text, comment
    # A blank line and the comment introducing a step stay between the two steps.
    assert "    default: checkpoints-fresh\n\n  # Step 2: the usual cause of a saver that stops.\n" \
           "  disk-space:\n" in text


def test_key_order_and_quoting_are_kept() -> None:
    text = migrated(BETA.read_text("utf-8"))
    assert "        match: '^(9[5-9]|100)%'\n" in text  # single quotes stay single
    assert '      with: {path: "{{ params.dir }}/*.pt"}\n' in text
    top_keys = [line.split(":")[0] for line in text.splitlines() if re.match(r"[a-z]", line)]
    assert top_keys == ["apiVersion", "id", "version", "title", "summary", "tags", "symptoms",
                        "signatures", "params", "start", "steps", "conclusions", "changelog"]
    # `with` takes the place of `params` inside the check, before `timeout`.
    assert re.search(r"      type: command\n      with:\n        run: .*\n        match: .*\n"
                     r"      timeout: 10s\n", text)


def test_one_line_texts_become_flow_mappings_and_block_texts_keep_their_style() -> None:
    text = migrated(BETA.read_text("utf-8"))
    assert "title: {en: No new checkpoint for a long time, zh: 长时间没有写出新的检查点}\n" in text
    assert "        note: {en: No checkpoint at all, zh: 一个检查点都没有}\n" in text
    assert ("    description:\n      en: |\n        Lists the checkpoint files and the age of the "
            "newest one.\n") in text
    assert "      zh: |\n        列出检查点文件及最新文件的修改时间。\n" in text
    assert "_zh:" not in text and "text:" not in text


def test_branches_checks_and_categories_take_their_v1_names() -> None:
    text = migrated(BETA.read_text("utf-8"))
    assert "      - when: not result.exists\n        goto: no-checkpoints\n" in text
    assert '      - {when: "result.newest_age_s > params.max_age_s", goto: disk-space}\n' in text
    assert "    taxonomy: [hardware.storage] # v1: taxonomy list\n" in text
    # A conclusion without a category gets the empty list v1 requires, right after severity.
    assert "    severity: ok\n    taxonomy: []\n" in text
    assert not re.search(r"^\s*-? ?(category|if|then):", text, re.M)
    assert re.findall(r"^\s*params:", text, re.M) == ["params:"]  # the runbook's own, at the top


def test_migrating_twice_changes_nothing() -> None:
    once = migrated(BETA.read_text("utf-8"))
    again = migrate_text(once)
    assert not again.changed and again.text == once


def test_a_text_without_its_chinese_side_is_left_for_the_loader_to_report() -> None:
    source = BETA.read_text("utf-8").replace("    title_zh: 检查点所在磁盘是否已满？\n", "")
    text = migrated(source)
    assert "    title: {en: Is the checkpoint disk full?}\n" in text
    problems = [str(p) for p in load_text(text, "rb.yaml").problems]
    line = text.splitlines().index("    title: {en: Is the checkpoint disk full?}") + 1
    assert problems == [f"rb.yaml:{line}:12: steps.disk-space.title: missing Chinese translation (zh)"]


def test_every_registered_version_chains_to_the_current_one() -> None:
    for start in migrate.MIGRATIONS:
        version, seen = start, []
        while version != API_VERSION:
            assert version not in seen and version in migrate.MIGRATIONS, (start, seen)
            seen.append(version)
            version = migrate.MIGRATIONS[version][0]


def test_every_older_api_version_has_a_migration() -> None:
    # The loader calls these "older: run runbook migrate"; migrate must then know them.
    assert set(migrate.MIGRATIONS) >= set(API_VERSIONS[:-1])
    assert API_VERSIONS[-1] == API_VERSION and API_VERSION not in migrate.MIGRATIONS


def test_migrations_chain_until_the_current_version(monkeypatch: pytest.MonkeyPatch) -> None:
    def from_v0(doc: Any) -> None:  # an even older draft that called the runbook's id `name`
        migrate.v1beta1.rename(doc, "name", "id")

    monkeypatch.setitem(migrate.MIGRATIONS, "runbook/v0", ("runbook/v1beta1", from_v0))
    source = BETA.read_text("utf-8").replace("apiVersion: runbook/v1beta1\nid:",
                                             "apiVersion: runbook/v0\nname:")
    result = migrate_text(source)
    assert (result.from_version, result.to_version) == ("runbook/v0", API_VERSION)
    loaded = load_text(result.text, "rb.yaml")
    assert loaded.problems == [] and loaded.runbook is not None
    assert loaded.runbook.id == "checkpoint-stale"


@pytest.mark.parametrize(("version", "where"), [("runbook/v2", (4, 13)), ("other/v1", (4, 13))])
def test_an_unknown_or_newer_api_version_is_one_precise_error(version: str,
                                                              where: tuple[int, int]) -> None:
    source = BETA.read_text("utf-8").replace("runbook/v1beta1\n", f"{version}\n", 1)
    with pytest.raises(MigrateError) as info:
        migrate_text(source)
    problem = str(info.value.problem("rb.yaml"))
    assert problem == (f"rb.yaml:{where[0]}:{where[1]}: apiVersion: unsupported apiVersion "
                       f"'{version}': this engine reads runbook/v1 (a newer format needs a newer "
                       "engine: pip install -U runbook)")


def test_the_loader_sends_an_older_file_to_runbook_migrate() -> None:
    result = load_file(BETA)
    assert result.runbook is None
    assert [str(p) for p in result.problems] == [
        f"{BETA}:4:13: apiVersion: apiVersion 'runbook/v1beta1' is an older format: "
        f"run `runbook migrate {BETA}`"]


WIDE = """\
apiVersion: runbook/v1beta1
id: wide
version: 1.0.0
title: Four-space file
title_zh: 四空格缩进的文件
summary: Indented by four, dashes at two.
summary_zh: 缩进四格，短横线缩进两格。
start: look
steps:
    look:
        title: Look
        title_zh: 查看
        check:
            type: file
            params: {path: /tmp}
        branches:
          - if: result.exists
            then: done
        default: done
conclusions:
    done:
        severity: ok
        title: Done
        title_zh: 完成
        explanation: Nothing to do.
        explanation_zh: 无需处理。
"""


def test_the_file_keeps_its_own_indentation() -> None:
    assert guess_indent(WIDE) == (4, 2)
    text = migrated(WIDE)
    assert "        check:\n            type: file\n            with: {path: /tmp}\n" in text
    assert "          - when: result.exists\n            goto: done\n" in text
    assert "    done:\n        severity: ok\n        taxonomy: []\n" in text
    loaded = load_text(text, "wide.yaml")
    assert loaded.problems == [] and loaded.runbook is not None


def test_indentation_defaults_to_this_repository_style() -> None:
    assert guess_indent("a: 1\n") == (2, 2)
    assert guess_indent("a:\n  b:\n    - 1\n") == (2, 2)
    assert guess_indent("a:\n- 1\nb:\n   c: 2\n") == (3, 0)


def test_comments_on_both_sides_of_a_text_are_both_kept() -> None:
    source = BETA.read_text("utf-8").replace(
        "title: No new checkpoint for a long time\ntitle_zh: 长时间没有写出新的检查点\n",
        "title: No new checkpoint for a long time  # shown in `runbook list`\n"
        "# the translation was reviewed\n"
        "title_zh: 长时间没有写出新的检查点  # reviewed 2025-03\n")
    text = migrated(source)
    start = text.index("title: {en: No new checkpoint")
    lines = text[start:].splitlines()[:3]
    assert lines[0].endswith("# shown in `runbook list`")
    assert lines[1:] == ["# the translation was reviewed", "# reviewed 2025-03"]
    assert load_text(text, "rb.yaml").problems == []
