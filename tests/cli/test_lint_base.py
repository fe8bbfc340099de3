"""`runbook lint --base REV`: versions that mean something, checked against a real git history."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

RUNBOOK = """\
apiVersion: runbook/v1
id: demo
version: 1.0.0
title: {en: Demo runbook, zh: 演示运行手册}
summary:
  en: Checks that the training process is alive
  zh: 检查训练进程是否存活
start: alive
steps:
  alive:
    title: {en: Is the process alive?, zh: 进程是否存活？}
    check: {type: process, with: {match: train}, timeout: 5s}
    branches:
      - when: not result.found
        goto: gone
    default: fine
conclusions:
  gone:
    severity: warning
    taxonomy: [hang.dataloader]
    title: {en: The process is gone, zh: 进程不见了}
    explanation: {en: No process matched, zh: 没有匹配的进程}
  fine:
    severity: ok
    taxonomy: []
    title: {en: All fine, zh: 一切正常}
    explanation: {en: The process runs, zh: 进程在运行}
changelog:
  - {version: 1.0.0, en: First version, zh: 第一版}
"""
ENTRY_1_1 = "  - {version: 1.1.0, en: Looks for the trainer, zh: 改为查找 trainer 进程}\n"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A runbook repository with one commit holding runbooks/demo.yaml."""
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "demo.yaml").write_text(RUNBOOK, "utf-8")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "demo 1.0.0")
    return tmp_path


def edit(repo: Path, *pairs: tuple[str, str]) -> Path:
    path = repo / "runbooks" / "demo.yaml"
    text = path.read_text("utf-8")
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new, 1)
    path.write_text(text, "utf-8")
    return path


def lint(runbook_cli, repo: Path, *args: str, base: str = "main"):  # type: ignore[no-untyped-def]
    return runbook_cli("lint", f"--base={base}", *args, str(repo / "runbooks" / "demo.yaml"), cwd=repo)


def test_unchanged_file_passes(runbook_cli, repo: Path) -> None:
    out = lint(runbook_cli, repo)
    assert (out.returncode, out.stdout) == (0, ""), out.stderr


def test_behaviour_change_without_bump_fails_at_version(runbook_cli, repo: Path) -> None:
    path = edit(repo, ("when: not result.found", "when: not result.found or result.zombie"))
    out = lint(runbook_cli, repo)
    assert out.returncode == 2
    [line] = out.stdout.splitlines()
    assert line.startswith(f"{path}:3:10: version: behaviour changed since main "
                           "(steps.alive.branches[0].when) but version is still 1.0.0")
    assert "bump it to 1.1.0 for new behaviour or 1.0.1 for a fix" in line


def test_check_parameters_severity_and_fix_commands_are_behaviour(runbook_cli, repo: Path) -> None:
    edit(repo, ("with: {match: train}", "with: {match: trainer}"),
         ("severity: ok", "severity: info"))
    out = lint(runbook_cli, repo)
    assert out.returncode == 2
    assert "(steps.alive.check.with.match, conclusions.fine.severity)" in out.stdout


def test_bump_with_changelog_in_both_languages_passes(runbook_cli, repo: Path) -> None:
    edit(repo, ("with: {match: train}", "with: {match: trainer}"),
         ("version: 1.0.0", "version: 1.1.0"), ("changelog:\n", "changelog:\n" + ENTRY_1_1))
    out = lint(runbook_cli, repo)
    assert (out.returncode, out.stdout) == (0, ""), out.stdout


def test_new_version_without_changelog_entry_fails(runbook_cli, repo: Path) -> None:
    path = edit(repo, ("with: {match: train}", "with: {match: trainer}"),
                ("version: 1.0.0", "version: 1.1.0"))
    out = lint(runbook_cli, repo)
    assert out.returncode == 2
    [line] = out.stdout.splitlines()
    assert line.startswith(f"{path}:29:3: changelog: no changelog entry for version 1.1.0")


def test_changelog_entry_needs_real_text_in_both_languages(runbook_cli, repo: Path) -> None:
    edit(repo, ("version: 1.0.0", "version: 1.0.1"),
         ("changelog:\n", "changelog:\n  - {version: 1.0.1, en: Typo fixed, zh: ' '}\n"))
    out = lint(runbook_cli, repo)
    assert out.returncode == 2
    assert "changelog[0].zh: the changelog entry for 1.0.1 has no Chinese text" in out.stdout


def test_removed_conclusion_needs_a_major_version(runbook_cli, repo: Path) -> None:
    branch = "    branches:\n      - when: not result.found\n        goto: gone\n"
    conclusion = RUNBOOK[RUNBOOK.index("  gone:\n"):RUNBOOK.index("  fine:\n")]
    edit(repo, (branch, ""), (conclusion, ""), ("version: 1.0.0", "version: 1.1.0"),
         ("changelog:\n", "changelog:\n" + ENTRY_1_1))
    out = lint(runbook_cli, repo)
    assert out.returncode == 2
    assert "version: conclusions.gone removed since main" in out.stdout
    assert "bump 1.0.0 to 2.0.0" in out.stdout
    edit(repo, ("version: 1.1.0", "version: 2.0.0"), ("version: 1.1.0,", "version: 2.0.0,"))
    out = lint(runbook_cli, repo)
    assert (out.returncode, out.stdout) == (0, ""), out.stdout


