"""CONTRIBUTING.md walked as a newcomer would, and the files a contributor meets (CI, hooks, PR).

The worked example's files are the code blocks marked `<!-- file: PATH -->` in
CONTRIBUTING.md; the walk scaffolds the runbook with `runbook new`, replaces the
scaffold by those blocks and runs every command the guide names, in its order,
in a git repository of its own (`./runbooks` and `./kb` are on the search path).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runbook.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
GUIDES = {"en": ROOT / "CONTRIBUTING.md", "zh": ROOT / "CONTRIBUTING.zh.md"}
EXAMPLE = "dataloader-open-files"
EXAMPLE_FILES = [f"runbooks/{EXAMPLE}.yaml", f"runbooks/{EXAMPLE}.tests.yaml",
                 f"kb/{EXAMPLE}/en.md", f"kb/{EXAMPLE}/zh.md"]
_MARKED = re.compile(r"^<!-- file: (\S+) -->\n(`{3,})[a-z]*\n(.*?)^\2$", re.M | re.S)
_FENCE = re.compile(r"^(`{3,})([a-z]*)\n(.*?)^\1$", re.M | re.S)


def marked_files(guide: Path) -> dict[str, str]:
    """PATH -> content of each code block marked `<!-- file: PATH -->`."""
    return {m.group(1): m.group(3) for m in _MARKED.finditer(guide.read_text("utf-8"))}


def blocks(guide: Path, lang: str) -> list[str]:
    return [m.group(3) for m in _FENCE.finditer(guide.read_text("utf-8")) if m.group(2) == lang]


def console_commands(guide: Path) -> list[str]:
    """The `runbook ...` commands typed in the guide's console blocks, comments removed."""
    return [line[2:].split("  #")[0].strip() for block in blocks(guide, "console")
            for line in block.splitlines() if line.startswith("$ runbook ")]


def parses(command: str) -> None:
    """Fail unless `command` is a real `runbook` subcommand line with real flags."""
    argv = shlex.split(re.sub(r"\$\{\{[^}]*\}\}", "main", command))
    assert argv[0] == "runbook", command
    try:
        build_parser().parse_args(argv[1:])
    except SystemExit as exc:
        pytest.fail(f"`{command}` is not a valid runbook command line (argparse exit {exc.code})")


# ---- the guides ----


def test_the_guide_marks_the_worked_examples_four_files() -> None:
    files = marked_files(GUIDES["en"])
    assert list(files) == EXAMPLE_FILES
    assert all(content.strip() for content in files.values())


def test_the_chinese_guide_has_the_same_code_blocks_and_commands() -> None:
    assert marked_files(GUIDES["zh"]) == marked_files(GUIDES["en"])
    for lang in ("yaml", "text", "markdown"):
        assert blocks(GUIDES["zh"], lang) == blocks(GUIDES["en"], lang), lang
    assert console_commands(GUIDES["zh"]) == console_commands(GUIDES["en"])
    zh = GUIDES["zh"].read_text("utf-8")
    prose = _FENCE.sub("", zh)
    assert len(re.findall(r"[\u4e00-\u9fff]", prose)) > 1500  # written in Chinese, not copied


def test_every_command_in_the_guides_is_a_real_command_line() -> None:
    commands = console_commands(GUIDES["en"])
    for needed in ("runbook new", "runbook test --coverage", "runbook site serve",
                   "runbook i18n stamp", "runbook lint --strict", "runbook lint --strict --base origin/main",
                   "runbook migrate", "runbook test --replay", "--record"):
        assert any(needed in command for command in commands), needed
    assert any(re.match(r"runbook run \S+@\d+\.\d+\.\d+ ", command) for command in commands)
    for command in commands:
        parses(command)


# ---- CI, hooks, pull-request template ----


