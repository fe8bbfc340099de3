"""A Slurm job as runbook sees it: its nodes, state, log files and tasks, from `scontrol`.

`runbook run ID --slurm-job 123456` diagnoses a job by its id: the nodes come from the job's
node list (a hostlist, expanded), the job's `StdOut` becomes the default `log` parameter, and
the nodes are reached through the job's own allocation (transports/slurm.py), so no SSH to
compute nodes is needed. `scontrol show job --json` is read where Slurm has it (21.08 and
later), the one-line text form (`scontrol -o show job`) otherwise. A job that is not running
any more is described from what Slurm keeps (`scontrol` for a while after the end, `sacct`
where accounting runs) and its log files are triaged instead.

`--slurm-nodes gpu[01-64]` diagnoses idle nodes the same way: allocate() holds them for the run
in one job (`salloc --no-shell --job-name runbook-health`, a bounded wait), the checks run in it
like in any job, and Allocation.release() scancels it at the end (run/targets.py sees to that,
on Ctrl-C and errors too). A node that is drained, down or busy is named in one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from runbook.transports import Node

SCONTROL_TIMEOUT_S = 20.0
RUNNING = ("RUNNING", "COMPLETING", "SUSPENDED")


class SlurmError(ValueError):
    """The job cannot be read; one line for a person."""


@dataclass
class SlurmJob:
    """What `scontrol show job` says about one job."""

    id: str
    state: str
    reason: str = ""
    nodes: list[str] = field(default_factory=list)
    stdout: str | None = None
    stderr: str | None = None
    exit_code: str = ""
    tasks: int | None = None
    name: str = ""

    @property
    def running(self) -> bool:
        return self.state in RUNNING

    def describe(self) -> str:
        """`job 123 (train) is FAILED (exit 1:0, reason NonZeroExitCode) on node[1-2]`."""
        import hostlist

        parts = [f"exit {self.exit_code}"] if self.exit_code else []
        if self.reason and self.reason != "None":
            parts.append(f"reason {self.reason}")
        extra = f" ({', '.join(parts)})" if parts else ""
        name = f" ({self.name})" if self.name else ""
        where = f" on {hostlist.collect_hostlist(self.nodes)}" if self.nodes else ""
        return f"job {self.id}{name} is {self.state}{extra}{where}"


def read_job(job_id: str, env: dict[str, str] | None = None) -> SlurmJob:
    """The job, from `scontrol show job --json` or its text form. Raises SlurmError."""
    if not re.fullmatch(r"\d+(?:_\d+)?", job_id.strip()):
        raise SlurmError(f"--slurm-job {job_id!r}: a job id is a number (e.g. 123456)")
    done = _scontrol(["show", "job", "--json", job_id.strip()], env)
    if done.returncode == 0 and done.stdout.lstrip().startswith("{"):
        return _from_json(job_id.strip(), json.loads(done.stdout))
    done = _scontrol(["-o", "show", "job", job_id.strip()], env)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SlurmError(f"--slurm-job {job_id}: scontrol cannot show the job: {why}")
    return _from_text(job_id.strip(), done.stdout)


def nodes_of(job: SlurmJob, python: str | None = None) -> list[Node]:
    """The job's nodes, each reached through the job's allocation."""
    return [Node(name, "slurm", {"slurm_job": job.id, **({"python": python} if python else {})})
            for name in job.nodes]


def sacct_steps(job_id: str, env: dict[str, str] | None = None) -> list[dict[str, str]]:
    """Each step's state and exit code from `sacct`; empty where accounting does not run."""
    try:
        done = subprocess.run(["sacct", "-j", job_id, "-n", "-P", "-o",
                               "JobID,JobName,State,ExitCode,NodeList"],
                              capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    keys = ("step", "name", "state", "exit_code", "nodes")
    return [dict(zip(keys, line.split("|"), strict=False)) for line in done.stdout.splitlines() if line]


def _scontrol(args: list[str], env: dict[str, str] | None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True,
                              timeout=SCONTROL_TIMEOUT_S, env=env)
    except FileNotFoundError:
        raise SlurmError("--slurm-job: scontrol not found: run this where Slurm's commands are "
                         "installed (a login node)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"--slurm-job: scontrol did not answer in {SCONTROL_TIMEOUT_S:g}s "
                         "(is slurmctld reachable?)") from None


def _expand(hostlist: str) -> list[str]:
    import hostlist as python_hostlist

    if not hostlist or hostlist in ("(null)", "None"):
        return []
    return list(python_hostlist.expand_hostlist(hostlist))


def _from_json(job_id: str, data: dict[str, Any]) -> SlurmJob:
    jobs = data.get("jobs") or []
    if not jobs:
        raise SlurmError(f"--slurm-job {job_id}: no such job (Slurm forgets finished jobs after "
                         "MinJobAge; try sacct)")
    job = jobs[0]
    state = job.get("job_state")
    state = state[0] if isinstance(state, list) and state else state
    exit_code = _exit_code(job.get("exit_code"))
    nodes = _expand(str(job.get("nodes") or ""))
    return SlurmJob(job_id, str(state or "UNKNOWN"), str(job.get("state_reason") or ""), nodes,
                    _path(job.get("standard_output")), _path(job.get("standard_error")),
                    str(exit_code or ""), _int(job.get("tasks")), str(job.get("name") or ""))


def _from_text(job_id: str, text: str) -> SlurmJob:
    fields = dict(_pairs(text))
    if not fields.get("JobId"):
        raise SlurmError(f"--slurm-job {job_id}: no such job (Slurm forgets finished jobs after "
                         "MinJobAge; try sacct)")
    return SlurmJob(job_id, fields.get("JobState", "UNKNOWN"), fields.get("Reason", ""),
                    _expand(fields.get("NodeList", "")), _path(fields.get("StdOut")),
                    _path(fields.get("StdErr")), fields.get("ExitCode", ""),
                    _int(fields.get("NumTasks")), fields.get("JobName", ""))


def _pairs(text: str) -> list[tuple[str, str]]:
    """`Key=Value` words of `scontrol -o show job` (values may not hold spaces, except Command)."""
    out = []
    for word in shlex.split(text.strip().splitlines()[0] if text.strip() else "", posix=True):
        key, sep, value = word.partition("=")
        if sep:
            out.append((key, value))
    return out


def _exit_code(value: Any) -> str:
    """`1:0` (return code:signal) from the JSON's number or {return_code, signal} form."""
    if not isinstance(value, dict):
        return "" if value is None else str(value)
    code = value.get("return_code")
    code = code.get("number") if isinstance(code, dict) else code
    signal = value.get("signal")
    signal = signal.get("id", 0) if isinstance(signal, dict) else 0
    return f"{code}:{signal}"


def _path(value: Any) -> str | None:
    return str(value) if value and str(value) not in ("(null)", "None", "/dev/null") else None


def _int(value: Any) -> int | None:
    if isinstance(value, dict):
        value = value.get("number")
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# -- --slurm-nodes: idle nodes diagnosed in an allocation of their own ----------------------------

HEALTH_JOB_NAME = "runbook-health"
ALLOC_WAIT_S = 30  # salloc --immediate: how long to wait for the nodes to be granted
RELEASE_WAIT_S = 10.0  # after scancel: until the allocation has left squeue
BUSY_STATES = ("allocated", "mixed", "completing", "planned")
_GRANTED = re.compile(r"job allocation (\d+)")


@dataclass
class Allocation:
    """A `runbook-health` job holding idle nodes for one run (salloc --no-shell): its checks
    run in it as in any job (`srun --jobid ID --overlap`); release() scancels it, once."""

    id: str
    nodes: list[str]
    env: dict[str, str] | None = None
    released: bool = False

    def release(self, wait_s: float = RELEASE_WAIT_S) -> str | None:
        """scancel the allocation and wait (bounded) until squeue no longer lists it; the
        problem in one line, or None."""
        if self.released:
            return None
        self.released = True
        try:
            done = subprocess.run(["scancel", self.id], capture_output=True, text=True,
                                  timeout=SCONTROL_TIMEOUT_S, env=self.env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"cannot scancel allocation {self.id} ({exc}): run `scancel {self.id}`"
        if done.returncode != 0 and "already completing" not in done.stderr \
                and "Invalid job id" not in done.stderr:
            why = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return f"scancel {self.id} failed: {why}: run `scancel {self.id}`"
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:  # bounded: wait_s / 0.2 tries
            listed = _run_quiet(["squeue", "-h", "-j", self.id, "-o", "%i"], self.env)
            if listed is not None and self.id not in listed.split():
                return None
            time.sleep(0.2)
        return None  # cancelled; Slurm is still cleaning up (CG), which needs nothing of us


def node_states(names: list[str], env: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """Each known node's (state, reason) from `sinfo -N`; a node Slurm does not know is absent."""
    import hostlist

    done = _run_quiet(["sinfo", "-h", "-N", "-n", hostlist.collect_hostlist(names), "-o", "%N|%T|%E"],
                      env, raise_missing=True)
    states: dict[str, tuple[str, str]] = {}
    for line in (done or "").splitlines():
        name, _, rest = line.partition("|")
        state, _, reason = rest.partition("|")
        states.setdefault(name.strip(), (state.strip().lower(), reason.strip()))
    return states


def unusable(states: dict[str, tuple[str, str]], names: list[str]) -> list[str]:
    """`node02 drained (test)`, one phrase per kind of trouble, for nodes no allocation can get."""
    import hostlist

    groups: dict[str, list[str]] = {}
    for name in names:
        if name not in states:
            groups.setdefault("not a Slurm node", []).append(name)
            continue
        state, reason = states[name]
        base = state.rstrip("*~#!%$@^-+")
        if state.endswith("*"):
            what = f"{base}, not responding"
        elif base == "idle" or base in BUSY_STATES:
            continue
        else:
            what = base
        if reason and reason != "none":
            what += f" (Reason: {reason})"
        groups.setdefault(what, []).append(name)
    return [f"{hostlist.collect_hostlist(found)} {'is' if len(found) == 1 else 'are'} {what}"
            for what, found in groups.items()]


def busy(names: list[str], env: dict[str, str] | None = None) -> list[str]:
    """`node01 runs job 12 (train)`: the jobs that hold the given nodes."""
    import hostlist

    listed = _run_quiet(["squeue", "-h", "-t", "R,CG,S", "-w", hostlist.collect_hostlist(names),
                         "-o", "%i|%j|%N"], env) or ""
    out = []
    for line in listed.splitlines():
        job, _, rest = line.partition("|")
        name, _, where = rest.partition("|")
        mine = [n for n in _expand(where.strip()) if n in names]
        if mine:
            out.append(f"{hostlist.collect_hostlist(mine)} runs job {job.strip()} ({name.strip()})")
    return out


def allocate(spec: str, minutes: int, wait_s: int = ALLOC_WAIT_S,
             env: dict[str, str] | None = None) -> Allocation:
    """Idle nodes held for this run in one `runbook-health` job. Raises SlurmError (one line
    naming the nodes that cannot be had); on Ctrl-C, cancels what it asked for and re-raises."""
    import hostlist

    try:
        names = list(dict.fromkeys(hostlist.expand_hostlist(spec.strip())))
    except hostlist.BadHostlist as exc:
        raise SlurmError(f"--slurm-nodes: bad host list {spec!r}: {exc}") from None
    if not names:
        raise SlurmError(f"--slurm-nodes {spec!r}: names no node")
    nodelist = hostlist.collect_hostlist(names)
    bad = unusable(node_states(names, env), names)
    if bad:
        raise SlurmError(f"--slurm-nodes {nodelist}: {'; '.join(bad)}: cannot allocate them")
    command = salloc_command(names, minutes, wait_s)
    with tempfile.TemporaryFile("w+") as said:
        try:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=said, text=True, start_new_session=True, env=env)
        except FileNotFoundError:
            raise SlurmError("--slurm-nodes: salloc not found: run this where Slurm's commands "
                             "are installed (a login node)") from None
        try:
            rc = proc.wait(timeout=wait_s + SCONTROL_TIMEOUT_S)
        except (KeyboardInterrupt, subprocess.TimeoutExpired) as exc:
            # salloc revokes a pending request on SIGINT; the scancel below covers a granted one
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            _cancel_asked(said, env)
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise SlurmError(f"--slurm-nodes {nodelist}: salloc did not answer in "
                             f"{wait_s + SCONTROL_TIMEOUT_S:g}s (is slurmctld reachable?)") from None
        said.seek(0)
        text = said.read()
    granted = _GRANTED.findall(text)
    if rc == 0 and granted:
        return Allocation(granted[-1], names, env)
    for job in granted:  # asked, not granted: make sure nothing is left queued
        Allocation(job, names, env).release(wait_s=0)
    why = "; ".join(unusable(node_states(names, env), names) + busy(names, env))
    if why:
        raise SlurmError(f"--slurm-nodes {nodelist}: not allocated within {wait_s}s: {why}")
    lines = [line.removeprefix("salloc: ").removeprefix("error: ") for line in text.splitlines()]
    raise SlurmError(f"--slurm-nodes {nodelist}: salloc failed: {(lines or ['no output'])[-1]}")


def salloc_command(names: list[str], minutes: int, wait_s: int) -> list[str]:
    import hostlist

    # --exclusive: the whole node, its GPUs (GRES) included, and no other job on it meanwhile
    return ["salloc", "--no-shell", "--nodes", str(len(names)), "--nodelist",
            hostlist.collect_hostlist(names), "--ntasks-per-node", "1", "--exclusive",
            "--job-name", HEALTH_JOB_NAME, "--time", str(max(1, minutes)), f"--immediate={max(1, wait_s)}"]


def allocation_nodes(allocation: Allocation, python: str | None = None) -> list[Node]:
    """The allocation's nodes, reached through it as through any job (transports/slurm.py)."""
    return [Node(name, "slurm", {"slurm_job": allocation.id, **({"python": python} if python else {})})
            for name in allocation.nodes]


def _cancel_asked(said: Any, env: dict[str, str] | None) -> None:
    said.seek(0)
    for job in _GRANTED.findall(said.read()):
        Allocation(job, [], env).release()


def _run_quiet(argv: list[str], env: dict[str, str] | None, raise_missing: bool = False) -> str | None:
    """A Slurm client's stdout; None when it failed."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, env=env)
    except FileNotFoundError:
        if raise_missing:
            raise SlurmError(f"--slurm-nodes: {argv[0]} not found: run this where Slurm's commands "
                             "are installed (a login node)") from None
        return None
    except (OSError, subprocess.TimeoutExpired):
        if raise_missing:
            raise SlurmError(f"--slurm-nodes: {argv[0]} did not answer in {SCONTROL_TIMEOUT_S:g}s "
                             "(is slurmctld reachable?)") from None
        return None
    return done.stdout if done.returncode == 0 else None
