"""`runbook run --record DIR`, `runbook test --replay DIR [--accept]`, and recordings as test cases,
run as a user runs them: real processes, real runbook files, the real command line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIX_DEMO = ROOT / "tests" / "data" / "fixes" / "fix-demo.yaml"
SECRET = "s3cr3t-value-42"
HANG = """apiVersion: runbook/v1
id: slow
version: 1.0.0
title: {en: Slow, zh: 慢}
summary: {en: A check that takes long, zh: 一个很慢的检查}
start: wait
steps:
  wait:
    title: {en: Wait, zh: 等待}
    check: {type: command, with: {run: "touch MARKER; sleep 30"}, timeout: 40s}
    default: done
conclusions:
  done: {severity: ok, taxonomy: [], title: {en: Done, zh: 完成}, explanation: {en: D, zh: 完}}
"""


def cli(*args: str, runbook_path: Path | None = None, cwd: Path = ROOT,
        lang: str = "en") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RUNBOOK_LANG": lang}
    if runbook_path is not None:
        env["RUNBOOK_PATH"] = str(runbook_path)
    return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, stdin=subprocess.DEVNULL, timeout=120)


def incident(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "incident.json").read_text())


@pytest.fixture
def fix_demo(tmp_path: Path) -> Path:
    """A runbook directory holding fix-demo, and the directory it looks at (marker missing)."""
    library = tmp_path / "library"
    library.mkdir()
    shutil.copy(FIX_DEMO, library)
    (tmp_path / "target").mkdir()
    return library


@pytest.fixture
def secret_job(tmp_path: Path):
    """A process that looks like training and has a token on its command line and in its env."""
    log = tmp_path / "train.log"
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "WANDB_API_KEY": SECRET}
    with log.open("w") as out:
        job = subprocess.Popen([sys.executable, "-c", "import time; print('step 1 | loss 2.0', "
                                "flush=True); time.sleep(120)", f"--token={SECRET}"],
                               stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 10
    while "step 1" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    yield job, log
    job.kill()
    job.wait(timeout=10)


def test_a_recorded_run_hides_secrets_and_replays_to_the_same_conclusion(tmp_path: Path,
                                                                         secret_job) -> None:
    job, log = secret_job
    folder = tmp_path / "incident"
    run = cli("run", "training-hang", "--set", f"log={log}", "--set", f"pid={job.pid}",
              "--format", "json", "--record", str(folder))
    report = json.loads(run.stdout)
    assert f"recording written to {folder / 'incident.json'}" in run.stderr
    text = (folder / "incident.json").read_text()
    assert SECRET not in text
    doc = json.loads(text)
    node, reported = doc["nodes"][0], report["nodes"][0]
    assert node["path"] == reported["path"] and node["conclusion"]["id"] == reported["conclusion"]["id"]
    process = node["results"]["find-process"][0]
    assert process["status"] == "ok" and process["result"]["pid"] == job.pid
    assert process["result"]["processes"][0]["cmdline"].endswith("--token=***redacted***")
    assert doc["params"] == {"log": str(log), "pid": job.pid}
    assert (doc["runbook"]["id"], doc["runbook"]["version"]) == ("training-hang",
                                                                  report["runbook"]["version"])

    replayed = cli("test", "--replay", str(folder))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert f"{node['node']}: same conclusion {node['conclusion']['id']}" in replayed.stdout


def test_fixes_and_their_verify_checks_are_not_recorded(tmp_path: Path, fix_demo: Path) -> None:
    target, folder = tmp_path / "target", tmp_path / "incident"
    run = cli("run", "fix-demo", "--set", f"dir={target}", "--apply", "--format", "json",
              "--audit-log", str(tmp_path / "audit.jsonl"), "--record", str(folder),
              runbook_path=fix_demo)
    fixes = json.loads(run.stdout)["nodes"][0]["conclusion"]["fixes"]
    assert fixes[1]["result"]["status"] == "ok" and fixes[1]["result"]["verify"]["passed"] is True
    assert (target / "marker").exists()
    results = incident(folder)["nodes"][0]["results"]
    assert list(results) == ["look"] and len(results["look"]) == 1
    assert results["look"][0]["result"]["ok"] is False  # before the fix created the marker


def test_watch_records_its_last_round(tmp_path: Path, fix_demo: Path) -> None:
    target, folder = tmp_path / "target", tmp_path / "incident"
    env = {**os.environ, "RUNBOOK_PATH": str(fix_demo), "RUNBOOK_LANG": "en"}
    proc = subprocess.Popen([sys.executable, "-m", "runbook", "run", "fix-demo", "--set", f"dir={target}",
                             "--watch", "0.5", "--watch-for", "60", "--record", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("[watch #1"):
                (target / "marker").touch()  # the state changes: the watch ends after this round
                break
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    node = incident(folder)["nodes"][0]
    assert node["conclusion"]["id"] == "fine"
    assert [a["result"]["ok"] for a in node["results"]["look"]] == [True]


def test_an_interrupted_run_still_writes_what_it_found(tmp_path: Path) -> None:
    marker = tmp_path / "running"
    (tmp_path / "slow.yaml").write_text(HANG.replace("MARKER", str(marker)))
    folder = tmp_path / "incident"
    env = {**os.environ, "RUNBOOK_PATH": str(tmp_path), "RUNBOOK_LANG": "en"}
    proc = subprocess.Popen([sys.executable, "-m", "runbook", "run", "slow", "--record", str(folder)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # until the check's command runs
    assert marker.exists(), proc.communicate(timeout=30) if proc.poll() is not None else "not started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err
    assert "INCOMPLETE: interrupted (Ctrl-C)" in out
    node = incident(folder)["nodes"][0]
    assert (node["status"], node["reason"], node["results"]) == ("timeout", "step wait: interrupted", {})
    replayed = cli("test", "--replay", str(folder), runbook_path=tmp_path)
    assert replayed.returncode == 1
    assert "INCOMPLETE: the runbook now asks step wait, which the recording lacks" in replayed.stdout


def test_a_non_empty_directory_without_a_recording_is_refused(tmp_path: Path, fix_demo: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    out = cli("run", "fix-demo", "--set", f"dir={tmp_path / 'target'}", "--record", str(folder),
              runbook_path=fix_demo)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == (f"runbook: {folder}: --record: the directory is not empty and holds "
                                  "no recording (name a new or empty directory)")
    assert (folder / "notes.txt").read_text() == "keep me"
    # A directory that holds a recording is overwritten.
    first = tmp_path / "rec"
    for _ in range(2):
        again = cli("run", "fix-demo", "--set", f"dir={tmp_path / 'target'}", "--record", str(first),
                    runbook_path=fix_demo)
        assert again.returncode == 1, again.stderr
    assert sorted(p.name for p in first.iterdir()) == ["incident.json"]


def changed_copy(fix_demo: Path, tmp_path: Path) -> Path:
    """fix-demo with the marker test inverted: the recorded result now leads to `fine`."""
    changed = tmp_path / "changed"
    changed.mkdir()
    text = FIX_DEMO.read_text().replace("when: not result.ok", "when: result.ok")
    (changed / "fix-demo.yaml").write_text(text.replace("version: 1.0.0", "version: 1.1.0"))
    return changed


def test_replay_says_changed_and_accept_rewrites_the_expectation(tmp_path: Path, fix_demo: Path) -> None:
    folder = tmp_path / "incident"
    cli("run", "fix-demo", "--set", f"dir={tmp_path / 'target'}", "--record", str(folder),
        runbook_path=fix_demo)
    node = incident(folder)["nodes"][0]["node"]
    changed = changed_copy(fix_demo, tmp_path)
    out = cli("test", "--replay", str(folder), runbook_path=changed)
    assert out.returncode == 1
    assert f"{folder}: fix-demo 1.1.0 (recorded " in out.stdout and "with 1.0.0)" in out.stdout
    assert f"  {node}: CHANGED: was marker-missing, now fine (path look)" in out.stdout
    assert "1 recording(s), 1 node(s): 0 same, 1 changed, 0 incomplete" in out.stdout
    zh = cli("test", "--replay", str(folder), runbook_path=changed, lang="zh")
    assert f"{node}：CHANGED 结论已改变：原为 marker-missing，现为 fine（诊断路径 look）" in zh.stdout
    doc = json.loads(cli("test", "--replay", str(folder), "--format", "json",
                         runbook_path=changed).stdout)
    assert doc["recordings"][0]["nodes"][0]["verdict"] == "changed"

    accepted = cli("test", "--replay", str(folder), "--accept", runbook_path=changed)
    assert accepted.returncode == 0 and "accepted" in accepted.stderr
    assert incident(folder)["nodes"][0]["conclusion"]["id"] == "fine"
    again = cli("test", "--replay", str(folder), runbook_path=changed)
    assert again.returncode == 0 and f"{node}: same conclusion fine" in again.stdout
    # ... and now the original runbook is the one that changes the outcome.
    assert cli("test", "--replay", str(folder), runbook_path=fix_demo).returncode == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--accept"], "runbook test: --accept only makes sense with --replay DIR"),
    (["--replay", "{tmp}/nowhere"], "runbook: {tmp}/nowhere/incident.json: no recording here"),
])
def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    out = cli("test", *[a.format(tmp=tmp_path) for a in args])
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().startswith(message.format(tmp=tmp_path))
    assert len(out.stderr.strip().splitlines()) == 1


def test_recordings_beside_the_runbooks_are_test_cases(tmp_path: Path, fix_demo: Path) -> None:
    folder = fix_demo / "recordings" / "march"
    cli("run", "fix-demo", "--set", f"dir={tmp_path / 'target'}", "--record", str(folder),
        runbook_path=fix_demo)
    tests = fix_demo / "fix-demo.tests.yaml"
    tests.write_text("runbook: fix-demo\ncases:\n"
                     "  - {name: there, results: {look: {ok: true}}, expect: {conclusion: fine}}\n")
    out = cli("test", "--coverage", str(fix_demo))
    assert "ok   fix-demo: (recording march)" in out.stdout
    # The recording reaches marker-missing, which no hand-written case does.
    assert "fix-demo  steps 1/1  branches 2/2  conclusions 2/2" in out.stdout
    assert out.returncode == 0, out.stdout

    # A case may name the recording, with its own expectation; then it is not replayed twice.
    tests.write_text(tests.read_text() + "  - {name: the march incident, recording: recordings/march, "
                     "expect: {conclusion: fine}}\n")
    named = cli("test", str(fix_demo))
    assert named.returncode == 1 and "(recording march)" not in named.stdout
    assert "FAIL fix-demo: the march incident" in named.stdout
    assert "conclusion 'marker-missing', expected 'fine' (path: look)" in named.stdout

    # After a deliberate change the CI run says which incident now ends elsewhere.
    changed = changed_copy(fix_demo, tmp_path)
    shutil.copytree(fix_demo / "recordings", changed / "recordings")
    ci = cli("test", str(changed))
    assert ci.returncode == 1 and "FAIL fix-demo: (recording march)" in ci.stdout
    assert "status 'concluded'" not in ci.stdout
    assert "conclusion 'fine', expected 'marker-missing' (path: look)" in ci.stdout
