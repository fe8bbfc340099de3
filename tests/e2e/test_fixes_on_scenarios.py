"""Fixes against live scenarios: the exact per-node commands of a dry run, `--apply` editing a
real job's config.yaml (backup, diff, audit log, nothing disruptive), and the blast-radius cap.

Every scenario runs on this machine (loopback only) and is stopped in teardown; every wait
is bounded.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from scenarios.jobs import Scenario, start

pytestmark = pytest.mark.e2e
RUN_TIMEOUT_S = 240  # one `runbook run` (walk + fixes); the fixes themselves stop at 120 s
FEWER_WORKERS = "Fewer workers, more games each"
# ray-hang ends the Ray job at one of these (the machine decides: a kernel OOM record
# anywhere in dmesg makes it host-out-of-memory); both carry the num_workers fix.
RAY_CONCLUSIONS = {"too-many-workers", "host-out-of-memory"}
ORIGINAL_CONFIG = ("# Self-play configuration (python train.py --config config.yaml)\n"
                   "selfplay:\n  num_workers: 100  # concurrent Ray workers\n"
                   "  games_per_worker: 10\n  device: cpu\n")


def runbook(job: Scenario, *args: str, timeout: float = RUN_TIMEOUT_S) -> tuple[int, dict, str]:
    """`runbook run ... --format json` with stdin not a terminal; (exit code, report, stderr)."""
    env = {**job.tool_env(), "RUNBOOK_LANG": "en"}
    out = subprocess.run([sys.executable, "-m", "runbook", "run", *args, "--format", "json"],
                         capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                         timeout=timeout)
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout), out.stderr


def wait_quiet(log: Path, quiet_s: float, timeout: float) -> bool:
    """Wait (bounded) until `log` has not been written for `quiet_s` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if time.time() - log.stat().st_mtime >= quiet_s:
            return True
        time.sleep(0.25)
    return False


def group_members(pgid: int) -> set[int]:
    """Live (non-zombie) processes of a process group."""
    members = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.add(int(entry))
    return members


def fix_named(node: dict[str, Any], title: str) -> dict[str, Any]:
    fixes = [f for f in node["conclusion"]["fixes"] if f["title"] == title]
    assert len(fixes) == 1, [f["title"] for f in node["conclusion"]["fixes"]]
    return fixes[0]


def backups(config: Path) -> list[Path]:
    return sorted(config.parent.glob(config.name + ".bak.*"))


# ---------------------------------------------------------------- the data-loader job


@pytest.fixture
def loader_job(tmp_path: Path):
    job = start("loader_accumulating", tmp_path / "loader job", speed=1.0)
    try:
        yield job
    finally:
        job.stop()


def test_dry_run_shows_the_exact_commands_for_the_loader_job(loader_job: Scenario,
                                                            tmp_path: Path) -> None:
    job = loader_job
    assert job.wait_for_log(r"Token buffer:", timeout=30), job.read_log()
    env_file = tmp_path / "env dir" / "it's.env"  # a space and a quote: the command must quote it
    code, report, _ = runbook(job, "training-hang", "--set", f"log={job.log}",
                              "--set", f"pid={job.pid}", "--set", f"env_file={env_file}")
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "dataloader-accumulating", node["path"]
    assert code == 0
    fixes = node["conclusion"]["fixes"]
    assert {f["result"]["status"] for f in fixes if f.get("run")} == {"dry-run"}

    log = shlex.quote(str(job.log))
    assert "'" in log  # the job's directory has a space
    watch = fix_named(node, "Wait and watch the progress lines")
    assert watch["run"] == f"tail -n 200 {log} | grep -E 'Token buffer|第一个训练批次' | tail -n 5"
    assert watch["effect"] == "read-only"
    shards = fix_named(node, "Check the size of the parquet shards")
    assert shards["run"].startswith(f"pid={job.pid}\n")  # the data dir comes from that process
    smaller = fix_named(node, "For a quick test only, use a smaller batch")
    assert smaller["effect"] == "changes-state"
    assert smaller["run"].startswith(f"f={shlex.quote(str(env_file))}\n"), smaller["run"]
    assert shlex.quote(str(env_file)) == "'" + str(env_file).replace("'", "'\"'\"'") + "'"
    assert 'python3 - "$f" DEVICE_BATCH_SIZE=8 <<\'PY\'' in smaller["run"]
    assert 'cp -p "$f" "$b"' in smaller["run"] and 'diff -u "$b" "$f"' in smaller["run"]
    assert "<unset>" not in "".join(f.get("run") or "" for f in fixes)
    # A dry run acts on nothing.
    assert not env_file.parent.exists()
    assert job.is_alive()


