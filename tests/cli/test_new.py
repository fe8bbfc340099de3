"""`runbook new`: the scaffold it writes, what lint says of it, what it refuses, and its prompt."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import yaml

from runbook.format.todo import MARKER, MESSAGE

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Taxonomy ids of its conclusion, comma-separated: "


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RUNBOOK_PATH", "RUNBOOK_KB_PATH")}
    return {**env, "RUNBOOK_LANG": "en", **extra}


def runbook(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The real `runbook` command, with no terminal on stdin (as in CI or a script)."""
    return subprocess.run([sys.executable, "-m", "runbook", *args], cwd=cwd, env=_env(**env),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def private_paths(tmp_path: Path) -> dict[str, str]:
    """A team's private runbook and kb directories, two of each on the search paths."""
    dirs = {name: tmp_path / name for name in ("rb1", "rb2", "kb1", "kb2")}
    for path in dirs.values():
        path.mkdir()
    return {"RUNBOOK_PATH": f"{dirs['rb1']}{os.pathsep}{dirs['rb2']}",
            "RUNBOOK_KB_PATH": f"{dirs['kb1']}{os.pathsep}{dirs['kb2']}"}


def test_writes_the_four_files_to_the_first_directory_of_each_path(tmp_path: Path) -> None:
    env = private_paths(tmp_path)
    out = runbook(tmp_path, "new", "loader-fds", "--taxonomy", "hang.dataloader,perf.input-bound", **env)
    assert out.returncode == 0, out.stderr
    written = [tmp_path / "rb1" / "loader-fds.yaml", tmp_path / "rb1" / "loader-fds.tests.yaml",
               tmp_path / "kb1" / "loader-fds" / "en.md", tmp_path / "kb1" / "loader-fds" / "zh.md"]
    assert [line.split(" ", 1)[1] for line in out.stdout.splitlines()[:4]] == [str(p) for p in written]
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == sorted(written)
    assert f"runbook test --coverage {written[0]}" in out.stdout
    assert "runbook lint --strict --base origin/main" in out.stdout
    assert "note:" not in out.stdout  # both directories are on the search paths

    doc = yaml.safe_load(written[0].read_text("utf-8"))
    assert (doc["apiVersion"], doc["id"], doc["version"]) == ("runbook/v1", "loader-fds", "0.1.0")
    (conclusion,) = doc["conclusions"].values()
    assert conclusion["severity"] == "warning"
    assert conclusion["taxonomy"] == ["hang.dataloader", "perf.input-bound"]
    assert conclusion["see_also"] == ["kb:loader-fds"]
    assert [entry["version"] for entry in doc["changelog"]] == ["0.1.0"]
    tests = yaml.safe_load(written[1].read_text("utf-8"))
    assert tests["runbook"] == "loader-fds"
    assert tests["cases"][0]["expect"]["conclusion"] == next(iter(doc["conclusions"]))
    for lang, article in (("en", written[2]), ("zh", written[3])):
        front = yaml.safe_load(article.read_text("utf-8").split("---\n")[1])
        assert (front["id"], front["lang"], front["runbooks"]) == ("loader-fds", lang, ["loader-fds"])
        assert front["taxonomy"] == ["hang.dataloader", "perf.input-bound"]


def test_defaults_to_runbooks_and_kb_in_the_working_directory(tmp_path: Path) -> None:
    out = runbook(tmp_path, "new", "my-check", "--taxonomy", "hardware.storage")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "runbooks" / "my-check.yaml").is_file()
    assert (tmp_path / "kb" / "my-check" / "zh.md").is_file()
    assert "wrote runbooks/my-check.yaml" in out.stdout


def test_directories_off_the_search_path_get_a_note(tmp_path: Path) -> None:
    out = runbook(tmp_path, "new", "my-check", "--taxonomy", "hardware.storage",
                  "--dir", "elsewhere/rb", "--kb-dir", "elsewhere/kb")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "elsewhere" / "rb" / "my-check.tests.yaml").is_file()
    assert "note: elsewhere/rb is not on the search path; add it to RUNBOOK_PATH" in out.stdout
    assert "note: elsewhere/kb is not on the search path; add it to RUNBOOK_KB_PATH" in out.stdout


