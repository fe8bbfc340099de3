"""`runbook collect` against real jobs: this machine, a hanging nvidia-smi, and three SSH hosts.

Secrets are planted in the job's environment, its log, a config file and a report; the test
opens the bundle and greps every member for each of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from runbook.collect.archive import COLLECTED, FIXED_MTIME, UNREACHABLE
from runbook.collect.sections import SECTIONS
from scenarios.jobs import SCENARIO_ROOT, start
from tests import cluster_fixture

pytestmark = pytest.mark.e2e
make_cluster = cluster_fixture.make_cluster

SECRET_ENV = {"HF_TOKEN": "hf_planted_secret_123", "WANDB_API_KEY": "wandb-planted-key-456",
              "NCCL_DEBUG": "INFO"}
LOG_SECRETS = ("fetching https://user:planted-pass@example.invalid/x\n"
               "AWS_SECRET_ACCESS_KEY=planted-aws-secret-789\n")
CONFIG = ("model: tiny\nmax_tokens: 2048\nwandb:\n  project: demo\n  api_key: planted-yaml-key-000\n"
          "data: {url: 'https://bob:planted-url-pass@data.invalid/x'}\n")
REPORT = {"schema": "runbook-report/v1", "nodes": [{"node": "vm", "evidence": [
    {"result": {"api_key": "planted-report-key", "url": "https://u:planted-report-pass@h.invalid/"}}]}]}
PLANTED = ("hf_planted_secret_123", "wandb-planted-key-456", "planted-pass", "planted-aws-secret-789",
           "planted-yaml-key-000", "planted-url-pass", "planted-report-key", "planted-report-pass")
SECTION_FILES = {f"{s.name}.txt" for s in SECTIONS}


def collect(*args: str, env: dict[str, str] | None = None,
            timeout: float = 180) -> tuple[subprocess.CompletedProcess[str], float]:
    begin = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "runbook", "collect", *args], capture_output=True,
                         text=True, env={**(env or os.environ), "RUNBOOK_LANG": "en"}, timeout=timeout)
    return out, time.monotonic() - begin


def open_bundle(path: Path) -> tuple[dict[str, bytes], list[tarfile.TarInfo]]:
    with tarfile.open(path, "r:gz") as tar:
        infos = tar.getmembers()
        return {i.name: tar.extractfile(i).read() for i in infos}, infos  # type: ignore[union-attr]


def sections_of(index: dict[str, Any], node: str) -> dict[str, dict[str, Any]]:
    entry = next(n for n in index["nodes"] if n["node"] == node)
    return {s["section"]: s for s in entry["sections"]}


def assert_every_section_accounted_for(members: dict[str, bytes], index: dict[str, Any]) -> None:
    """Each section's file exists; what was not collected says why, in the index and the file."""
    for node in index["nodes"]:
        assert {s["file"].split("/", 1)[1] for s in node["sections"]} == SECTION_FILES
        for section in node["sections"]:
            text = members[section["file"]].decode()
            assert section["size_bytes"] == len(members[section["file"]])
            assert f"# status: {section['status']}" in text
            if section["status"] != COLLECTED:
                assert section["reason"], section
                assert f"# not collected: {section['reason']}" in text


def test_local_bundle_has_every_section_and_no_secret(tmp_path: Path) -> None:
    job = start("loader_accumulating", tmp_path / "job", env=SECRET_ENV)
    try:
        assert job.wait_for_log(r"Token buffer:", timeout=60)
        with job.log.open("a") as log:
            log.write(LOG_SECRETS)
        (tmp_path / "train.yaml").write_text(CONFIG)
        (tmp_path / "report.json").write_text(json.dumps(REPORT))
        bundle = tmp_path / "B.tar.gz"
        out, elapsed = collect("--set", f"log={job.log}", "--set", f"config={tmp_path}/*.yaml",
                               "--report", str(tmp_path / "report.json"), "-o", str(bundle),
                               env=job.tool_env())
    finally:
        job.stop()
    members, infos = open_bundle(bundle)
    index = json.loads(members["index.json"])
    assert out.returncode == index["summary"]["exit_code"] and out.returncode in (0, 3), out.stderr
    node = index["nodes"][0]["node"]
    assert set(members) == {"INDEX.md", "index.json", "report.json"} | \
        {f"{index['nodes'][0]['dir']}/{f}" for f in SECTION_FILES}
    assert [i.name for i in infos] == sorted(members)
    assert {(i.mtime, i.uid, i.gid, i.mode) for i in infos} == {(FIXED_MTIME, 0, 0, 0o644)}
    assert_every_section_accounted_for(members, index)
    sections = sections_of(index, node)
    for name in ("process", "env", "log", "config", "pip-list"):
        assert sections[name]["status"] == COLLECTED, sections[name]
    text = {name: members[s["file"]].decode() for name, s in sections.items()}
    assert f"{job.pid} " in text["process"] and "loader_accumulating/train.py" in text["process"]
    assert "NCCL_DEBUG=INFO\n" in text["env"] and "HF_TOKEN=***redacted***\n" in text["env"]
    assert "https://user:***@example.invalid/x" in text["log"] and "Token buffer:" in text["log"]
    assert "max_tokens: 2048" in text["config"] and "project: demo" in text["config"]
    assert "api_key: ***redacted***" in text["config"]
    assert json.loads(members["report.json"])["nodes"][0]["evidence"][0]["result"]["api_key"] == \
        "***redacted***"
    for member, data in members.items():
        for secret in PLANTED:
            assert secret.encode() not in data, f"{secret} survived in {member}"
    print(f"\nlocal collect: {elapsed:.1f} s")


