"""Which processes are the job's: tied to it by evidence, never by "any Python with torch".

The `process` check (and the checks that select processes like it: stack, nccl,
flight_recorder) ask this module which of the node's Python processes belong to the job.
A process is tied to the job by, strongest first:

- `log-writer`: it holds the job's log open (stdout redirected to it, a logging FileHandler,
  the `tee` of a pipeline), and `process-group`: it shares a process group with such a
  writer (`python train.py | tee train.log`);
- `launcher`: it descends from a tied process (torchrun's ranks, DataLoader workers), or it is
  the launcher (torchrun, deepspeed, srun, mpirun, accelerate) above a tied rank;
- `same-job`: a launcher started it for the same job as a tied process (the same SLURM_JOB_ID,
  TORCHELASTIC_RUN_ID or MASTER_ADDR:MASTER_PORT), or for the Slurm job the probe itself runs in:
  ranks whose output reaches the log through a pipe (Slurm's I/O forwarding, `tee`) are the job's
  although they do not hold it;
- `log-pid`: the log prints its PID (torchrun's `(pid: 4242)`, Ray's `(pid=4242)`, NCCL's
  `host:4242:4260 [0] NCCL` when the host is this one) and it started before the log was last
  written;
- `script`: it runs the script the log's traceback names (`File "/app/train.py", ... <module>`),
  and the log does not end in that crash (see below);
- `launcher-env`: a launcher gave it RANK/LOCAL_RANK/WORLD_SIZE (or Slurm's SLURM_PROCID) and
  nothing above tied anything: the log may be written on another host (a shared file system,
  Slurm's output forwarding);
- `only-torch-process`: no log was given, no launcher environment exists, and it is the one
  Python process with libtorch loaded.

Every other Python process with libtorch loaded or a launcher's environment is `foreign`: a
stale notebook, the previous run, another user's job. When a log was given and nothing is tied
to it, the job has exited. A log that nobody holds open and that ends in a crash (a traceback's
exception with no progress after it) is a run that has ended: a process running the same script
or started by a launcher is then another run (the previous one still holding the GPU, say), not
this one, and only a PID the log prints still ties. Standard library only, like every check module.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runbook.checks import _procfs
from runbook.checks.log.log_files import matching_files

FOREIGN_MAX = 20
# What a launcher puts in its ranks' environment: torchrun and friends, Slurm's srun, MPI.
LAUNCH_VARS = (*_procfs.RANK_VARS, "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_HEAD_BYTES = 64 * 1024  # the log's start: launchers print their ranks' PIDs there
_TAIL_BYTES = 256 * 1024  # and its end: tracebacks, the elastic agent's failure report
_LAUNCHERS = re.compile(r"(?:^|/)(?:torchrun|deepspeed|srun|mpirun|mpiexec|accelerate|horovodrun)$"
                        r"|^torch\.distributed\.(?:run|launch)$")
# PIDs a log prints about its own processes; NCCL's prefix also names the host (`gpu01:4242:4260
# [0] NCCL`): a PID printed for another host is that host's.
_LOG_PIDS = re.compile(r"\(pid[:=] ?(\d+)\)|\bpid[:=] ?(\d+)\b|\[PID (\d+)\]")
_NCCL_PREFIX = re.compile(r"^(?:\S*\]: ?)?([\w.-]+):(\d+):\d+ \[\d+\] NCCL")
# torch's OOM message names the other processes on the GPU: `Process 32639 has 70.00 GiB memory`.
_OTHER_PROCESS = re.compile(r"\b[Pp]rocess (\d+) has\b")
_SCRIPT = re.compile(r'File "([^"]+\.py)", line \d+, in <module>')
# A crash at the log's end: a traceback, then its exception (`torch.OutOfMemoryError: ...`,
# `[rank0]: RuntimeError: ...`), then nothing that a running job writes, only the launcher's
# epilogue (torchrun's failure summary, NCCL's shutdown warnings).
_CRASH_WINDOW = 120  # lines at the end of the log
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
_EXCEPTION = re.compile(r"^(?:\[[^\]]*\]:?\s*)?"  # torchrun's `[rank0]:` prefix
                        r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt))(?::|$)")
_PROGRESS = re.compile(r"\b(?:step|iter(?:ation)?|epoch|loss|retry|retrying|resum(?:e|ing))\b", re.IGNORECASE)


@dataclass
class Candidate:
    """A Python process that could be the job's: its stat, environment and how it looks."""

    pid: int
    stat: dict[str, Any]
    env: dict[str, str] | None
    argv: list[str]
    launched: bool  # a launcher gave it RANK/WORLD_SIZE (or Slurm's names)
    torch: bool  # libtorch is mapped