def test_the_workflow_lints_tests_and_builds_the_site_like_the_guide() -> None:
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "runbooks.yml").read_text("utf-8"))
    triggers = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers and triggers["push"]["branches"] == ["main"]
    (job,) = doc["jobs"].values()
    steps = job["steps"]
    uses = {step["uses"].split("@")[0]: step for step in steps if "uses" in step}
    assert uses["actions/checkout"]["with"]["fetch-depth"] == 0
    assert str(uses["actions/setup-python"]["with"]["python-version"]) == "3.11"
    runs = {step["run"]: step.get("if", "") for step in steps if "run" in step}
    assert "pip install -e '.[site]'" in runs
    assert runs["runbook lint --strict --base origin/${{ github.base_ref }}"] == \
        "github.event_name == 'pull_request'"
    assert runs["runbook lint --strict"] == "github.event_name != 'pull_request'"
    assert "runbook test --coverage" in runs and "runbook site build --output _site" in runs
    assert uses["actions/upload-artifact"]["with"]["path"] == "_site"
    order = [step.get("run", step.get("uses", "")) for step in steps]
    assert order.index("runbook site build --output _site") < order.index(
        next(u for u in order if u.startswith("actions/upload-artifact")))
    for command in runs:
        if command.startswith("runbook "):
            parses(command)


def test_the_pre_commit_hooks_run_lint_and_the_tests() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text("utf-8"))
    by_id = {hook["id"]: hook for hook in hooks}
    assert by_id["runbook-lint"]["entry"] == "runbook lint --strict"
    assert by_id["runbook-test"]["entry"] == "runbook test"
    for hook in hooks:
        assert hook["language"] == "python" and hook["pass_filenames"] is False and hook["name"]
        parses(hook["entry"])
        pattern = re.compile(hook["files"])
        for path in ("runbooks/x.yaml", "runbooks/x.tests.yml", "kb/x/zh.md"):
            assert pattern.search(path), (hook["id"], path)
        assert not pattern.search("engine/runbook/cli/new.py")
    # the configuration the guide shows uses these hooks (pre-commit runs `entry` then `args`)
    configs = [yaml.safe_load(b) for b in blocks(GUIDES["en"], "yaml") if b.startswith("repos:")]
    assert len(configs) == 1
    remote = configs[0]["repos"][0]
    assert {hook["id"] for hook in remote["hooks"]} == set(by_id)
    for hook in remote["hooks"]:
        parses(" ".join([by_id[hook["id"]]["entry"], *hook.get("args", [])]))


def test_the_pull_request_template_is_the_guides_checklist_in_both_languages() -> None:
    text = (ROOT / ".github" / "pull_request_template.md").read_text("utf-8")
    for command in ("runbook test --coverage", "runbook site serve", "runbook i18n stamp",
                    "runbook lint --strict --base origin/main", "TODO(runbook new)"):
        assert command in text, command
    items = [line for line in text.splitlines() if line.startswith("- [ ] ")]
    assert len(items) >= 5 and all(" / " in item and re.search(r"[\u4e00-\u9fff]", item) for item in items)


# ---- the walk ----


