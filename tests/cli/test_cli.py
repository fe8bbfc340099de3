"""The command line as people and scripts use it: exit codes, messages, the JSON contract."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator

from runbook.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "tests" / "data" / "broken"


def report_schema() -> dict:
    return json.loads(resources.files("runbook").joinpath("schema/report.v1.json").read_text())


def test_help_imports_nothing_heavy() -> None:
    """`runbook --help` imports no heavy library, no subcommand module and not even argparse."""
    code = ("import sys; from runbook.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in sys.modules if m.split('.')[0] in "
            "('fabric', 'paramiko', 'ray', 'torch', 'pynvml', 'jinja2', 'yaml', 'jsonschema', 'argparse')"
            " or m.startswith('runbook.cli.')]\n"
            "print(heavy, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.stderr.strip() == "[]"


def test_a_subcommands_help_imports_only_its_own_arguments() -> None:
    """`runbook CMD --help` imports CMD's room and its `args.py` (and `common_args.py`), nothing
    of another command, not its `command.py`, and no heavy library: a room's `__init__.py` holds
    no code."""
    code = ("import contextlib, io, json, sys; from runbook.cli import COMMANDS, main\n"
            "seen, found = set(sys.modules), {}\n"
            "for name in COMMANDS:\n"
            "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "        main([name, '--help'])\n"
            "    found[name] = sorted(set(sys.modules) - seen)\n"
            "    seen = set(sys.modules)\n"
            "print(json.dumps(found))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    for name, modules in json.loads(out.stdout).items():
        room = COMMANDS[name][0]
        ours = {m for m in modules if m.startswith("runbook")}
        assert ours <= {room, f"{room}.args", "runbook.cli.common_args"} and f"{room}.args" in ours, name
        assert not [m for m in modules if m.split(".")[0] in ("yaml", "jinja2", "jsonschema", "ray")], name


def test_lint_of_broken_runbooks_prints_one_line_each_and_exits_2(runbook_cli) -> None:
    out = runbook_cli("lint", str(BROKEN))
    assert out.returncode == 2
    lines = out.stdout.strip().splitlines()
    n = len(list(BROKEN.glob("*.yaml")))
    assert len(lines) == n
    assert all(line.startswith(str(BROKEN)) for line in lines)
    assert "Traceback" not in out.stdout + out.stderr
    assert f"{n} error(s) in {n} of {n} file(s)" in out.stderr


def test_lint_of_the_library_is_clean(runbook_cli) -> None:
    out = runbook_cli("lint")
    assert (out.returncode, out.stdout) == (0, "")


def test_lint_json(runbook_cli) -> None:
    out = runbook_cli("lint", "--format", "json", str(BROKEN / "03-goto-nowhere.yaml"))
    doc = json.loads(out.stdout)
    assert out.returncode == 2 and doc["errors"] == 1
    assert doc["problems"][0]["path"] == ["steps", "first", "branches", 0, "goto"]


def test_one_file_is_linted_and_tested_inside_the_library(runbook_cli) -> None:
    # ddp-errors goes on into training-hang and points at nccl-errors: they resolve, and only
    # ddp-errors' own problems and cases count.
    out = runbook_cli("lint", "runbooks/ddp-errors.yaml")
    assert (out.returncode, out.stdout) == (0, ""), out.stdout
    assert out.stderr.strip() == "1 file(s) OK"
    out = runbook_cli("test", "runbooks/ddp-errors.yaml", "--coverage", "--format", "json")
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and doc["failed"] == 0, out.stdout[-2000:] + out.stderr
    assert {row["runbook"] for row in doc["cases"]} == {"ddp-errors"}
    assert [c["runbook"] for c in doc["coverage"]] == ["ddp-errors"]


def test_runbook_tests_of_the_library_pass(runbook_cli) -> None:
    out = runbook_cli("test")
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0 failed" in out.stdout


def test_a_wrong_expectation_fails_runbook_test(runbook_cli, tmp_path: Path) -> None:
    # training-hang goes on into other runbooks (cuda-oom, nccl-errors): the library comes along
    for path in (ROOT / "runbooks").glob("*.yaml"):
        if not path.name.endswith(".tests.yaml"):
            (tmp_path / path.name).write_text(path.read_text())
    tests = (ROOT / "runbooks/training-hang.tests.yaml").read_text()
    (tmp_path / "training-hang.tests.yaml").write_text(
        tests.replace("expect: {conclusion: crashed-cuda-oom", "expect: {conclusion: healthy"))
    out = runbook_cli("test", str(tmp_path))
    assert out.returncode == 1
    assert "FAIL training-hang: the job died of CUDA OOM" in out.stdout
    assert "conclusion 'crashed-cuda-oom', expected 'healthy'" in out.stdout
    assert "no test reaches conclusion 'crashed-cuda-oom'" in out.stdout


def test_run_json_follows_the_report_contract(runbook_cli, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1 | loss 2.0\nCUDA out of memory. Tried to allocate 2.00 GiB\n")
    out = runbook_cli("run", "training-hang", "--set", f"log={log}", "--set", "match=^no-such-job$",
                      "--format", "json")
    report = json.loads(out.stdout)
    Draft202012Validator(report_schema()).validate(report)
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "crashed-cuda-oom"
    assert node["conclusion"]["taxonomy"] == ["oom.gpu"]
    assert node["path"] == ["find-process", "exit-signatures"]
    assert report["summary"]["exit_code"] == out.returncode == 1
    assert report["runbook"]["version"] == yaml.safe_load(
        (ROOT / "runbooks" / "training-hang.yaml").read_text())["version"]


def test_run_writes_junit_and_html_reports_with_the_same_exit_code(runbook_cli, tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    log = tmp_path / "train.log"
    log.write_text("CUDA out of memory. Tried to allocate 2.00 GiB\n")
    junit, page = tmp_path / "report.xml", tmp_path / "report.html"
    args = ("run", "training-hang", "--set", f"log={log}", "--set", "match=^no-such-job$")
    assert runbook_cli(*args, "--format", "junit", "--output", str(junit)).returncode == 1
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("1", "1")
    assert next(suite.iter("failure")).get("type") == "crashed-cuda-oom"
    assert runbook_cli(*args, "--format", "html", "--output", str(page), "--lang", "zh").returncode == 1
    assert '<html lang="zh-CN">' in page.read_text("utf-8") and "诊断路径" in page.read_text("utf-8")


def test_run_text_in_chinese_shows_path_evidence_and_fixes(runbook_cli, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("error: unrecognized arguments: --model-use-moe=True\n")
    out = runbook_cli("run", "training-hang", "--set", f"log={log}", "--set", "match=^nope$",
                      "--lang", "zh")
    assert out.returncode == 1
    assert "命令行参数被拒绝" in out.stdout and "诊断路径" in out.stdout
    assert "result.patterns.cli_args.count=1" in out.stdout
    assert "修复方法" in out.stdout and "exit 1: 发现问题" in out.stdout


def test_fix_commands_are_rendered_with_quoted_params(runbook_cli, tmp_path: Path) -> None:
    log = tmp_path / "my train.log"
    log.write_text("nothing to see\n")
    out = runbook_cli("run", "training-hang", "--set", f"log={log}", "--set", "match=^nope$",
                      "--format", "json")
    fixes = json.loads(out.stdout)["nodes"][0]["conclusion"]["fixes"]
    assert fixes[1]["run"] == f"grep -niE 'error|exception|traceback|killed' '{log}' | tail -n 40"


def test_usage_errors_exit_2_with_one_line(runbook_cli) -> None:
    cases = {
        ("run", "training-hangg"): "no runbook named 'training-hangg' (did you mean 'training-hang'?)",
        ("run", "training-hang", "--set", "lgo=x"): "has no parameter 'lgo' (did you mean 'log'?)",
        ("run", "training-hang", "--set", "pid=abc"): "--set pid=abc: expected an integer",
        ("run", "training-hang", "--set", "log"): "expected NAME=VALUE",
        ("run", "training-hang", "--nodes", "gpu[01-"): "--nodes: bad host list 'gpu[01-'",
        ("run", "training-hang", "--nodes", "@/nonexistent"): "--nodes @/nonexistent: No such file",
        ("lint", "/nonexistent/dir"): "no such file or directory",
    }
    for args, message in cases.items():
        out = runbook_cli(*args)
        assert out.returncode == 2, args
        assert message in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr


def test_list_and_show(runbook_cli) -> None:
    listed = runbook_cli("list", "--format", "json")
    ids = [r["id"] for r in json.loads(listed.stdout)]
    on_disk = sorted(p.name.removesuffix(".yaml") for p in (ROOT / "runbooks").glob("*.yaml")
                     if not p.name.endswith(".tests.yaml"))
    assert ids == on_disk and "training-hang" in ids
    shown = runbook_cli("show", "training-hang", "--lang", "zh")
    assert shown.returncode == 0 and "训练卡住" in shown.stdout
    assert "when result.timed_out → gpu-driver-hang" in shown.stdout


def test_help_and_version_without_a_parser_and_a_subcommands_own_help() -> None:
    """`runbook`, `--help`, `-h` and `--version` are answered before argparse; a subcommand's
    own --help still shows its arguments."""
    for argv, code in (([], 2), (["--help"], 0), (["-h"], 0)):
        shown = subprocess.run([sys.executable, "-m", "runbook", *argv], capture_output=True, text=True,
                               timeout=60)
        assert shown.returncode == code and all(name in shown.stdout for name in COMMANDS), shown
    version = subprocess.run([sys.executable, "-m", "runbook", "--version"], capture_output=True, text=True,
                             timeout=60)
    assert version.stdout.startswith("runbook ") and version.returncode == 0
    run_help = subprocess.run([sys.executable, "-m", "runbook", "run", "--help"], capture_output=True,
                              text=True, timeout=60)
    assert "--executor" in run_help.stdout