@dataclass
class Ties:
    """What the evidence says about the job's processes on this node."""

    tied: dict[int, str] = field(default_factory=dict)  # pid -> how it is tied
    foreign: list[dict[str, Any]] = field(default_factory=list)
    log: str | None = None  # the log that was read (a glob's newest match)
    log_writers: list[int] = field(default_factory=list)
    exited: bool = False  # a log was given and no live process is tied to it
    crash: str | None = None  # the exception the log ends in, when nobody holds the log
    other_runs: list[int] = field(default_factory=list)  # run its script, but the log's run ended
    named: set[int] = field(default_factory=set)  # PIDs the log names as other processes (OOM's)
    note: str | None = None  # why the ties are weak or none, for the reason field


def tie(candidates: dict[int, Candidate], others: list[tuple[int, dict[str, Any]]],
        log_param: str, deadline: float) -> Ties:
    """Tie the candidates to the job; `others` are every process (pid, stat) of the node."""
    ties = Ties()
    # The log may sit on storage that hangs: read it in a thread the check does not wait past
    # the deadline for (a stuck read is left behind; the check answers without the log's ties).
    by_log = Ties()
    done = _in_time(lambda: _tie_by_log(by_log, log_param, candidates, others, deadline), deadline)
    if not done:
        ties.note = (f"reading the log {log_param!r} hung (its storage does not answer): nothing "
                     "ties a process to it")
    else:
        ties = by_log
    log = ties.log
    if log_param and log is None and done:
        ties.note = f"the log {log_param!r} was not found, so nothing ties a process to it"
    if ties.crash and not ties.tied:
        ties.exited = True
        ties.note = (f"the log ends in the job's crash ({ties.crash}) and no process holds it open: "
                     "the job has exited (a process running its script is another run)")
    elif not ties.tied:
        _tie_without_log(ties, candidates, log is not None)
    if ties.tied:
        _tie_tree(ties, others, candidates)
    _tie_same_job(ties, candidates)
    ties.foreign = _foreign(candidates, ties)
    return ties


def _resolve(log_param: str) -> str | None:
    if not log_param:
        return None
    files = matching_files(log_param)
    return str(files[0]["path"]) if files else None


def _in_time(work: Callable[[], None], deadline: float) -> bool:
    """Run `work` in a daemon thread; whether it finished by the deadline. An exception it raised
    is raised here, in the check, where the probe reports it."""
    failed: list[BaseException] = []

    def guarded() -> None:
        try:
            work()
        except Exception as exc:  # carried to the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=guarded, name="runbook-job-log", daemon=True)
    thread.start()
    thread.join(max(0.05, deadline - time.monotonic()))
    if failed:
        raise failed[0]
    return not thread.is_alive()


def _tie_by_log(ties: Ties, log_param: str, candidates: dict[int, Candidate],
                others: list[tuple[int, dict[str, Any]]], deadline: float) -> None:
    log = _resolve(log_param)
    if log is None:
        return
    ties.log = log
    try:
        st = os.stat(log)
    except OSError:
        return
    writers = _writers(others, st.st_dev, st.st_ino, deadline)
    ties.log_writers = writers
    for pid in writers:
        ties.tied[pid] = "log-writer"
    groups = {stat["pgrp"] for pid, stat in others if pid in ties.tied}
    for pid, stat in others:
        if stat["pgrp"] in groups and pid not in ties.tied and stat["pgrp"] > 1:
            ties.tied[pid] = "process-group"
    if ties.tied:
        return
    head_and_tail = _read_ends(log)
    ties.named = {int(m.group(1)) for line in head_and_tail if "rocess " in line
                  for m in _OTHER_PROCESS.finditer(line)}
    for pid in _printed_pids(head_and_tail, st.st_mtime, others):
        ties.tied[pid] = "log-pid"
    running_script = _running_script(head_and_tail, candidates)
    ties.crash = ended_in_crash(head_and_tail[-_CRASH_WINDOW:])
    if ties.crash:  # the run that wrote the log has ended: its script's name ties no live process
        ties.other_runs = [pid for pid in running_script if pid not in ties.tied]
        return
    for pid in running_script:
        ties.tied.setdefault(pid, "script")


