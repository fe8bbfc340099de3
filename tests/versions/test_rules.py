"""Semantic versions, a runbook's behaviour, and the versioning rules of `lint --base`."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from runbook.format.problems import DocPath, format_path
from runbook.versions.rules import behaviour, check_version, differences, parse_semver, removed_nodes

ROOT = Path(__file__).resolve().parents[2]

DOC: dict[str, Any] = {
    "id": "demo", "version": "1.2.3", "start": "a",
    "title": {"en": "Demo", "zh": "演示"},
    "params": {"log": {"type": "path", "help": {"en": "The log", "zh": "日志"}}},
    "steps": {"a": {"title": {"en": "A", "zh": "甲"},
                    "check": {"type": "process", "with": {"match": "train"}, "timeout": "5s"},
                    "branches": [{"when": "result.x", "goto": "b"}, {"when": "result.y", "goto": "c"}],
                    "default": "c"}},
    "conclusions": {
        "b": {"severity": "warning", "taxonomy": ["hang.dataloader"], "title": {"en": "B", "zh": "乙"},
              "explanation": {"en": "b", "zh": "乙"},
              "fixes": [{"title": {"en": "Fix", "zh": "修复"}, "run": "echo hi", "effect": "read-only"}]},
        "c": {"severity": "ok", "taxonomy": [], "title": {"en": "C", "zh": "丙"},
              "explanation": {"en": "c", "zh": "丙"}}},
    "changelog": [{"version": "1.2.3", "en": "Third", "zh": "第三版"}],
}


def doc(**changes: Any) -> dict[str, Any]:
    """A copy of DOC with dotted paths set (`steps.a.default='b'`) or removed (value None)."""
    out = copy.deepcopy(DOC)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = out
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is None:
            del node[last]
        else:
            node[int(last) if last.isdigit() else last] = value
    return out


def problems(old: dict[str, Any] | None, new: dict[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def report(path: DocPath, message: str) -> None:
        found.append((format_path(path), message))

    check_version(old, new, "main", report)
    return found


@pytest.mark.parametrize("lower, higher", [
    ("1.0.0", "1.0.1"), ("1.9.0", "1.10.0"), ("1.0.0", "2.0.0"), ("1.0.0-rc.1", "1.0.0"),
    ("1.0.0-alpha", "1.0.0-alpha.1"), ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
    ("1.0.0-2", "1.0.0-10"), ("1.0.0-beta.11", "1.0.0-rc.1"),
])
def test_semver_precedence(lower: str, higher: str) -> None:
    low, high = parse_semver(lower), parse_semver(higher)
    assert low is not None and high is not None
    assert low < high and not high < low and low != high and str(low) == lower


@pytest.mark.parametrize("text", ["1.0", "01.0.0", "1.0.0-", "v1.0.0", "1.0.0+build", ""])
def test_not_a_semver(text: str) -> None:
    assert parse_semver(text) is None


def test_next_versions() -> None:
    version = parse_semver("1.2.3")
    assert version is not None
    assert [str(version.next_major()), str(version.next_minor()), str(version.next_patch())] == [
        "2.0.0", "1.3.0", "1.2.4"]
    pre = parse_semver("1.3.0-rc.1")
    assert pre is not None and str(pre.next_patch()) == "1.3.0"


def test_texts_are_not_behaviour() -> None:
    new = doc(title={"en": "Other", "zh": "其他"}, steps__a__title={"en": "X", "zh": "某"},
              params__log__help={"en": "Where the log is", "zh": "日志位置"})
    assert behaviour(new) == behaviour(DOC)


def test_equal_behaviour_written_differently_is_no_change() -> None:
    new = doc(steps__a__check__timeout=5, params__log__required=False)
    assert differences(behaviour(DOC), behaviour(new)) == []


def test_differences_name_doc_paths() -> None:
    swapped = list(reversed(DOC["steps"]["a"]["branches"]))
    new = doc(steps__a__branches=swapped, conclusions__b__fixes__0__run="echo bye",
              params__log__default="x.log", requires=">=0.2")
    assert differences(behaviour(DOC), behaviour(new)) == [
        "requires", "params.log.default (added)", "steps.a.branches[0].when",
        "steps.a.branches[0].goto", "steps.a.branches[1].when", "steps.a.branches[1].goto",
        "conclusions.b.fixes[0].run"]


def test_a_value_of_another_type_is_a_change() -> None:
    new = doc(steps__a__check__with={"match": "train", "depth": 1})
    newer = doc(steps__a__check__with={"match": "train", "depth": True})
    assert differences(behaviour(new), behaviour(newer)) == ["steps.a.check.with.depth"]


def test_removed_nodes() -> None:
    new = doc(conclusions__b=None)
    assert removed_nodes(DOC, new) == ["conclusions.b"]


def test_behaviour_change_without_bump() -> None:
    [(path, message)] = problems(DOC, doc(steps__a__default="b"))
    assert path == "version"
    assert message == ("behaviour changed since main (steps.a.default) but version is still 1.2.3 "
                       "(bump it to 1.3.0 for new behaviour or 1.2.4 for a fix, and add a changelog entry)")


def test_many_changes_are_summarised() -> None:
    new = doc(steps__a__check__with={"match": "x", "a": 1, "b": 2, "c": 3, "d": 4})
    [(_, message)] = problems(DOC, new)
    assert "steps.a.check.with.match, steps.a.check.with.a (added)" in message
    assert "and 1 more)" in message


def test_bump_with_changelog_passes_and_without_fails() -> None:
    bumped = doc(steps__a__default="b", version="1.3.0")
    assert problems(DOC, bumped) == [("changelog", "no changelog entry for version 1.3.0 (add `- "
                                      "{version: 1.3.0, en: what changed, zh: 改动说明}` under changelog:)")]
    bumped["changelog"].insert(0, {"version": "1.3.0", "en": "Goes to b", "zh": "转到乙"})
    assert problems(DOC, bumped) == []


def test_changelog_needs_both_languages() -> None:
    new = doc(version="1.2.4", changelog=[{"version": "1.2.4", "en": "  ", "zh": "修复"}])
    assert problems(DOC, new) == [("changelog[0].en", "the changelog entry for 1.2.4 has no English "
                                   "text (en: say what changed)")]


def test_removal_needs_a_major_bump() -> None:
    new = doc(conclusions__b=None, steps__a__branches=[{"when": "result.y", "goto": "c"}],
              version="1.3.0", changelog=[{"version": "1.3.0", "en": "No b", "zh": "去掉乙"}])
    [(path, message)] = problems(DOC, new)
    assert path == "version" and message.startswith("conclusions.b removed since main")
    assert "bump 1.2.3 to 2.0.0" in message
    new.update(version="2.0.0", changelog=[{"version": "2.0.0", "en": "No b", "zh": "去掉乙"}])
    assert problems(DOC, new) == []


def test_version_never_goes_down() -> None:
    new = doc(version="1.2.2", changelog=[{"version": "1.2.2", "en": "Back", "zh": "回退"}])
    assert problems(DOC, new) == [("version", "version went down from 1.2.3 at main to 1.2.2 "
                                   "(a version only goes up: use 1.2.4 or higher)")]


def test_a_new_file_needs_only_its_changelog_entry() -> None:
    assert problems(None, DOC) == []
    assert [p for p, _ in problems(None, doc(changelog=None))] == ["version"]


def test_every_library_runbook_has_a_changelog_entry_for_its_version() -> None:
    for path in sorted((ROOT / "runbooks").glob("*.yaml")):
        if path.name.endswith(".tests.yaml"):
            continue
        data = yaml.safe_load(path.read_text("utf-8"))
        assert problems(None, data) == [], path.name