def test_the_scaffold_loads_and_lint_reports_only_the_markers_each_at_its_place(tmp_path: Path) -> None:
    env = private_paths(tmp_path)
    assert runbook(tmp_path, "new", "loader-fds", "--taxonomy", "hang.dataloader", **env).returncode == 0
    out = runbook(tmp_path, "lint", "--format", "json", str(tmp_path / "rb1"), str(tmp_path / "kb1"), **env)
    assert out.returncode == 2
    problems = json.loads(out.stdout)["problems"]
    assert {p["message"] for p in problems} == {MESSAGE}
    files = {p["file"] for p in problems}
    assert files == {str(tmp_path / "rb1" / "loader-fds.yaml"),
                     str(tmp_path / "kb1" / "loader-fds" / "en.md"),
                     str(tmp_path / "kb1" / "loader-fds" / "zh.md")}
    for problem in problems:  # each points at the line and column where the marker is
        line = Path(problem["file"]).read_text("utf-8").splitlines()[problem["line"] - 1]
        assert MARKER in line[problem["column"] - 1:], (problem, line)
    paths = {".".join(map(str, p["path"])) for p in problems if p["file"].endswith(".yaml")}
    assert {"title.en", "title.zh", "summary.zh", "symptoms.0.en", "changelog.0.zh",
            "steps.first-check.check.with.run", "steps.first-check.check.with.match",
            "conclusions.problem-found.explanation.en"} <= paths
    text = (tmp_path / "rb1" / "loader-fds.yaml").read_text("utf-8")
    assert len(paths) == text.count(MARKER) - text.splitlines()[0].count(MARKER)


def test_once_the_markers_are_replaced_lint_and_the_tests_pass(tmp_path: Path) -> None:
    env = private_paths(tmp_path)
    assert runbook(tmp_path, "new", "loader-fds", "--taxonomy", "hang.dataloader", **env).returncode == 0
    for path in tmp_path.rglob("*.*"):
        text = path.read_text("utf-8")
        path.write_text(re.sub(re.escape(MARKER) + "[:：] ?", "", text), "utf-8")
    lint = runbook(tmp_path, "lint", str(tmp_path / "rb1"), str(tmp_path / "kb1"), **env)
    assert (lint.returncode, lint.stdout) == (0, ""), lint.stdout + lint.stderr
    test = runbook(tmp_path, "test", str(tmp_path / "rb1"), **env)
    assert test.returncode == 0, test.stdout + test.stderr
    assert "ok   loader-fds: the check finds the problem" in test.stdout


def test_a_draft_runbook_with_markers_cannot_be_tested(tmp_path: Path) -> None:
    env = private_paths(tmp_path)
    assert runbook(tmp_path, "new", "loader-fds", "--taxonomy", "hang.dataloader", **env).returncode == 0
    out = runbook(tmp_path, "test", str(tmp_path / "rb1"), **env)
    assert out.returncode == 2
    assert "fix the lint errors above first" in out.stderr


def test_a_draft_runbook_with_markers_cannot_be_run(tmp_path: Path) -> None:
    env = private_paths(tmp_path)
    assert runbook(tmp_path, "new", "loader-fds", "--taxonomy", "hang.dataloader", **env).returncode == 0
    out = runbook(tmp_path, "run", "loader-fds", **env)
    assert out.returncode == 2
    assert "loader-fds: the file has problems:" in out.stderr
    assert "TODO left by runbook new" in out.stderr


def test_lint_finds_the_marker_in_conditions_and_commands(tmp_path: Path) -> None:
    from runbook.format.loader import load_text

    text = (ROOT / "runbooks" / "gpu-driver-hang.yaml").read_text("utf-8")
    doc = yaml.safe_load(text)
    step = doc["steps"][doc["start"]]
    step["branches"][0]["when"] = f"'{MARKER}' in result.reason or {step['branches'][0]['when']}"
    first = next(iter(doc["conclusions"].values()))
    first.setdefault("fixes", []).append({"title": {"en": "Look", "zh": "看一看"}, "effect": "read-only",
                                          "run": f"true  # {MARKER}: the real command"})
    result = load_text(yaml.safe_dump(doc, allow_unicode=True), "draft.yaml")
    flagged = {p.path for p in result.problems if p.message == MESSAGE}
    assert flagged == {("steps", doc["start"], "branches", 0, "when"),
                       ("conclusions", next(iter(doc["conclusions"])), "fixes",
                        len(first["fixes"]) - 1, "run")}
    assert result.runbook is not None and not result.ok  # a draft loads, but is not clean


