"""`runbook run cli-args` and `runbook run rlhf-hang` against real jobs from scenarios/.

unrecognized_args: the training program's argparse parser really rejects the command line
(usage, `train.py: error: unrecognized arguments: ...`, exit status 2); cli-args reads the
rejected argument from the log and, for an option name, checks it against the program's
own `--help` (`python -m llm.training.train`, run from the scenario's code directory).

data_generation_stuck: the GKD job's TaskRunner really sleeps in open() on a FIFO nobody
writes, its log stopped at `(TaskRunner pid=N) Generating train split: 0 examples ...`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from scenarios.jobs import SCENARIO_ROOT, Scenario, group_members

pytestmark = pytest.mark.e2e

RUNBOOK_TIMEOUT_S = 180  # a generous bound on a busy 2-core machine; never a speed assertion
CODE_DIR = SCENARIO_ROOT / "unrecognized_args"  # where `python -m llm.training.train` imports
STUCK_LINE = re.compile(
    r"\(TaskRunner pid=(\d+)\) Generating train split: 0 examples \[00:00, \? examples/s\]")


def runbook(name: str, *sets: str, env: dict[str, str]) -> tuple[int, dict]:
    args = [sys.executable, "-m", "runbook", "run", name, "--format", "json"]
    for item in sets:
        args += ["--set", item]
    out = subprocess.run(args, capture_output=True, text=True, env={**env, "RUNBOOK_LANG": "en"},
                         timeout=RUNBOOK_TIMEOUT_S)
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def steps_of(node: dict) -> dict[str, dict]:
    return {e["step"]: e["result"] for e in node["evidence"]}


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def proc_state(pid: int) -> str | None:
    """Kernel state letter of a process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()[0]




# ---------------------------------------------------------------------- unrecognized_args


def rejected(job: Scenario, error_line: str) -> None:
    """The job printed argparse's usage and error and exited; running its command line
    again exits with status 2 and the same error."""
    assert job.wait_for_log(re.escape(error_line), timeout=60), job.read_log()
    assert wait_until(lambda: not job.is_alive(), timeout=30), "the rejected job is still running"
    log = job.read_log()
    assert re.search(r"(?m)^\+ python -m llm\.training\.train ", log)
    assert re.search(r"(?m)^usage: train\.py \[-h\] \[--model-vocab-size INT\]", log)
    assert not re.search(r"(?m)^step \d+ \|", log)
    again = subprocess.run(job.argv, cwd=job.workdir, capture_output=True, text=True, timeout=60)
    assert again.returncode == 2
    assert error_line in again.stderr.splitlines()


def cli_args(job: Scenario) -> tuple[int, dict]:
    return runbook("cli-args", f"log={job.log}", "module=llm.training.train",
                   f"workdir={CODE_DIR}", f"python={sys.executable}", env=job.tool_env())


def test_seed_002_boolean_flag_given_a_value(scenario) -> None:
    job = scenario("unrecognized_args")  # the built-in launch command: --model-use-moe true
    rejected(job, "train.py: error: unrecognized arguments: true")
    code, report = cli_args(job)
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "boolean-flag-with-value", node
    assert node["conclusion"]["taxonomy"] == ["launch.cli-args"]
    assert node["path"] == ["read-log"]
    assert code == 1
    log = steps_of(node)["read-log"]
    assert log["signatures"]["unrecognized_args"]["last_line"] == \
        "train.py: error: unrecognized arguments: true"
    assert log["patterns"]["bool_value"]["count"] == 1
    assert log["patterns"]["bad_args"]["last_groups"] == ["true"]
    assert not job.is_alive() and job.stop()


@pytest.mark.parametrize(("wrong", "conclusion", "close"), [
    (["--lr-warmup", "100"], "misspelt-option", ["--optimization-warmup-steps"]),
    (["--fp16"], "unknown-option", []),
])
def test_option_name_checked_against_help(scenario, wrong: list[str], conclusion: str,
                                          close: list[str]) -> None:
    good = ["--model-use-moe", "--training-epochs", "1", "--training-steps-per-epoch", "40"]
    job = scenario("unrecognized_args", extra_args=good + wrong)
    rejected(job, "train.py: error: unrecognized arguments: " + " ".join(wrong))
    code, report = cli_args(job)
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == conclusion, [
        (e["step"], e["goto"], e["decided_by"]) for e in node["evidence"]]
    assert node["conclusion"]["taxonomy"] == ["launch.cli-args"]
    assert node["path"] == ["read-log", "option-names", "close-option"]
    assert code == 1
    results = steps_of(node)
    assert results["read-log"]["patterns"]["bad_args"]["last_groups"] == [wrong[0]]
    listed = results["option-names"]["stdout"].split()
    assert "--optimization-warmup-steps" in listed and "--no-model-use-moe" in listed
    assert wrong[0] not in listed
    assert results["close-option"]["value"]["rejected"] == wrong[0]
    assert results["close-option"]["value"]["close"][:1] == close
    if close:  # the first fix shows the close option in the program's own --help
        assert close[0] in node["conclusion"]["fixes"][0]["run"]
    assert not job.is_alive() and job.stop()