def ended_in_crash(lines: list[str]) -> str | None:
    """The exception a log ends in (its name), or None: the first exception line after a
    traceback, with no progress line after it (a traceback the job survived is followed by more
    steps)."""
    armed, found = False, None
    for line in lines:
        if _TRACEBACK.search(line):
            armed = armed or found is None
        elif armed and found is None:
            match = _EXCEPTION.match(line.strip())
            if match:
                found = match.group(1)
        elif found and _PROGRESS.search(line):
            armed, found = False, None
    return found


def _writers(others: list[tuple[int, dict[str, Any]]], dev: int, ino: int, deadline: float) -> list[int]:
    """PIDs holding the file open, scanned until the deadline (a node with many processes)."""
    found = []
    for pid, _stat in others:
        if time.monotonic() >= deadline:
            break
        try:
            if _procfs.holds_file(pid, dev, ino):
                found.append(pid)
        except OSError:
            continue
    return found


def _read_ends(path: str) -> list[str]:
    """The first and last lines of the log (bounded), where PIDs and tracebacks are printed."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
            size = os.fstat(f.fileno()).st_size
            f.seek(max(len(head), size - _TAIL_BYTES))
            tail = f.read(_TAIL_BYTES)
    except OSError:
        return []
    return (head + b"\n" + tail).decode("utf-8", "replace").splitlines()


def _printed_pids(lines: list[str], mtime: float, others: list[tuple[int, dict[str, Any]]]) -> list[int]:
    """Live processes the log names by PID that existed when the log was last written (a PID
    reused since by another program started later)."""
    printed: set[int] = set()
    here = socket.gethostname().split(".")[0]
    for line in lines:
        if "NCCL" in line:
            nccl = _NCCL_PREFIX.match(line)
            if nccl and nccl.group(1).split(".")[0] == here:
                printed.add(int(nccl.group(2)))
        if "pid" not in line.lower():
            continue
        for match in _LOG_PIDS.finditer(line):
            printed.update(int(group) for group in match.groups() if group)
    if not printed:
        return []
    boot = time.time() - _procfs.uptime()
    ticks = _procfs.clock_ticks()
    return [pid for pid, stat in others
            if pid in printed and boot + stat["starttime"] / ticks <= mtime + 1.0]


def _running_script(lines: list[str], candidates: dict[int, Candidate]) -> list[int]:
    """Candidates running a script the log's tracebacks name as their top-level module."""
    scripts = {m.group(1) for line in lines if "<module>" in line for m in _SCRIPT.finditer(line)}
    if not scripts:
        return []
    out = []
    for pid, candidate in candidates.items():
        if any(_names_script(candidate, script) for script in scripts):
            out.append(pid)
    return out


def _names_script(candidate: Candidate, script: str) -> bool:
    for arg in candidate.argv[1:]:
        if arg == script or (not script.startswith("/") and arg.endswith("/" + script)):
            return True
        if script.startswith("/") and not arg.startswith("/") and arg.endswith(os.path.basename(script)):
            where = _procfs.cwd(candidate.pid)
            if where and os.path.normpath(os.path.join(where, arg)) == os.path.normpath(script):
                return True
    return False


