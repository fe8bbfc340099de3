"""A Slurm job as runbook sees it: its nodes, state, log files and tasks, from `scontrol`.

`runbook run ID --slurm-job 123456` diagnoses a job by its id: the nodes come from the job's
node list (a hostlist, expanded), the job's `StdOut` becomes the default `log` parameter, and
the nodes are reached through the job's own allocation (transports/slurm.py), so no SSH to
compute nodes is needed. `scontrol show job --json` is read where Slurm has it (21.08 and
later), the one-line text form (`scontrol -o show job`) otherwise. A job that is not running
any more is described from what Slurm keeps (`scontrol` for a while after the end, `sacct`
where accounting runs) and its log files are triaged instead.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
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
    tasks_per_node: dict[str, int] = field(default_factory=dict)
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
                    str(exit_code or ""), _int(job.get("tasks")), {}, str(job.get("name") or ""))


def _from_text(job_id: str, text: str) -> SlurmJob:
    fields = dict(_pairs(text))
    if not fields.get("JobId"):
        raise SlurmError(f"--slurm-job {job_id}: no such job (Slurm forgets finished jobs after "
                         "MinJobAge; try sacct)")
    return SlurmJob(job_id, fields.get("JobState", "UNKNOWN"), fields.get("Reason", ""),
                    _expand(fields.get("NodeList", "")), _path(fields.get("StdOut")),
                    _path(fields.get("StdErr")), fields.get("ExitCode", ""),
                    _int(fields.get("NumTasks")), {}, fields.get("JobName", ""))


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
