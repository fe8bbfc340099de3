"""`env` against the probe's own environment and a real child process's /proc/PID/environ."""

from __future__ import annotations

import os
import subprocess
import sys

from runbook.checks.general import env

ENV = {
    "NCCL_DEBUG": "INFO",
    "NCCL_SOCKET_IFNAME": "eth0",
    "MASTER_ADDR": "10.0.0.1",
    "HF_TOKEN": "hf_abcdef",
    "WANDB_API_KEY": "0123456789",
    "db_password": "hunter2",
    "STORE_URL": "redis://admin:s3cret@10.0.0.2:6379/0",
    "PIP_INDEX_URL": "https://__token__:pypi-xyz@pypi.example.com/simple https://ok.example.com",
}


def test_probe_environment_with_patterns(make_ctx) -> None:
    names = ["NCCL_*", "MASTER_ADDR", "MASTER_PORT", "HF_TOKEN", "STORE_URL", "MASTER_PORT"]
    result = env.run({"pid": "", "names": names}, make_ctx(env=dict(ENV)))
    assert result == {
        "source": "probe",
        "pid": os.getpid(),
        "readable": True,
        "reason": None,
        "vars": {
            "HF_TOKEN": "***redacted***",
            "MASTER_ADDR": "10.0.0.1",
            "NCCL_DEBUG": "INFO",
            "NCCL_SOCKET_IFNAME": "eth0",
            "STORE_URL": "redis://***@10.0.0.2:6379/0",
        },
        "missing": ["MASTER_PORT"],
        "count": 5,
    }


def test_default_names_is_everything_redacted(make_ctx) -> None:
    result = env.run({}, make_ctx(env=dict(ENV)))
    assert result["count"] == len(ENV)
    assert result["missing"] == []
    assert result["vars"]["WANDB_API_KEY"] == "***redacted***"
    assert result["vars"]["db_password"] == "***redacted***"
    assert result["vars"]["PIP_INDEX_URL"] == (
        "https://***@pypi.example.com/simple https://ok.example.com"
    )


def test_other_process_environment(make_ctx) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, env={"PATH": os.environ.get("PATH", ""), **ENV, "RANK": "4"},
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        result = env.run({"pid": child.pid, "names": ["RANK", "NCCL_DEBUG", "NOPE_*", "NOPE"]},
                         make_ctx())
    finally:
        child.kill()
        child.wait(timeout=5)
    assert result["source"] == "process"
    assert result["pid"] == child.pid
    assert result["readable"] is True
    assert result["vars"] == {"NCCL_DEBUG": "INFO", "RANK": "4"}
    assert result["missing"] == ["NOPE"]


def test_missing_process(make_ctx) -> None:
    result = env.run({"pid": 99_999_999, "names": ["RANK"]}, make_ctx())
    assert result == {"source": "process", "pid": 99_999_999, "readable": False,
                      "reason": "no process with pid 99999999", "vars": {}, "missing": [],
                      "count": 0}


def test_redact() -> None:
    assert env.redact("GITHUB_Token", "x") == "***redacted***"
    assert env.redact("AWS_SECRET_ACCESS_KEY", "x") == "***redacted***"
    assert env.redact("URL", "http://user@host/x") == "http://***@host/x"
    assert env.redact("URL", "http://host/x@y") == "http://host/x@y"
    assert env.redact("NCCL_DEBUG", "WARN") == "WARN"
