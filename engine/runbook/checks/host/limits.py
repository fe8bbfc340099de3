"""`limits`: how near are the job's processes to the limits on how many tasks they may create?

A thread or a process that cannot be created fails with EAGAIN (`pthread_create failed: Resource
temporarily unavailable`, `can't start new thread`, `fork: Resource temporarily unavailable`)
when one of four limits is reached: the user's RLIMIT_NPROC (`ulimit -u`, counted over every
thread of the user's real uid; root is exempt), the `pids.max` of the cgroup the process is in or
of any cgroup above it (containers, Slurm's task cgroups, systemd's TasksMax), or the kernel's
threads-max and pid_max. This check reads each of them for the job's processes with the number
in use, so the finding can say which one is near and by how much.

It also reads the limit on open files (RLIMIT_NOFILE, `ulimit -n`: per process, so it is reported
for the job's process holding the most descriptors, apart from the task limits): `Too many open
files` (EMFILE) is that process reaching its soft limit.
"""

from __future__ import annotations

import os
from typing import Any

from runbook.checks import _procfs, _task_limits
from runbook.checks.base import CheckContext
from runbook.checks.host import process

NAME = "limits"
SUMMARY = {
    "en": "The limits on tasks (threads and processes) the job may create: ulimit -u, the cgroup's "
          "pids.max, kernel threads-max and pid_max, with the numbers in use",
    "zh": "作业可创建任务（线程和进程）数的各项限制：ulimit -u、cgroup 的 pids.max、内核 threads-max 和 "
          "pid_max，以及当前已用的数量",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pid": process.PARAMS["properties"]["pid"],
        "match": process.PARAMS["properties"]["match"],
        "log": process.LOG_PARAM,
        "near_percent": {"type": "number", "default": 90,
                         "description": "A limit counts as near when this percent of it is in use"},
    },
    "additionalProperties": False,
}
_LIMIT = "{name, where, value, current, percent}"
RESULT_FIELDS = {
    "available": {"type": "boolean", "en": "The limits could be read", "zh": "已读取到各项限制"},
    "reason": {"type": "string", "en": "Why not (null when available)",
               "zh": "无法读取的原因（可读取时为 null）"},
    "job_found": {"type": "boolean",
                  "en": "The job's processes were found (else the limits are the node's, as the probe "
                        "sees them)",
                  "zh": "找到了作业的进程（否则给出的是探针所见的本节点限制）"},
    "pids": {"type": "array", "en": "The job's processes looked at", "zh": "检查的作业进程 PID"},
    "job_threads": {"type": "integer", "en": "Threads of the job's processes (the sum of their Threads)",
                    "zh": "作业各进程的线程总数（各进程 Threads 之和）"},
    "uid": {"type": "integer", "en": "The real uid of the job's first process",
            "zh": "作业第一个进程的真实 uid"},
    "user_tasks": {"type": "integer", "en": "Threads of every process of that uid (what RLIMIT_NPROC counts)",
                   "zh": "该 uid 所有进程的线程总数（RLIMIT_NPROC 计数的对象）"},
    "nproc_limit": {"type": "integer",
                    "en": "The soft `Max processes` of the job's process (ulimit -u; null: unlimited)",
                    "zh": "作业进程的 `Max processes` 软限制（ulimit -u；null 表示不限）"},
    "nproc_exempt": {"type": "boolean", "en": "The uid is root, which RLIMIT_NPROC does not stop",
                     "zh": "uid 为 root，不受 RLIMIT_NPROC 限制"},
    "cgroup": {"type": "string", "en": "The pids cgroup whose limit is tightest (null: none limits)",
               "zh": "限制最紧的 pids cgroup（没有限制时为 null）"},
    "pids_max": {"type": "integer", "en": "That cgroup's pids.max (null: max)",
                 "zh": "该 cgroup 的 pids.max（null 表示 max）"},
    "pids_current": {"type": "integer", "en": "That cgroup's pids.current",
                     "zh": "该 cgroup 的 pids.current（当前任务数）"},
    "pids_events_max": {"type": "integer",
                        "en": "Times a fork or clone was refused at a pids.max on the way up "
                              "(pids.events `max`)",
                        "zh": "沿 cgroup 层级向上，因 pids.max 被拒绝的 fork/clone 次数"
                              "（pids.events 的 `max`）"},
    "threads_max": {"type": "integer", "en": "kernel.threads-max: the most threads on the node",
                    "zh": "kernel.threads-max：节点上线程数的上限"},
    "pid_max": {"type": "integer", "en": "kernel.pid_max: the highest pid (every thread takes one)",
                "zh": "kernel.pid_max：最大的 pid（每个线程都占用一个）"},
    "tasks_total": {"type": "integer", "en": "Tasks on the node (the kernel's count in /proc/loadavg)",
                    "zh": "节点上的任务数（/proc/loadavg 中内核的计数）"},
    "limits": {"type": "array", "en": f"Every limit read: {_LIMIT}", "zh": f"读取到的每项限制：{_LIMIT}"},
    "near": {"type": "array", "en": "The names of the limits at or above near_percent",
             "zh": "已用比例达到 near_percent 的限制名"},
    "tightest": {"type": "object", "en": f"The limit with the highest share in use: {_LIMIT}",
                 "zh": f"已用比例最高的限制：{_LIMIT}"},
    "limit_hit": {"type": "boolean", "en": "A pids.max refused a task (pids_events_max > 0)",
                  "zh": "有 pids.max 拒绝过创建任务（pids_events_max > 0）"},
    "open_fds": {"type": "integer", "en": "Open file descriptors of the job's process holding the most",
                 "zh": "作业进程中打开文件描述符最多的那个进程的描述符数"},
    "open_fds_pid": {"type": "integer", "en": "That process", "zh": "该进程的 PID"},
    "nofile_limit": {"type": "integer",
                     "en": "That process's soft `Max open files` (ulimit -n; null: unlimited or unread)",
                     "zh": "该进程的 `Max open files` 软限制（ulimit -n；null 表示不限或无法读取）"},
    "nofile_hard": {"type": "integer", "en": "Its hard `Max open files` (how far ulimit -n may be raised)",
                    "zh": "其 `Max open files` 硬限制（ulimit -n 最多可调到多少）"},
}
DEFAULT_TIMEOUT = 10.0