def _refused(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("runbook new: "), out.stderr
    return lines[0]


def test_refuses_an_id_a_built_in_runbook_has(tmp_path: Path) -> None:
    line = _refused(runbook(tmp_path, "new", "training-hang", "--taxonomy", "hang.dataloader"))
    assert f"already exists: {ROOT / 'runbooks' / 'training-hang.yaml'}" in line
    assert not (tmp_path / "runbooks").exists()


def test_refuses_an_id_another_directory_of_the_path_has(tmp_path: Path) -> None:
    env = private_paths(tmp_path)
    assert runbook(tmp_path, "new", "loader-fds", "--taxonomy", "hang.dataloader", "--dir",
                   str(tmp_path / "rb2"), "--kb-dir", str(tmp_path / "kb2"), **env).returncode == 0
    line = _refused(runbook(tmp_path, "new", "loader-fds", "--taxonomy", "hang.dataloader", **env))
    assert f"already exists: {tmp_path / 'rb2' / 'loader-fds.yaml'}" in line
    assert list((tmp_path / "rb1").iterdir()) == [] and list((tmp_path / "kb1").iterdir()) == []


def test_refuses_to_overwrite_a_file(tmp_path: Path) -> None:
    env = private_paths(tmp_path)
    tests = tmp_path / "rb1" / "loader-fds.tests.yaml"
    tests.write_text("runbook: loader-fds\n", "utf-8")
    line = _refused(runbook(tmp_path, "new", "loader-fds", "--taxonomy", "hang.dataloader", **env))
    assert line == f"runbook new: {tests} already exists (pick another id, or remove the file)"
    assert tests.read_text("utf-8") == "runbook: loader-fds\n"
    assert [p.name for p in (tmp_path / "rb1").iterdir()] == [tests.name]


def test_refuses_an_id_that_is_not_one(tmp_path: Path) -> None:
    for bad in ("Loader", "-loader", "loader_fds", "loader.fds", "a" * 65):
        line = _refused(runbook(tmp_path, "new", "--taxonomy", "hang.dataloader", "--", bad))
        assert f"{bad!r} is not a valid runbook id" in line
    assert not (tmp_path / "runbooks").exists()


def test_refuses_an_unknown_taxonomy_id_with_a_suggestion(tmp_path: Path) -> None:
    line = _refused(runbook(tmp_path, "new", "x", "--taxonomy", "hang.dataloader,oom.gpuu"))
    assert "unknown taxonomy id 'oom.gpuu' (did you mean 'oom.gpu'?)" in line
    zh = _refused(runbook(tmp_path, "new", "x", "--taxonomy", "oom.gpuu", "--lang", "zh"))
    assert "未知的分类 id 'oom.gpuu'（是不是想写 'oom.gpu'？）" in zh
    assert not (tmp_path / "runbooks").exists()


def test_without_a_terminal_it_asks_for_the_taxonomy_flag(tmp_path: Path) -> None:
    line = _refused(runbook(tmp_path, "new", "loader-fds"))
    assert "no --taxonomy given and no terminal to ask on: pass --taxonomy" in line
    assert not (tmp_path / "runbooks").exists()


def on_terminal(cwd: Path, args: list[str], answers: list[bytes], prompt: str = PROMPT) -> tuple[int, str]:
    """Run `runbook` with a pseudo-terminal as stdin and stdout; type each answer at a prompt."""
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "runbook", *args], cwd=cwd, env=_env(),
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    output, answered, deadline = b"", 0, time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
            if answered < len(answers) and output.decode(errors="replace").count(prompt) > answered:
                os.write(master, answers[answered])
                answered += 1
            if not ready and proc.poll() is not None:
                break
        return proc.wait(timeout=10), output.decode("utf-8", errors="replace").replace("\r\n", "\n")
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_on_a_terminal_it_lists_the_taxonomy_and_asks_until_the_ids_are_known(tmp_path: Path) -> None:
    code, output = on_terminal(tmp_path, ["new", "loader-fds"],
                               [b"hang.dataloder\n", b"hang.dataloader, perf.input-bound\n"])
    assert code == 0, output
    assert "Taxonomy ids (taxonomy.yaml):" in output
    assert re.search(r"^  hang$", output, re.M) and re.search(r"^    hang\.dataloader +Input", output, re.M)
    assert "unknown taxonomy id 'hang.dataloder' (did you mean 'hang.dataloader'?)" in output
    assert output.count(PROMPT) == 2
    doc = yaml.safe_load((tmp_path / "runbooks" / "loader-fds.yaml").read_text("utf-8"))
    assert next(iter(doc["conclusions"].values()))["taxonomy"] == ["hang.dataloader", "perf.input-bound"]


def test_on_a_terminal_end_of_input_gives_up_and_writes_nothing(tmp_path: Path) -> None:
    code, output = on_terminal(tmp_path, ["new", "loader-fds", "--lang", "zh"], [b"\x04"],
                               prompt="结论的分类 id（多个用逗号分隔）：")
    assert code == 2
    assert "分类 id（taxonomy.yaml）：" in output and "数据管道尚未产出批次" in output
    assert "runbook new: 没有给出分类 id" in output
    assert not (tmp_path / "runbooks").exists()