def _tie_without_log(ties: Ties, candidates: dict[int, Candidate], log_read: bool) -> None:
    launched = [pid for pid, c in candidates.items() if c.launched]
    for pid in launched:
        ties.tied[pid] = "launcher-env"
    if launched:
        if log_read:
            ties.note = ("no process holds the log open or is named in it; the processes a launcher "
                         "started are taken as the job's (the log may be written on another host)")
        return
    if log_read:
        ties.exited = True
        ties.note = ("no process holds the log open, is named in it or was started by a launcher: "
                     "the job has exited")
        return
    torch_only = [pid for pid, c in candidates.items() if c.torch]
    if len(torch_only) == 1:
        ties.tied[torch_only[0]] = "only-torch-process"
    elif torch_only:
        ties.note = (f"{len(torch_only)} Python processes have torch loaded and nothing ties one of "
                     "them to the job: give log, pid or match")


def _tie_tree(ties: Ties, others: list[tuple[int, dict[str, Any]]], candidates: dict[int, Candidate]) -> None:
    """Descendants of tied processes, and the launcher right above a tied rank."""
    children: dict[int, list[int]] = {}
    parent = {}
    for pid, stat in others:
        children.setdefault(stat["ppid"], []).append(pid)
        parent[pid] = stat["ppid"]
    stack = list(ties.tied)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in ties.tied:
                ties.tied[child] = "launcher"
                stack.append(child)
    for pid in list(ties.tied):
        up = parent.get(pid)
        if up and up not in ties.tied and _is_launcher(up, candidates):
            ties.tied[up] = "launcher"


def _identity(env: dict[str, str]) -> set[tuple[str, str]]:
    """What names the job a launcher started a process for."""
    keys = {(name, env[name]) for name in ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID") if env.get(name)}
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        keys.add(("MASTER", f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"))
    return keys


def _tie_same_job(ties: Ties, candidates: dict[int, Candidate]) -> None:
    """Launched candidates of the same job as a tied process, or of the probe's own Slurm job."""
    keys: set[tuple[str, str]] = set()
    for pid in ties.tied:
        env = candidates[pid].env if pid in candidates else _environ(pid)
        keys |= _identity(env or {})
    if os.environ.get("SLURM_JOB_ID"):  # the probe runs inside the job (`srun --overlap`)
        keys.add(("SLURM_JOB_ID", os.environ["SLURM_JOB_ID"]))
    if not keys:
        return
    for pid, candidate in candidates.items():
        if pid not in ties.tied and candidate.launched and _identity(candidate.env or {}) & keys:
            ties.tied[pid] = "same-job"
    if ties.tied and ties.exited:
        ties.exited = False


def _environ(pid: int) -> dict[str, str]:
    try:
        return _procfs.environ(pid)
    except OSError:
        return {}


def _is_launcher(pid: int, candidates: dict[int, Candidate]) -> bool:
    argv = candidates[pid].argv if pid in candidates else _argv(pid)
    return any(_LAUNCHERS.search(arg) for arg in argv[:3])


def _argv(pid: int) -> list[str]:
    try:
        return _procfs.cmdline(pid)
    except OSError:
        return []


def _foreign(candidates: dict[int, Candidate], ties: Ties) -> list[dict[str, Any]]:
    """The untied torch/launcher processes, the likeliest culprits first: those the log names
    (torch's OOM names the processes holding the GPU), other runs of the job's script, launched
    ranks, then any torch process, newest first. A busy node (a test runner, a Ray cluster) has
    more than the list keeps, and the one the verdict names must not be cut off."""
    out = []
    for pid, candidate in candidates.items():
        if pid in ties.tied or not (candidate.torch or candidate.launched or pid in ties.other_runs):
            continue
        if pid in ties.other_runs:
            kind, why = 1, "runs the job's script, but the log ends in its crash: another run"
        else:
            kind, why = (2, "a launcher's RANK/WORLD_SIZE") if candidate.launched else (3, "torch loaded")
        if pid in ties.named:
            kind, why = 0, f"the job's log names it; {why}"
        started = candidate.stat.get("starttime", 0)
        entry = {"pid": pid, "cmdline": " ".join(candidate.argv)[:200], "why": why}
        out.append(((kind, -started, pid), entry))
    return [entry for _key, entry in sorted(out, key=lambda item: item[0])[:FOREIGN_MAX]]
