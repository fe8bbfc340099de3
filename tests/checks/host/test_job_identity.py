"""The job's processes are the ones tied to it (host/_job.py): real processes writing real logs,
an unrelated torch process beside them, and the rules that decide when nothing ties them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runbook.checks import _procfs
from runbook.checks.host import _job, process

WRITE_FOREVER = ("import sys, time\nprint('ready', flush=True)\n"
                 "while True:\n    print('step', flush=True)\n    time.sleep(0.2)\n")
SLEEP = "import time\nprint('ready', flush=True)\ntime.sleep(120)\n"
TORCH_SLEEP = "import torch, time\nprint('ready', flush=True)\ntime.sleep(120)\n"


@pytest.fixture
def procs() -> Iterator:
    """procs(argv, **popen) -> a started process that printed 'ready'; all killed after."""
    started: list[subprocess.Popen] = []

    def start(argv: list[str], ready: Path | None = None, **popen) -> subprocess.Popen:
        child = subprocess.Popen(argv, start_new_session=True, **popen)
        started.append(child)
        _wait_for(lambda: _ready(child, ready))
        return child

    try:
        yield start
    finally:
        for child in started:
            _kill_group(child.pid)
            child.wait(timeout=5)


def _ready(child: subprocess.Popen, ready: Path | None) -> bool:
    if ready is not None:
        return ready.exists() and b"ready" in ready.read_bytes()
    return child.poll() is None


def _wait_for(condition, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the child did not get ready in time"
        time.sleep(0.05)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, 9)


def _pids(result: dict) -> set[int]:
    return {p["pid"] for p in result["processes"]}


def test_the_log_writer_is_the_job_and_a_torch_process_beside_it_is_foreign(procs, tmp_path,
                                                                            make_ctx) -> None:
    log = tmp_path / "train.log"
    with open(log, "ab") as out:
        writer = procs([sys.executable, "-c", WRITE_FOREVER], ready=log, stdout=out)
    notebook = procs([sys.executable, "-c", TORCH_SLEEP], stdout=subprocess.DEVNULL)
    time.sleep(3)  # the notebook has imported torch by now (libtorch mapped)
    result = process.run({"log": str(log)}, make_ctx(10.0))
    assert _pids(result) == {writer.pid}
    assert result["tied_by"] == "log-writer" and result["log_writers"] == [writer.pid]
    assert result["job_exited"] is False and result["log"] == str(log)
    assert notebook.pid in result["foreign_pids"]
    [entry] = [f for f in result["foreign"] if f["pid"] == notebook.pid]
    assert entry["why"] == "torch loaded"


def test_a_log_nobody_holds_means_the_job_exited_and_torch_is_never_taken_for_it(procs, tmp_path, make_ctx,
                                                                                  monkeypatch) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1\ntorch.OutOfMemoryError: CUDA out of memory.\n")
    printed = tmp_path / "notebook.out"
    with printed.open("wb") as out:  # ready once torch is imported (a fixed sleep was too short under load)
        notebook = procs([sys.executable, "-c", TORCH_SLEEP], ready=printed, stdout=out)
    # The node as this test sees it: the notebook alone. Under `pytest -n`, another test's ranks
    # (a launcher's RANK in their environment) may run beside it, and those are tied by design
    # (`launcher-env`: the log may be written on another host).
    every = _procfs.pids
    monkeypatch.setattr(_procfs, "pids", lambda: [pid for pid in every() if pid == notebook.pid])
    result = process.run({"log": str(log)}, make_ctx(10.0))
    assert result["found"] is False and result["pid"] is None
    assert result["job_exited"] is True
    assert "the job has exited" in result["reason"]
    assert notebook.pid in result["foreign_pids"]


def test_a_pipeline_into_tee_ties_the_python_before_the_pipe(procs, tmp_path, make_ctx) -> None:
    log = tmp_path / "train.log"
    script = tmp_path / "job.py"
    script.write_text(WRITE_FOREVER)
    shell = procs(["/bin/sh", "-c", f"{sys.executable} {script} | tee -a {log} >/dev/null"], ready=log)
    result = process.run({"log": str(log)}, make_ctx(10.0))
    [python] = [p for p in result["processes"] if str(script) in p["cmdline"]]
    assert python["tied_by"] == "process-group"
    assert python["ppid"] == shell.pid
    assert set(result["log_writers"]) - {shell.pid}  # tee holds it


def test_descendants_of_the_writer_are_the_job_too(procs, tmp_path, make_ctx) -> None:
    log = tmp_path / "train.log"
    code = ("import subprocess, sys, time\nprint('ready', flush=True)\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],"
            " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)\n"
            "time.sleep(120)\n")
    with open(log, "ab") as out:
        parent = procs([sys.executable, "-c", code], ready=log, stdout=out)
    _wait_for(lambda: any(_ppid(pid) == parent.pid for pid in _procfs.pids()))
    result = process.run({"log": str(log)}, make_ctx(10.0))
    ties = {p["pid"]: p["tied_by"] for p in result["processes"]}
    assert ties[parent.pid] == "log-writer"
    [child] = [pid for pid in ties if pid != parent.pid]
    assert ties[child] == "launcher" and _ppid(child) == parent.pid


def test_a_pid_the_log_prints_ties_a_process_that_no_longer_holds_it(procs, tmp_path, make_ctx) -> None:
    job = procs([sys.executable, "-c", SLEEP], stdout=subprocess.DEVNULL)
    log = tmp_path / "train.log"
    log.write_text(f"[rank0]: local_rank: 0 (pid: {job.pid}) of binary: {sys.executable}\n")
    result = process.run({"log": str(log)}, make_ctx(10.0))
    assert _pids(result) == {job.pid}
    assert result["tied_by"] == "log-pid"


def test_an_nccl_prefix_ties_a_pid_only_on_its_own_host(procs, tmp_path, make_ctx) -> None:
    import socket

    job = procs([sys.executable, "-c", SLEEP], stdout=subprocess.DEVNULL)
    log = tmp_path / "train.log"
    log.write_text(f"gpu-elsewhere-77:{job.pid}:{job.pid + 9} [0] NCCL INFO Bootstrap : Using eth0\n")
    assert job.pid not in _pids(process.run({"log": str(log)}, make_ctx(10.0)))
    here = socket.gethostname().split(".")[0]
    log.write_text(f"[rank0]:{here}:{job.pid}:{job.pid + 9} [0] NCCL INFO Bootstrap : Using eth0\n")
    result = process.run({"log": str(log)}, make_ctx(10.0))
    assert _pids(result) == {job.pid} and result["tied_by"] == "log-pid"


def test_a_pid_printed_before_the_process_started_is_someone_else(procs, tmp_path, make_ctx) -> None:
    log = tmp_path / "train.log"
    log.write_text("placeholder\n")
    os.utime(log, (time.time() - 3600, time.time() - 3600))  # written an hour ago
    job = procs([sys.executable, "-c", SLEEP], stdout=subprocess.DEVNULL)
    log.write_text(f"Worker (pid={job.pid}) died\n")
    os.utime(log, (time.time() - 3600, time.time() - 3600))
    result = process.run({"log": str(log)}, make_ctx(10.0))
    assert job.pid not in _pids(result)


def test_the_script_a_traceback_names_ties_the_process_running_it(procs, tmp_path, make_ctx) -> None:
    script = tmp_path / "train.py"
    script.write_text(SLEEP)
    job = procs([sys.executable, str(script)], stdout=subprocess.DEVNULL)
    log = tmp_path / "train.log"
    log.write_text(f'Traceback (most recent call last):\n  File "{script}", line 3, in <module>\n'
                   "ConnectionError: store refused\nretrying in 10 s\nstep 12 | loss 2.31\n")
    result = process.run({"log": str(log)}, make_ctx(10.0))
    assert _pids(result) == {job.pid}
    assert result["tied_by"] == "script"


def test_a_log_ending_in_a_crash_is_a_run_that_ended_whatever_runs_its_script(procs, tmp_path,
                                                                            make_ctx) -> None:
    """Seen on an H100: the job died of OOM beside the previous run of the same script, which a
    launcher had started and which still held the GPU; it was taken for the job."""
    script = tmp_path / "train.py"
    script.write_text(SLEEP)
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1"}
    started = tmp_path / "previous.out"  # its interpreter is up (not only exec'd) before the check looks
    with started.open("w") as out:
        previous = procs([sys.executable, str(script), "--run", "1"], ready=started, stdout=out, env=env)
    log = tmp_path / "train.log"
    log.write_text(f"step 1 | loss 2.0\nTraceback (most recent call last):\n"
                   f'  File "{script}", line 3, in <module>\n'
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 24.00 GiB.\n")
    result = process.run({"log": str(log)}, make_ctx(10.0))
    assert result["found"] is False and result["job_exited"] is True
    assert "torch.OutOfMemoryError" in result["reason"] and "the job has exited" in result["reason"]
    found = [f for f in result["foreign"] if f["pid"] == previous.pid]
    assert len(found) == 1, result  # the whole result when it is not listed
    assert "another run" in found[0]["why"]


@pytest.mark.parametrize(("tail", "crash"), [
    # torch's own words, from the H100 runs of scripts/gpu-verdicts.sh
    (["Traceback (most recent call last):", '  File "/w/verdict_jobs.py", line 106, in <module>',
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 24.00 GiB. GPU 0 has a total "
      "capacity of 79.18 GiB of which 17.21 GiB is free."], "torch.OutOfMemoryError"),
    (["[rank1]: Traceback (most recent call last):", '[rank1]:   File "/w/verdict_jobs.py", line 106',
      "[rank1]: torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:93, invalid usage",
      "[W1128 03:59:45.711971552 ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() "
      "was not called before program exit", "E1128 03:59:46 failed (exitcode: 1) local_rank: 1 (pid: 805)",
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
      "Root Cause (first observed failure):"],
     "torch.distributed.DistBackendError"),
    (["Traceback (most recent call last):", "KeyError: 'lr'", "step 101 | loss 1.2"], None),
    (["step 7 | loss 1.9", "RuntimeError: not after a traceback"], None),
    (["Traceback (most recent call last):", "ValueError: old", "epoch 3 done",
      "Traceback (most recent call last):",
      "  File \"t.py\", line 1, in <module>", "[rank0]: RuntimeError: new"], "RuntimeError"),
])
def test_a_crash_at_the_end_of_the_log(tail: list[str], crash: str | None) -> None:
    assert _job.ended_in_crash(tail) == crash


def _ppid(pid: int) -> int | None:
    try:
        return _procfs.stat(pid)["ppid"]
    except OSError:
        return None


# -- the rules without /proc: which candidates are tied when no log ties any ----------------------


def _candidate(pid: int, launched: bool = False, torch: bool = False) -> _job.Candidate:
    stat = {"pid": pid, "ppid": 1, "pgrp": pid, "state": "S", "starttime": 0}
    return _job.Candidate(pid, stat, {}, ["python3", f"job{pid}.py"], launched, torch)


def _tie(*candidates: _job.Candidate, log: str = "") -> _job.Ties:
    table = {c.pid: c for c in candidates}
    return _job.tie(table, [(c.pid, c.stat) for c in candidates], log, time.monotonic() + 1)


def test_without_a_log_the_launchers_ranks_are_the_job_and_a_lone_torch_process_is_foreign() -> None:
    ties = _tie(_candidate(10, launched=True), _candidate(11, launched=True), _candidate(12, torch=True))
    assert ties.tied == {10: "launcher-env", 11: "launcher-env"}
    assert [f["pid"] for f in ties.foreign] == [12]


def test_without_a_log_one_torch_process_is_the_job_and_two_are_nobodys() -> None:
    assert _tie(_candidate(20, torch=True)).tied == {20: "only-torch-process"}
    two = _tie(_candidate(20, torch=True), _candidate(21, torch=True))
    assert two.tied == {} and "give log, pid or match" in (two.note or "")
    assert [f["pid"] for f in two.foreign] == [20, 21]


def test_on_a_busy_node_the_process_the_oom_names_leads_the_foreign_list(tmp_path) -> None:
    """Seen in CI: a node running a test suite has more torch processes than the list keeps; the
    notebook torch's OOM names (the verdict's culprit) had a high PID and was cut off."""
    crowd = [_candidate(100 + i, torch=True) for i in range(_job.FOREIGN_MAX + 5)]
    notebook = _candidate(32639, torch=True)
    launched = _candidate(900, launched=True)
    log = tmp_path / "train.log"
    log.write_text("Traceback (most recent call last):\n  File \"/w/train.py\", line 3, in <module>\n"
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                   "total capacity of 79.11 GiB of which 1.20 GiB is free. Process 32639 has 70.00 GiB "
                   "memory in use. Of the allocated memory 6.1 GiB is allocated by PyTorch\n")
    ties = _tie(*crowd, notebook, launched, log=str(log))
    assert ties.exited and not ties.tied
    assert len(ties.foreign) == _job.FOREIGN_MAX
    assert [f["pid"] for f in ties.foreign[:2]] == [32639, 900]
    assert ties.foreign[0]["why"] == "the job's log names it; torch loaded"


def test_foreign_processes_of_one_kind_come_newest_first() -> None:
    old, new = _candidate(40, torch=True), _candidate(41, torch=True)
    old.stat["starttime"], new.stat["starttime"] = 100, 200
    ties = _tie(_candidate(39, launched=True), old, new)
    assert [f["pid"] for f in ties.foreign] == [41, 40]


def test_a_log_that_is_not_there_says_so(tmp_path) -> None:
    ties = _tie(_candidate(30, launched=True), log=str(tmp_path / "nope.log"))
    assert ties.tied == {30: "launcher-env"}
    assert "was not found" in (ties.note or "")


def test_ranks_of_the_same_job_as_the_log_writer_are_the_job_too(monkeypatch) -> None:
    """Slurm's batch node: slurmstepd writes the log; the ranks' output reaches it through a pipe."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    writer = _candidate(40)
    writer.env = {"SLURM_JOB_ID": "77"}
    rank = _candidate(41, launched=True)
    rank.env = {"SLURM_JOB_ID": "77", "SLURM_PROCID": "0"}
    other_job = _candidate(42, launched=True)
    other_job.env = {"SLURM_JOB_ID": "78", "SLURM_PROCID": "0"}
    ties = _job.Ties(tied={40: "log-writer"})
    _job._tie_same_job(ties, {40: writer, 41: rank, 42: other_job})
    assert ties.tied == {40: "log-writer", 41: "same-job"}


def test_the_probes_own_slurm_job_ties_its_ranks(monkeypatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    rank = _candidate(51, launched=True)
    rank.env = {"SLURM_JOB_ID": "77"}
    ties = _job.Ties()
    _job._tie_same_job(ties, {51: rank})
    assert ties.tied == {51: "same-job"}


def test_a_log_whose_storage_hangs_leaves_the_check_on_time(monkeypatch) -> None:
    import threading

    stuck = threading.Event()
    monkeypatch.setattr(_job, "matching_files", lambda path: stuck.wait(5) or [])
    started = time.monotonic()
    ties = _tie(_candidate(60, launched=True), log="/hung/train.log")
    assert time.monotonic() - started < 3
    assert ties.tied == {60: "launcher-env"} and "hung" in (ties.note or "")
    stuck.set()