_LIST_MAX = 100


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    _how, (selected, _unreadable, _reason), _ties = process.select(params)
    pids = sorted(selected)[:_LIST_MAX]
    first = pids[0] if pids else os.getpid()
    status = _status(first)
    uid = _uid(status)
    threads = [_threads(_status(pid)) for pid in pids]
    result: dict[str, Any] = {
        "available": status is not None, "reason": None if status else f"cannot read /proc/{first}/status",
        "job_found": bool(pids), "pids": pids, "job_threads": sum(t for t in threads if t is not None),
        "uid": uid, "user_tasks": _task_limits.user_threads(uid) if uid is not None else None,
        "nproc_limit": _nproc(first), "nproc_exempt": uid == 0,
        "threads_max": _int_file("/proc/sys/kernel/threads-max"),
        "pid_max": _int_file("/proc/sys/kernel/pid_max"), "tasks_total": _tasks_total(),
    }
    result.update(_task_limits.pids_of(first))
    limits = _limits(result)
    given = params.get("near_percent")
    near = 90.0 if given is None or given == "" else float(given)
    result["limits"] = limits
    result["near"] = [lim["name"] for lim in limits if lim["percent"] >= near]
    result["tightest"] = max(limits, key=lambda lim: lim["percent"]) if limits else None
    result["limit_hit"] = (result.get("pids_events_max") or 0) > 0
    result.update(_open_files(pids or [first]))
    return result


def _open_files(pids: list[int]) -> dict[str, Any]:
    """The process of `pids` holding the most descriptors, with its limit on open files."""
    readable = {pid: n for pid in pids if (n := _fd_count(pid)) is not None}
    if not readable:
        return {"open_fds": None, "open_fds_pid": None, "nofile_limit": None, "nofile_hard": None}
    pid = max(readable, key=lambda p: (readable[p], -p))
    soft, hard = _task_limits.parse_limits(_procfs.read_text(f"/proc/{pid}/limits") or "").get(
        "Max open files", (None, None))
    return {"open_fds": readable[pid], "open_fds_pid": pid, "nofile_limit": soft, "nofile_hard": hard}


def _fd_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:  # gone, or another user's process
        return None


def _limits(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Each limit with a value and a count, as {name, where, value, current, percent}."""
    found: list[dict[str, Any]] = []
    if r["nproc_limit"] is not None and not r["nproc_exempt"] and r["user_tasks"] is not None:
        found.append(_entry("ulimit -u (RLIMIT_NPROC)", f"uid {r['uid']}", r["nproc_limit"], r["user_tasks"]))
    if r.get("pids_max") is not None and r.get("pids_current") is not None:
        found.append(_entry("pids.max", r["cgroup"], r["pids_max"], r["pids_current"]))
    if r["threads_max"] and r["tasks_total"] is not None:
        found.append(_entry("kernel.threads-max", "node", r["threads_max"], r["tasks_total"]))
    if r["pid_max"] and r["tasks_total"] is not None:
        found.append(_entry("kernel.pid_max", "node", r["pid_max"], r["tasks_total"]))
    return found


def _entry(name: str, where: str | None, value: int, current: int) -> dict[str, Any]:
    percent = round(100.0 * current / value, 1) if value > 0 else 100.0
    return {"name": name, "where": where, "value": value, "current": current, "percent": percent}


def _status(pid: int) -> dict[str, str] | None:
    text = _procfs.read_text(f"/proc/{pid}/status")
    if text is None:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return fields


def _uid(status: dict[str, str] | None) -> int | None:
    try:
        return int((status or {})["Uid"].split()[0])  # real, effective, saved, fs: NPROC counts the real
    except (KeyError, IndexError, ValueError):
        return None


def _threads(status: dict[str, str] | None) -> int | None:
    try:
        return int((status or {})["Threads"])
    except (KeyError, ValueError):
        return None


def parse_nproc(limits_text: str) -> int | None:
    """The soft `Max processes` of /proc/PID/limits (None: unlimited or not shown)."""
    return _task_limits.parse_limits(limits_text).get("Max processes", (None, None))[0]


def _nproc(pid: int) -> int | None:
    return parse_nproc(_procfs.read_text(f"/proc/{pid}/limits") or "")


def _int_file(path: str) -> int | None:
    text = (_procfs.read_text(path) or "").strip()
    return int(text) if text.isdigit() else None


def _tasks_total() -> int | None:
    """The 4th field of /proc/loadavg, `running/total`: every task the kernel schedules."""
    parts = (_procfs.read_text("/proc/loadavg") or "").split()
    try:
        return int(parts[3].split("/")[1])
    except (IndexError, ValueError):
        return None
