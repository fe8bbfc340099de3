"""`runbook migrate` as a user and a CI job run it: in place, --check, --diff, and what then loads."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "migrate"
NAME = "checkpoint-stale.yaml"
TESTS = DATA / "checkpoint-stale.tests.yaml"


def beta_dir(tmp_path: Path, name: str = "beta") -> Path:
    """A directory holding the v1beta1 fixture and its tests file, as a runbook repo would."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(DATA / "v1beta1" / NAME, folder / NAME)
    shutil.copy(TESTS, folder / TESTS.name)
    return folder


def test_migrate_rewrites_in_place_and_the_result_walks_like_the_hand_written_v1(
        runbook_cli, tmp_path: Path) -> None:
    beta = beta_dir(tmp_path)
    out = runbook_cli("migrate", str(beta))
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout == f"migrated {beta / NAME}: runbook/v1beta1 -> runbook/v1\n"
    assert "apiVersion: runbook/v1\n" in (beta / NAME).read_text("utf-8")
    assert "# Step 2: the usual cause of a saver that stops." in (beta / NAME).read_text("utf-8")

    again = runbook_cli("migrate", str(beta))
    assert (again.returncode, again.stdout) == (0, f"{beta / NAME}: already runbook/v1\n")
    lint = runbook_cli("lint", str(beta / NAME))
    assert (lint.returncode, lint.stdout) == (0, "")

    hand = tmp_path / "v1"
    hand.mkdir()
    shutil.copy(DATA / "v1" / NAME, hand / NAME)
    shutil.copy(TESTS, hand / TESTS.name)
    migrated_run = runbook_cli("test", "--format", "json", str(beta))
    hand_run = runbook_cli("test", "--format", "json", str(hand))
    assert migrated_run.returncode == 0, migrated_run.stdout + migrated_run.stderr
    assert hand_run.returncode == 0, hand_run.stdout + hand_run.stderr
    cases = json.loads(migrated_run.stdout)["cases"]
    assert len(cases) == 4 and all(not c["failures"] for c in cases)
    assert cases == json.loads(hand_run.stdout)["cases"]


def test_check_changes_nothing_and_exits_1_until_migrated(runbook_cli, tmp_path: Path) -> None:
    beta = beta_dir(tmp_path)
    before = (beta / NAME).read_bytes()
    out = runbook_cli("migrate", "--check", str(beta / NAME))
    assert out.returncode == 1
    assert out.stdout == f"{beta / NAME}: needs migrating: runbook/v1beta1 -> runbook/v1\n"
    assert (beta / NAME).read_bytes() == before
    assert runbook_cli("migrate", str(beta)).returncode == 0
    after = runbook_cli("migrate", "--check", str(beta))
    assert (after.returncode, after.stdout) == (0, f"{beta / NAME}: already runbook/v1\n")


def test_check_without_paths_looks_at_the_search_path(runbook_cli, tmp_path: Path) -> None:
    beta = beta_dir(tmp_path)
    out = runbook_cli("migrate", "--check", env={"RUNBOOK_PATH": str(beta)}, cwd=tmp_path)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert f"{beta / NAME}: needs migrating: runbook/v1beta1 -> runbook/v1" in lines
    # The repository's own runbooks are on the search path too, and all current.
    assert len(lines) > 1 and all(line.endswith(": already runbook/v1") for line in lines[1:])


def test_diff_prints_a_patch_that_git_applies_to_the_same_result(runbook_cli, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    beta = beta_dir(tmp_path)
    shutil.copytree(beta, repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    out = runbook_cli("migrate", "--diff", NAME, cwd=repo)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"--- a/{NAME}\n+++ b/{NAME}\n")
    assert "-apiVersion: runbook/v1beta1\n+apiVersion: runbook/v1\n" in out.stdout
    assert (repo / NAME).read_bytes() == (beta / NAME).read_bytes()  # nothing written
    subprocess.run(["git", "apply"], input=out.stdout, text=True, cwd=repo, check=True)
    assert runbook_cli("migrate", str(beta)).returncode == 0
    assert (repo / NAME).read_text("utf-8") == (beta / NAME).read_text("utf-8")


def test_problems_left_after_migrating_are_printed_like_lint_and_exit_2(
        runbook_cli, tmp_path: Path) -> None:
    beta = beta_dir(tmp_path)
    text = (beta / NAME).read_text("utf-8")
    (beta / NAME).write_text(text.replace("    title_zh: 检查点所在磁盘已满\n", "")
                             .replace("then: disk-full", "then: disk-ful"), "utf-8")
    out = runbook_cli("migrate", str(beta / NAME))
    assert out.returncode == 2
    assert out.stdout == f"migrated {beta / NAME}: runbook/v1beta1 -> runbook/v1\n"
    problems = out.stderr.splitlines()
    assert len(problems) == 2, out.stderr
    assert problems[0].startswith(f"{beta / NAME}:")
    assert problems[0].endswith("steps.disk-space.branches[0].goto: no step or conclusion named "
                                "'disk-ful' (did you mean 'disk-full'?)")
    assert problems[1].endswith("conclusions.disk-full.title: missing Chinese translation (zh)")
    lint = runbook_cli("lint", str(beta / NAME))
    assert lint.stdout.splitlines() == problems


def test_an_unknown_api_version_is_one_line_and_nothing_is_written(runbook_cli, tmp_path: Path) -> None:
    beta = beta_dir(tmp_path)
    text = (beta / NAME).read_text("utf-8").replace("runbook/v1beta1\n", "runbook/v2\n", 1)
    (beta / NAME).write_text(text, "utf-8")
    out = runbook_cli("migrate", str(beta))
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (f"{beta / NAME}:4:13: apiVersion: unsupported apiVersion 'runbook/v2': "
                          "this engine reads runbook/v1 (a newer format needs a newer engine: "
                          "pip install -U runbook)\n")
    assert (beta / NAME).read_text("utf-8") == text


def test_a_missing_path_is_a_usage_error(runbook_cli, tmp_path: Path) -> None:
    out = runbook_cli("migrate", str(tmp_path / "nope"))
    assert out.returncode == 2
    assert out.stderr == f"runbook migrate: {tmp_path / 'nope'}: no such file or directory\n"