def test_text_only_change_needs_no_bump(runbook_cli, repo: Path) -> None:
    edit(repo, ("en: All fine", "en: Everything is fine"), ("zh: 一切正常", "zh: 一切都正常"),
         ("  en: Checks that the training process is alive\n",
          "  en: Checks that the training process still runs\n"),
         ("  zh: 检查训练进程是否存活\n", "  zh: 检查训练进程是否仍在运行\n"))
    out = lint(runbook_cli, repo, "--strict")
    assert (out.returncode, out.stdout) == (0, ""), out.stdout


def test_version_going_down_fails(runbook_cli, repo: Path) -> None:
    edit(repo, ("version: 1.0.0", "version: 0.9.0"),
         ("changelog:\n", "changelog:\n  - {version: 0.9.0, en: Older, zh: 更旧}\n"))
    out = lint(runbook_cli, repo)
    assert out.returncode == 2
    assert "version went down from 1.0.0 at main to 0.9.0" in out.stdout


def test_a_file_new_since_base_needs_only_its_changelog_entry(runbook_cli, repo: Path) -> None:
    new = repo / "runbooks" / "other.yaml"
    new.write_text(RUNBOOK.replace("id: demo", "id: other"), "utf-8")
    out = runbook_cli("lint", "--base", "main", str(new), cwd=repo)
    assert (out.returncode, out.stdout) == (0, ""), out.stdout
    new.write_text(RUNBOOK.replace("id: demo", "id: other").replace("version: 1.0.0\n",
                                                                    "version: 1.2.0\n"), "utf-8")
    out = runbook_cli("lint", "--base", "main", str(new), cwd=repo)
    assert out.returncode == 2
    assert "no changelog entry for version 1.2.0" in out.stdout


def test_one_sided_text_change_since_base_is_a_stale_translation(runbook_cli, repo: Path) -> None:
    path = edit(repo, ("en: All fine", "en: Everything is fine"))
    out = lint(runbook_cli, repo)
    assert out.returncode == 0
    assert out.stdout.splitlines() == [
        f"{path}:26:41: conclusions.fine.title.zh: warning: stale translation: conclusions.fine.title.en "
        "changed since conclusions.fine.title.zh was translated (update the Chinese, then run: "
        f"runbook i18n stamp {path})"]
    out = lint(runbook_cli, repo, "--strict")
    assert out.returncode == 2
    assert "0 error(s) and 1 warning(s) in 1 of 1 file(s) (--strict: warnings fail too)" in out.stderr


@pytest.mark.parametrize("base, words", [
    ("no-such-branch", "unknown revision 'no-such-branch'"),
    ("--output=x", "unknown revision '--output=x'"),
])
def test_bad_revision_is_one_line_and_exit_2(runbook_cli, repo: Path, base: str, words: str) -> None:
    out = lint(runbook_cli, repo, base=base)
    assert out.returncode == 2 and out.stdout == ""
    [line] = out.stderr.splitlines()
    assert line.startswith(f"runbook lint: --base {base}: {words}")
    assert "git fetch origin main" in line


def test_file_outside_a_git_work_tree_is_one_line(runbook_cli, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "demo.yaml").write_text(RUNBOOK, "utf-8")
    env = {"GIT_CEILING_DIRECTORIES": str(tmp_path)}  # don't find a repository above tmp
    out = runbook_cli("lint", "--base", "main", str(plain / "demo.yaml"), cwd=plain, env=env)
    assert out.returncode == 2
    [line] = out.stderr.splitlines()
    assert line == (f"runbook lint: --base main: {plain.resolve()} is not in a git work tree "
                    "(compare files inside a git checkout, or lint without --base)")


def test_a_private_repository_is_compared_with_its_own_history(runbook_cli, repo: Path) -> None:
    """Run from this project's checkout: the file's own repository, not the cwd's, is used."""
    first = git(repo, "rev-parse", "HEAD")
    path = edit(repo, ("timeout: 5s", "timeout: 10s"))
    out = runbook_cli("lint", "--base", first, str(path))  # cwd: this project's checkout
    assert out.returncode == 2
    assert "(steps.alive.check.timeout)" in out.stdout


def test_json_counts_warnings(runbook_cli, repo: Path) -> None:
    edit(repo, ("en: All fine", "en: Everything is fine"))
    out = lint(runbook_cli, repo, "--format", "json", "--strict")
    doc = json.loads(out.stdout)
    assert out.returncode == 2
    assert (doc["errors"], doc["warnings"], doc["strict"]) == (0, 1, True)
    assert doc["problems"][0]["path"] == ["conclusions", "fine", "title", "zh"]


def test_the_library_lints_clean_under_strict(runbook_cli) -> None:
    out = runbook_cli("lint", "--strict")
    assert (out.returncode, out.stdout) == (0, ""), out.stdout
