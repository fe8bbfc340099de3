"""One hostile or broken file on RUNBOOK_PATH / RUNBOOK_KB_PATH never takes a command down.

Each command names each bad file once on stderr and goes on with the rest of the library;
`runbook lint` still fails on them. Every command runs under a 1 GiB address-space limit, so an
alias bomb that expanded would fail the test instead of eating the machine.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAD = "apiVersion: runbook/v1\nid: {id}\nversion: 1.0.0\n"


def bomb(head: str) -> str:
    lines = [head + 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("hostile")
    books, kb = base / "runbooks", base / "kb"
    books.mkdir()
    (books / "bomb.yaml").write_text(bomb(HEAD.format(id="bomb")))
    (books / "syntax.yaml").write_text(HEAD.format(id="syntax") + "steps: [\n")
    (books / "binary.yaml").write_bytes(HEAD.format(id="binary").encode() + b"\x00\x01\x02")
    (books / "huge.yaml").write_text(HEAD.format(id="huge") + "# " + "x" * (2 << 20) + "\n")
    (books / "deep.yaml").write_text(HEAD.format(id="deep") + "x: " + "[" * 500 + "]" * 500 + "\n")
    article = kb / "laughs"
    article.mkdir(parents=True)
    front = "---\nid: laughs\nlang: {lang}\ntitle: Laughs\nsummary: s\n"
    for lang in ("en", "zh"):
        (article / f"{lang}.md").write_text(bomb(front.format(lang=lang)) + "---\nbody\n")
    log = base / "train.log"
    log.write_text("step 1 | loss 2.0\n"
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    return {"runbooks": books, "kb": kb, "log": log, "base": base}


BAD_RUNBOOKS = ("bomb.yaml", "syntax.yaml", "binary.yaml", "huge.yaml", "deep.yaml")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def runbook(hostile: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RUNBOOK_PATH": str(hostile["runbooks"]), "RUNBOOK_KB_PATH": str(hostile["kb"]),
           "RUNBOOK_LANG": "en"}
    return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True, text=True,
                          env=env, cwd=hostile["base"], timeout=120, preexec_fn=_limit_memory)


def assert_each_named_once(stderr: str, hostile: dict[str, Path], files: tuple[str, ...]) -> None:
    for name in files:
        path = str(hostile["runbooks"] / name)
        warnings = [line for line in stderr.splitlines() if line.startswith(f"runbook: warning: {path}:")]
        assert len(warnings) == 1, (name, stderr)
        assert warnings[0].endswith(f"`runbook lint {path}` shows every problem)")


@pytest.mark.parametrize("args", [
    ("list",), ("show", "training-hang"), ("search", "out of memory"),
])
def test_library_commands_name_each_bad_file_and_go_on(hostile: dict[str, Path],
                                                        args: tuple[str, ...]) -> None:
    done = runbook(hostile, *args)
    assert done.returncode == 0, done.stderr
    assert_each_named_once(done.stderr, hostile, BAD_RUNBOOKS)
    assert "training-hang" in done.stdout or "cuda-oom" in done.stdout


def test_triage_still_works_with_the_bomb_on_the_path(hostile: dict[str, Path]) -> None:
    done = runbook(hostile, "triage", str(hostile["log"]), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert_each_named_once(done.stderr, hostile, BAD_RUNBOOKS)
    assert json.loads(done.stdout)["matches"][0]["runbook"] == "cuda-oom"


def test_search_names_the_bad_article_and_finds_the_rest(hostile: dict[str, Path]) -> None:
    done = runbook(hostile, "search", "out of memory")
    for lang in ("en", "zh"):
        path = hostile["kb"] / "laughs" / f"{lang}.md"
        assert sum(line.startswith(f"runbook: warning: {path}:") for line in done.stderr.splitlines()) == 1
    assert "more than 100,000 values" in done.stderr


def test_run_concludes_with_the_bad_files_around(hostile: dict[str, Path]) -> None:
    done = runbook(hostile, "run", "cuda-oom", "--set", f"log={hostile['log']}", "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout)["nodes"][0]["status"] == "concluded"
    assert_each_named_once(done.stderr, hostile, BAD_RUNBOOKS)


def test_lint_fails_on_every_bad_file_with_its_place(hostile: dict[str, Path]) -> None:
    done = runbook(hostile, "lint", str(hostile["runbooks"]), "--format", "json")
    assert done.returncode == 2
    by_file = {Path(p["file"]).name: p for p in json.loads(done.stdout)["problems"]}
    assert set(BAD_RUNBOOKS) <= set(by_file)
    assert by_file["bomb.yaml"]["line"] == 9 and "aliases are expanded" in by_file["bomb.yaml"]["message"]
    assert "binary content" in by_file["binary.yaml"]["message"]
    assert "file too large" in by_file["huge.yaml"]["message"]
    assert "nested deeper than 64 levels" in by_file["deep.yaml"]["message"]