# ---------------------------------------------------------------- the Ray job (seed 001)


@pytest.fixture(scope="module")
def ray_job(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("ray")
    job = start("ray_actor_init_hang", tmp_path_factory.mktemp("ray job"), speed=1.0)
    try:
        assert job.wait_for_log(r"Collecting trajectories", timeout=120), job.read_log()
        # Ray may still print start-up lines: diagnose once the log has really gone quiet.
        assert wait_quiet(job.log, quiet_s=4.0, timeout=90)
        yield job
    finally:
        job.stop()


def ray_hang(job: Scenario, *args: str) -> tuple[int, dict, str]:
    # Ray still prints a line now and then (its warnings about actors that take long): the
    # diagnosis is of a log quiet for longer than stall_after, as a person would wait for.
    # The job's own cluster, even if another one runs on this machine.
    address = (job.workdir / "ray_address").read_text().strip()
    for _attempt in range(3):  # a late Ray line between the wait and the read: wait and ask again
        assert wait_quiet(job.log, quiet_s=4.0, timeout=90)
        answer = runbook(job, "ray-hang", "--set", f"log={job.log}", "--set", f"ray_address={address}",
                         "--set", "stall_after=3", "--set", "pending_after=2",
                         "--set", "match=ray_actor_init_hang/train.py", "--set", "max_workers_per_core=0.1",
                         "--set", "engine_module=json", *args)
        read = [e["result"] for e in answer[1]["nodes"][0]["evidence"] if e["step"] == "read-log"]
        if not read or (read[0].get("age_s") or 0) >= 3:
            break
    return answer


def driver_of(job: Scenario, node: dict[str, Any]) -> tuple[int, str]:
    found = node["evidence"][0]
    assert found["step"] == "find-process" and found["result"]["found"]
    pid = found["result"]["pid"]
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    assert "ray_actor_init_hang/train.py" in cmdline and pid in group_members(job.pgid)
    return pid, cmdline


def test_dry_run_shows_the_exact_commands_for_the_ray_job(ray_job: Scenario) -> None:
    job = ray_job
    config = job.workdir / "config.yaml"
    before = config.read_text()
    code, report, _ = ray_hang(job, "--set", f"config={config}")
    node = report["nodes"][0]
    assert node["conclusion"]["id"] in RAY_CONCLUSIONS, [
        (e["step"], e["goto"], e["decided_by"]) for e in node["evidence"]]
    assert node["conclusion"]["taxonomy"] in (["hang.ray-init"], ["oom.host"])
    assert code == 1
    pid, cmdline = driver_of(job, node)

    fewer = fix_named(node, FEWER_WORKERS)
    assert fewer["effect"] == "changes-state" and fewer["result"] == {"status": "dry-run"}
    assert fewer["run"].startswith(f"cfg={shlex.quote(str(config))}\npid={pid}\n"), fewer["run"]
    assert "'" in shlex.quote(str(config))  # "ray job0": the path is quoted
    assert ('python3 - "$cfg" "selfplay.num_workers<="10 '
            '"?selfplay.games_per_worker*=ratio:selfplay.num_workers"') in fewer["run"]

    emergency = fix_named(node, "Emergency recovery: stop, clean up, restart with fewer workers")
    assert emergency["effect"] == "disruptive" and emergency["result"] == {"status": "dry-run"}
    assert f"  pid={pid}\n  want={shlex.quote(cmdline)}\n" in emergency["run"]
    assert 'kill -TERM "-$pgid"' in emergency["run"] and "\nray stop || exit 1\n" in emergency["run"]
    assert "pkill" not in emergency["run"]
    # Nothing was touched.
    assert config.read_text() == before and not backups(config)
    assert job.is_alive()


def test_apply_refused_by_the_blast_radius_cap_edits_nothing(ray_job: Scenario,
                                                             tmp_path: Path) -> None:
    job = ray_job
    config = job.workdir / "config.yaml"
    before = config.read_text()
    audit = tmp_path / "audit.jsonl"
    code, report, stderr = ray_hang(job, "--apply", "--max-nodes", "0", "--audit-log", str(audit))
    assert code == 2 and "more than --max-nodes 0" in stderr
    fixes = report["nodes"][0]["conclusion"]["fixes"]
    statuses = {f["effect"]: f["result"]["status"] for f in fixes if f.get("run")}
    assert statuses == {"read-only": "refused", "changes-state": "refused", "disruptive": "held-back"}
    assert config.read_text() == before and not backups(config)
    assert not audit.exists()
    assert job.is_alive()


def test_apply_without_a_terminal_edits_the_config_and_runs_nothing_disruptive(
        ray_job: Scenario, tmp_path: Path) -> None:
    job = ray_job
    config = job.workdir / "config.yaml"
    assert config.read_text() == ORIGINAL_CONFIG  # written by the job at its start
    members = group_members(job.pgid)
    audit = tmp_path / "audit.jsonl"
    # The default config (config.yaml) is found in the driver's working directory.
    code, report, stderr = ray_hang(job, "--apply", "--audit-log", str(audit))
    assert code == 1, stderr
    node = report["nodes"][0]
    assert node["conclusion"]["id"] in RAY_CONCLUSIONS
    pid, _ = driver_of(job, node)

    fewer = fix_named(node, FEWER_WORKERS)
    result = fewer["result"]
    assert result["status"] == "ok" and result["exit_code"] == 0, result
    assert result["verify"]["passed"] is True
    [backup] = backups(config)
    assert backup.read_text() == ORIGINAL_CONFIG
    assert config.read_text() == ORIGINAL_CONFIG.replace(
        "num_workers: 100  #", "num_workers: 10  #").replace("per_worker: 10\n", "per_worker: 100\n")
    out = result["stdout"]
    assert "selfplay.num_workers: 100 -> 10\nselfplay.games_per_worker: 10 -> 100\n" in out
    assert f"--- {backup}" in out or f'--- "{backup}"' in out  # diff -u quotes names with spaces
    assert ("-  num_workers: 100  # concurrent Ray workers\n"
            "-  games_per_worker: 10\n"
            "+  num_workers: 10  # concurrent Ray workers\n"
            "+  games_per_worker: 100\n") in out
    assert f"backup: {backup}" in out

    # Nothing disruptive ran: held back without a terminal, and the job is untouched.
    disruptive = [f for f in node["conclusion"]["fixes"] if f["effect"] == "disruptive"]
    assert disruptive and all(f["result"] == {"status": "held-back",
                                              "reason": "disruptive: never run without a terminal"}
                              for f in disruptive)
    assert job.is_alive() and pid in group_members(job.pgid)
    assert members <= group_members(job.pgid)

    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [e["effect"] for e in entries] == ["read-only", "changes-state"]
    entry = entries[1]
    assert (entry["runbook"], entry["conclusion"], entry["fix"]) == (
        "ray-hang", node["conclusion"]["id"], FEWER_WORKERS)
    assert entry["command"] == fewer["run"] and entry["status"] == "ok"
    assert entry["exit_code"] == 0 and entry["verify_passed"] is True
    assert f"pid={pid}\n" in entry["command"]