def test_the_corrected_command_line_trains(scenario) -> None:
    # The misspelt-option fix applied: --lr-warmup 100 -> --optimization-warmup-steps 100.
    args = ["--model-use-moe", "--optimization-warmup-steps", "100", "--training-epochs", "1",
            "--training-steps-per-epoch", "60"]
    job = scenario("unrecognized_args", extra_args=args)
    assert job.wait_for_log(r"\[Train\] done: 60 steps", timeout=120), job.read_log()
    assert wait_until(lambda: not job.is_alive(), timeout=30)
    log = job.read_log()
    assert "use_moe=True" in log and "warmup_steps=100" in log
    assert "error:" not in log
    losses = [float(x) for x in re.findall(r"(?m)^step \d+ \| epoch 1/1 \| loss (\d+\.\d{4}) \|", log)]
    assert len(losses) == 3 and losses[0] > losses[1] > losses[2]  # seeded: the same every run
    _, report = runbook("cli-args", f"log={job.log}", f"workdir={CODE_DIR}",
                        f"python={sys.executable}", env=job.tool_env())
    assert report["nodes"][0]["conclusion"]["id"] == "no-cli-error"
    assert job.stop()


# ---------------------------------------------------------------------- data_generation_stuck


@pytest.mark.parametrize("with_data", [True, False], ids=["data-path-given", "no-data-path"])
def test_seed_004_data_generation_stuck(scenario, with_data: bool) -> None:
    job = scenario("data_generation_stuck")
    assert job.wait_for_log(STUCK_LINE.pattern, timeout=60), job.read_log()
    match = STUCK_LINE.search(job.read_log())
    assert match is not None
    runner = int(match.group(1))
    fifo = job.workdir / "data" / "gkd" / "train.jsonl"
    # Really stuck: the TaskRunner sleeps (the FIFO has no writer) and the log stays put.
    before = job.read_log()
    time.sleep(2.5)  # longer than stall_after below
    assert job.read_log() == before and before.rstrip("\n").endswith(match.group(0))
    assert proc_state(runner) == "S" and proc_state(job.pid) == "S"

    sets = [f"log={job.log}", f"pid={job.pid}", "stall_after=2"]
    if with_data:
        sets.append(f"data={fifo}")
    code, report = runbook("rlhf-hang", *sets, env=job.tool_env())
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "data-generation-stuck", [
        (e["step"], e["goto"], e["decided_by"]) for e in node["evidence"]]
    assert node["conclusion"]["taxonomy"] == ["hang.dataloader"]
    assert code == 1  # severity warning
    assert node["path"] == ["read-log", "find-process", *(["data-path"] if with_data else []),
                            "generation-process", "generation-stack"]
    results = steps_of(node)
    log = results["read-log"]
    assert log["last_pattern"] == "gen_split" and log["age_s"] >= 2
    assert log["patterns"]["gen_split"]["last_line"] == match.group(0)
    assert log["patterns"]["gen_worker"]["last_groups"] == ["TaskRunner", str(runner)]
    assert results["find-process"]["found"] and results["find-process"]["pid"] == job.pid
    if with_data:
        assert results["data-path"]["exists"] and results["data-path"]["empty"] == 0
    # The process named in the stuck line: asleep, no CPU ...
    generating = results["generation-process"]
    assert generating["found"] and generating["pid"] == runner
    assert generating["state"] == "S" and generating["cpu_percent"] < 10
    # ... and idle where the data file is opened.
    stack = results["generation-stack"]["processes"]
    assert [p["pid"] for p in stack] == [runner]
    assert stack[0]["main_wait"] == "idle"
    assert stack[0]["main_user_frame"].split(" ")[-1].endswith("_generate_tables")
    assert "data_generation_stuck/train.py" in stack[0]["main_user_frame"]
    assert f"--pid {runner}" in node["conclusion"]["fixes"][1]["run"]

    assert job.stop()
    assert not job.is_alive() and not group_members(job.pgid)
    assert wait_until(lambda: proc_state(runner) in (None, "Z"), timeout=10)