def test_a_hanging_nvidia_smi_is_a_timeout_and_is_killed(tmp_path: Path) -> None:
    fake_bin = SCENARIO_ROOT / "nvidia_smi_hang" / "bin"
    env = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}",
           "FAKE_NVIDIA_SMI_HANG_S": "120"}
    bundle = tmp_path / "B.tar.gz"
    out, elapsed = collect("--section-timeout", "3", "--set", "match=^no-such-job$", "-o", str(bundle),
                           env=env)
    members, _ = open_bundle(bundle)
    index = json.loads(members["index.json"])
    smi = sections_of(index, index["nodes"][0]["node"])["nvidia-smi"]
    assert smi["status"] == "timeout"
    assert "did not answer within" in smi["reason"] and "stuck GPU driver" in smi["reason"]
    assert out.returncode == 3
    assert "nvidia-smi: timeout" in out.stdout
    assert elapsed < 60
    assert_every_section_accounted_for(members, index)
    deadline = time.monotonic() + 10
    while _processes_running(str(fake_bin)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_running(str(fake_bin)), "the hanging nvidia-smi was left behind"


def _processes_running(needle: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if needle.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    for args, message in [
        (["--set", "logs=x"], "collect has no parameter 'logs' (did you mean 'log'?)"),
        (["--set", "pid=abc"], "--set pid=abc: expected a process id"),
        (["--redact", "("], "--redact '(': not a valid regular expression"),
        (["--report", str(tmp_path / "none.json")], "none.json: No such file or directory"),
        (["-o", str(tmp_path / "no" / "b.tar.gz")], "does not exist"),
    ]:
        out, _ = collect(*args, "-o", str(tmp_path / "b.tar.gz")) if "-o" not in args else collect(*args)
        assert out.returncode == 2, out
        assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
    assert not (tmp_path / "b.tar.gz").exists()


def test_three_hosts_one_unreachable(make_cluster, tmp_path: Path) -> None:
    cl = make_cluster(3)
    hosts: dict[str, Any] = {}
    for name in ("node01", "node02"):
        workdir = tmp_path / name
        cl.start_scenario(name, "healthy", str(workdir), env=SECRET_ENV)
        hosts[name] = {"params": {"log": str(workdir / "train.log")}}
    hosts["node03"] = {}
    for name in ("node01", "node02"):
        _wait_for(lambda n=name: Path(hosts[n]["params"]["log"]).stat().st_size > 0)
    cl.kill_sshd("node03")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(json.dumps({"hosts": hosts}))  # JSON is YAML
    bundle = tmp_path / "B.tar.gz"
    out, elapsed = collect("-i", str(inventory), "--nodes", "node[01-03]", "--connect-timeout", "3",
                           "-o", str(bundle), env=cl.env())
    members, _ = open_bundle(bundle)
    index = json.loads(members["index.json"])
    assert out.returncode == 3, out.stdout + out.stderr
    assert [n["node"] for n in index["nodes"]] == ["node01", "node02", "node03"]
    assert_every_section_accounted_for(members, index)
    bad = next(n for n in index["nodes"] if n["node"] == "node03")
    assert bad["status"] == UNREACHABLE and "connection refused" in bad["reason"]
    assert {s["status"] for s in bad["sections"]} == {UNREACHABLE}
    assert "node03 — unreachable: connection refused" in members["INDEX.md"].decode()
    for name in ("node01", "node02"):
        sections = sections_of(index, name)
        for section in ("process", "env", "log", "pip-list"):
            assert sections[section]["status"] == COLLECTED, (name, sections[section])
        process = members[f"{name}/process.txt"].decode()
        assert "healthy/train.py" in process and process.count("healthy/train.py") >= 1
        assert "NCCL_DEBUG=INFO" in members[f"{name}/env.txt"].decode()
        assert "step" in members[f"{name}/log.txt"].decode()
    for member, data in members.items():
        for secret in PLANTED:
            assert secret.encode() not in data, f"{secret} survived in {member}"
    assert elapsed < 120
    print(f"\n3 hosts (one unreachable): {elapsed:.1f} s")


def _wait_for(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"condition not met within {timeout}s")


def test_two_runs_give_the_same_file_list_in_tar_order(tmp_path: Path) -> None:
    names = []
    for run in ("first", "second"):
        bundle = tmp_path / f"{run}.tar.gz"
        out, _ = collect("--set", "match=^no-such-job$", "-o", str(bundle))
        assert out.returncode in (0, 3), out.stderr
        listed = subprocess.run(["tar", "tzf", str(bundle)], capture_output=True, text=True, timeout=30)
        names.append(listed.stdout.split())
    assert names[0] == names[1] == sorted(names[0])
    assert names[0][:2] == ["INDEX.md", "index.json"] and len(names[0]) == 2 + len(SECTION_FILES)
