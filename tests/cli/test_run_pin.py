"""`runbook run ID@VERSION` / `ID@sha256:PREFIX`: run exactly the tree a script was written for."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

RUNBOOK = """\
apiVersion: runbook/v1
id: marker-file
version: 1.2.0
title: {en: Is the marker file there?, zh: 标记文件是否存在？}
summary: {en: Looks for one file., zh: 查找一个文件。}
params:
  path: {type: path, required: true, help: {en: File to look for, zh: 要查找的文件}}
start: look
steps:
  look:
    title: {en: Look for the file, zh: 查找文件}
    check: {type: file, with: {path: "{{ params.path }}"}, timeout: 5s}
    branches:
      - {when: result.exists, goto: present}
    default: absent
conclusions:
  present:
    severity: ok
    taxonomy: []
    title: {en: The file is there, zh: 文件存在}
    explanation: {en: Found it., zh: 找到了。}
  absent:
    severity: warning
    taxonomy: [hardware.storage]
    title: {en: The file is missing, zh: 文件缺失}
    explanation: {en: Not found., zh: 没有找到。}
"""


@pytest.fixture
def library(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A runbook directory on RUNBOOK_PATH, and the marker file the runbook looks for."""
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "marker-file.yaml").write_text(RUNBOOK, "utf-8")
    (tmp_path / "marker").write_text("here\n", "utf-8")
    return folder / "marker-file.yaml", {"RUNBOOK_PATH": str(folder)}


def digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def run_json(runbook_cli, name: str, env: dict[str, str], marker: Path):  # type: ignore[no-untyped-def]
    return runbook_cli("run", name, "--format", "json", "--set", f"path={marker}", env=env,
                       cwd=marker.parent)


@pytest.mark.parametrize("pin", ["@1.2.0", "@sha256:{prefix8}", "@sha256:{full}", "@sha256:{upper}"])
def test_a_matching_pin_runs_and_the_report_names_id_version_and_digest(
        runbook_cli, library, pin: str) -> None:
    file, env = library
    full = digest(file).removeprefix("sha256:")
    pin = pin.format(prefix8=full[:8], full=full, upper=full[:12].upper())
    out = run_json(runbook_cli, "marker-file" + pin, env, file.parent.parent / "marker")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["runbook"]["id"] == "marker-file"
    assert report["runbook"]["version"] == "1.2.0"
    assert report["runbook"]["digest"] == digest(file)
    assert [n["conclusion"]["id"] for n in report["nodes"]] == ["present"]


def test_the_report_of_an_unpinned_run_carries_the_same_identity(runbook_cli, library) -> None:
    file, env = library
    out = run_json(runbook_cli, "marker-file", env, file.parent.parent / "nothing-here")
    assert out.returncode == 1  # a warning conclusion
    report = json.loads(out.stdout)
    assert report["runbook"] | {"title": None} == {"id": "marker-file", "version": "1.2.0",
                                                    "digest": digest(file), "title": None}
    assert [n["conclusion"]["id"] for n in report["nodes"]] == ["absent"]


def test_another_version_is_refused_in_one_line(runbook_cli, library) -> None:
    file, env = library
    out = run_json(runbook_cli, "marker-file@1.3.0", env, file.parent.parent / "marker")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"runbook: {file}: marker-file is version 1.2.0, not the pinned version 1.3.0 (check out "
        "the runbook repository at the commit that has marker-file 1.3.0 and put it on "
        "RUNBOOK_PATH, or drop the pin '@1.3.0')\n")


def test_a_changed_file_no_longer_matches_its_digest_pin(runbook_cli, library) -> None:
    file, env = library
    pinned = digest(file)[: len("sha256:") + 10]
    file.write_text(RUNBOOK.replace("Found it.", "Found the file."), "utf-8")  # same version
    out = run_json(runbook_cli, f"marker-file@{pinned}", env, file.parent.parent / "marker")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr.startswith(f"runbook: {file}: marker-file is digest {digest(file)[:19]}..., "
                                 f"not the pinned digest {pinned} (check out the runbook repository")
    assert out.stderr.endswith(f"or drop the pin '@{pinned}')\n") and out.stderr.count("\n") == 1


@pytest.mark.parametrize("pin", ["@1.2", "@", "@v1.2.0", "@sha256:abc1234", "@sha256:xyz12345"])
def test_a_malformed_pin_says_the_expected_form(runbook_cli, library, pin: str) -> None:
    _, env = library
    out = runbook_cli("run", f"marker-file{pin}", env=env)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (f"runbook: 'marker-file{pin}': {pin[1:]!r} is not a version or digest "
                          "pin (expected ID@MAJOR.MINOR.PATCH or ID@sha256:HEX with at least 8 hex "
                          "digits)\n")


def test_every_command_that_finds_a_runbook_honours_the_pin(runbook_cli, library) -> None:
    file, env = library
    shown = runbook_cli("show", "marker-file@1.2.0", env=env)
    assert shown.returncode == 0 and shown.stdout.startswith("marker-file 1.2.0: ")
    refused = runbook_cli("show", "marker-file@2.0.0", env=env)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith(f"runbook: {file}: marker-file is version 1.2.0, not the "
                                     "pinned version 2.0.0 (")
