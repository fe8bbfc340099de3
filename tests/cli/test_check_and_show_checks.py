"""`runbook check TYPE` ad hoc, and check-type docs generated from the registry."""

from __future__ import annotations

import json
import os

from runbook.checks import CHECK_TYPES


def test_check_runs_on_this_machine_as_json(runbook_cli, tmp_path) -> None:
    out = runbook_cli("check", "env", "--with", f"pid={os.getpid()}", "--with", 'names=["HOME"]',
                      "--format", "json")
    report = json.loads(out.stdout)
    assert out.returncode == 0, out.stderr
    assert report["schema"] == "runbook-check/v1" and report["with"]["pid"] == os.getpid()
    assert report["nodes"][0]["result"]["vars"] == {"HOME": os.environ["HOME"]}


def test_a_hanging_check_exits_3(runbook_cli) -> None:
    out = runbook_cli("check", "command", "--with", "run=sleep 30", "--timeout", "1")
    assert out.returncode == 3
    assert "timed_out: True" in out.stdout


def test_bad_parameters_and_types_are_usage_errors(runbook_cli) -> None:
    out = runbook_cli("check", "gpu", "--with", "sourc=nvml")
    assert out.returncode == 2
    assert "check 'gpu' has no parameter 'sourc' (did you mean 'source'?)" in out.stderr
    out = runbook_cli("check", "gpus")
    assert out.returncode == 2 and "did you mean 'gpu'?" in out.stderr
    out = runbook_cli("check", "log", "--with", "tail=many")
    assert out.returncode == 2 and "--with tail:" in out.stderr


def test_show_checks_lists_every_registered_type(runbook_cli) -> None:
    out = runbook_cli("show", "checks", "--format", "json")
    docs = json.loads(out.stdout)
    assert [d["name"] for d in docs] == sorted(CHECK_TYPES)
    for doc in docs:
        assert doc["summary"]["en"] and doc["summary"]["zh"]
        assert "timed_out" in doc["results"]
        assert all(info.get("en") and info.get("zh") for info in doc["results"].values()), doc["name"]


def test_show_one_check_in_chinese(runbook_cli) -> None:
    out = runbook_cli("show", "check:log", "--lang", "zh")
    assert out.returncode == 0
    assert "结果字段" in out.stdout and "patterns" in out.stdout