class Walk:
    """A contributor's checkout: runs `runbook` and `git` there as the guide says."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {k: v for k, v in os.environ.items() if k not in ("RUNBOOK_PATH", "RUNBOOK_KB_PATH")}
        self.env.update({"RUNBOOK_LANG": "en", "GIT_AUTHOR_NAME": "c", "GIT_AUTHOR_EMAIL": "c@example.org",
                         "GIT_COMMITTER_NAME": "c", "GIT_COMMITTER_EMAIL": "c@example.org"})

    def runbook(self, command: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([sys.executable, "-m", "runbook", *shlex.split(command)[1:]], cwd=self.root,
                             env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == expect, f"$ {command}\n{out.stdout}\n{out.stderr}"
        return out

    def git(self, *args: str) -> None:
        subprocess.run(["git", *args], cwd=self.root, env=self.env, check=True, capture_output=True)


def test_walk_the_guide_from_runbook_new_to_a_built_site(tmp_path: Path) -> None:
    guide = GUIDES["en"].read_text("utf-8")
    commands = console_commands(GUIDES["en"])
    walk = Walk(tmp_path)
    walk.git("init", "-q", "-b", "main")
    walk.git("commit", "-q", "--allow-empty", "-m", "base")
    walk.git("update-ref", "refs/remotes/origin/main", "HEAD")

    # 2. Scaffold: the files the guide shows, then lint refuses the markers it shows
    new = walk.runbook(next(c for c in commands if c.startswith("runbook new ")))
    for line in re.findall(r"^wrote \S+$", guide, re.M):
        assert line in new.stdout.splitlines()
    lint = walk.runbook(f"runbook lint runbooks/{EXAMPLE}.yaml", expect=2)
    shown = re.search(rf"^runbooks/{EXAMPLE}\.yaml:\d+:\d+: .*$", guide, re.M)
    assert shown and shown.group(0) in lint.stdout.splitlines()
    assert all("TODO left by runbook new" in line for line in lint.stdout.splitlines())

    # 3-5. Write the runbook, its tests and the article
    for path, content in marked_files(GUIDES["en"]).items():
        (tmp_path / path).write_text(content, "utf-8")

    # 6. Test with coverage, then run it for real on this machine
    test = walk.runbook(f"runbook test --coverage runbooks/{EXAMPLE}.yaml")
    assert "4 passed, 0 failed" in test.stdout
    (tmp_path / "train.log").write_text("step 12 loss 2.31\n" + blocks(GUIDES["en"], "text")[0], "utf-8")
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    for minimum, conclusion in ((soft + 1, "open-files-limit-low"), (1, "too-many-tensors-in-flight")):
        if soft == resource.RLIM_INFINITY and minimum != 1:
            continue
        run = walk.runbook(f"runbook run {EXAMPLE} --set log=train.log --set min_open_files={minimum} "
                           "--format json", expect=1)
        (node,) = json.loads(run.stdout)["nodes"]
        assert (node["conclusion"]["id"], node["path"]) == (conclusion, ["read-log", "open-files-limit"])

    # 8. Stamp the translations: fingerprints appear, nothing else changes
    before = yaml.safe_load((tmp_path / EXAMPLE_FILES[0]).read_text("utf-8"))
    walk.runbook(next(c for c in commands if c.startswith("runbook i18n stamp ")))
    stamped = (tmp_path / EXAMPLE_FILES[0]).read_text("utf-8")
    assert re.search(r"\bfp: ['\"]?[0-9a-f]{8}/[0-9a-f]{8}", stamped)
    assert _without_fp(yaml.safe_load(stamped)) == before

    # 9. Lint: the whole library with the new runbook, and against the base branch
    assert walk.runbook("runbook lint --strict").stdout == ""
    walk.runbook("runbook lint --strict --base origin/main runbooks kb")

    # Changing a runbook: behaviour changed without a version bump is refused, a bump passes
    walk.git("add", "-A")
    walk.git("commit", "-q", "-m", "dataloader-open-files")
    walk.git("update-ref", "refs/remotes/origin/main", "HEAD")
    path = tmp_path / EXAMPLE_FILES[0]
    path.write_text(path.read_text("utf-8").replace("default: 65536", "default: 32768"), "utf-8")
    refused = walk.runbook("runbook lint --strict --base origin/main runbooks kb", expect=2)
    assert f"runbooks/{EXAMPLE}.yaml" in refused.stdout and "version" in refused.stdout
    text = path.read_text("utf-8").replace("version: 0.1.0", "version: 0.2.0", 1)
    path.write_text(text.replace("changelog:\n", "changelog:\n  - version: 0.2.0\n"
                                 "    en: The open-files limit counts as too low below 32768.\n"
                                 "    zh: 打开文件数限制低于 32768 时才算太低。\n", 1), "utf-8")
    walk.runbook("runbook lint --strict --base origin/main runbooks kb")

    # 7. The site, as CI builds it: the new runbook's and article's pages in both languages
    walk.runbook("runbook site build --output _site")
    site = tmp_path / "_site"
    titles = {"en": "DataLoader workers run out of file descriptors",
              "zh": "DataLoader worker 耗尽了文件描述符"}
    for lang, title in titles.items():
        page = site / lang / "runbooks" / EXAMPLE / "index.html"
        assert page.is_file(), page
        assert title in page.read_text("utf-8")
        assert (site / lang / "kb" / EXAMPLE / "index.html").is_file()
    assert (site / "pagefind").is_dir()  # the search index, built by Pagefind


def _without_fp(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_fp(v) for k, v in value.items() if k != "fp"}
    if isinstance(value, list):
        return [_without_fp(v) for v in value]
    return value
