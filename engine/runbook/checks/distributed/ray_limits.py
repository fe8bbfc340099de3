"""`ray_limits`: the process limits Ray's workers start under on this node.

A Ray worker is a child of the raylet and inherits its limits. When the raylet's open-files
limit is low (1024, the default soft limit of many shells and containers), starting workers
fails with `Too many open files` and workers never register (`worker_pool.cc: Some workers of
the worker process(N) have not registered within the timeout`). When the user's process limit
(`ulimit -u`, counted in threads) or the container's `pids.max` is reached, a starting worker
cannot create its threads (`thread: Resource temporarily unavailable`) and dies.

Reads `/proc/PID/limits` of the raylet (the first process named `raylet` of this user; `pid`
to name another), how many files it holds open, the threads of its user (every /proc entry of
that uid, bounded), its cgroup's `pids.max` / `pids.current`, the object store size on its
command line, and the size of /dev/shm. Without a raylet (it died, or Ray ran elsewhere) the
probe's own limits are read: those of the shell that starts the probe.
"""

from __future__ import annotations

import os
import resource
from typing import Any

from runbook.checks import _procfs, _task_limits
from runbook.checks.base import CheckContext

NAME = "ray_limits"
SUMMARY = {
    "en": "Limits Ray workers inherit from the raylet: open files, processes/threads of the user, the "
          "cgroup's pids.max, /dev/shm against the object store",
    "zh": "Ray worker 从 raylet 继承的限制：打开文件数、用户的进程/线程数、cgroup 的 pids.max、"
          "/dev/shm 与对象存储大小",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pid": {"type": ["integer", "string"], "default": "",
                "description": "Read this process's limits (\"\": the raylet of this user, else the probe)"},
    },
    "additionalProperties": False,
}
_LIMIT = "null when unlimited or unread"
RESULT_FIELDS = {
    "source": {"type": "string", "en": "Whose limits were read: raylet pid N, pid N, or this probe",
               "zh": "读取了谁的限制：raylet pid N、pid N，或探针自身"},
    "pid": {"type": "integer", "en": "That process (null: the probe)", "zh": "该进程（null 表示探针自身）"},
    "open_files_soft": {"type": "integer", "en": f"Open files, soft limit ({_LIMIT})",
                        "zh": "打开文件数软限制（不限或未读到时为 null）"},
    "open_files_hard": {"type": "integer", "en": f"Open files, hard limit ({_LIMIT})",
                        "zh": "打开文件数硬限制（不限或未读到时为 null）"},
    "open_files_used": {"type": "integer", "en": "Files that process holds open (null: unreadable)",
                        "zh": "该进程当前打开的文件数（无法读取时为 null）"},
    "processes_soft": {"type": "integer", "en": f"Processes/threads of the user, soft limit ({_LIMIT})",
                       "zh": "用户进程/线程数软限制（不限或未读到时为 null）"},
    "user_threads": {"type": "integer", "en": "Threads the process's user runs now on this node",
                     "zh": "该进程所属用户当前在本节点运行的线程数"},
    "pids_max": {"type": "integer", "en": f"The cgroup's pids.max ({_LIMIT})",
                 "zh": "cgroup 的 pids.max（不限或未读到时为 null）"},
    "pids_current": {"type": "integer", "en": "The cgroup's pids.current (null: unread)",
                     "zh": "cgroup 的 pids.current（未读到时为 null）"},
    "shm_bytes": {"type": "integer", "en": "Size of /dev/shm in bytes (null: none)",
                  "zh": "/dev/shm 的大小（字节；没有时为 null）"},
    "shm_free_bytes": {"type": "integer", "en": "Free bytes in /dev/shm", "zh": "/dev/shm 的剩余字节数"},
    "object_store_bytes": {"type": "integer",
                           "en": "The raylet's --object_store_memory (null: not on its command line)",
                           "zh": "raylet 的 --object_store_memory（命令行中没有时为 null）"},
}
DEFAULT_TIMEOUT = 10.0



def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    given = str(params.get("pid") or "").strip()
    pid, source = _target(int(given) if given.isdigit() else None)
    limits = (_task_limits.parse_limits(_procfs.read_text(f"/proc/{pid}/limits") or "") if pid
              else own_limits())
    result: dict[str, Any] = {
        "source": source, "pid": pid,
        "open_files_soft": limits.get("Max open files", (None, None))[0],
        "open_files_hard": limits.get("Max open files", (None, None))[1],
        "open_files_used": _open_files(pid or os.getpid()),
        "processes_soft": limits.get("Max processes", (None, None))[0],
        "user_threads": _task_limits.user_threads(_uid(pid), ctx.deadline - 1),
        "object_store_bytes": _object_store(pid),
    }
    cgroup = _task_limits.pids_of(pid or os.getpid())
    result.update(pids_max=cgroup["pids_max"], pids_current=cgroup["pids_current"])
    result.update(_shm())
    return result


def own_limits() -> dict[str, tuple[int | None, int | None]]:
    found = {}
    for name, which in (("Max open files", resource.RLIMIT_NOFILE), ("Max processes", resource.RLIMIT_NPROC)):
        soft, hard = resource.getrlimit(which)
        found[name] = tuple(None if v == resource.RLIM_INFINITY else int(v) for v in (soft, hard))
    return found  # type: ignore[return-value]


def _target(given: int | None) -> tuple[int | None, str]:
    """Whose limits to read: the raylet `given` started (`ray.init()` in a driver starts it as
    a child), else `given` itself; without `given`, the first raylet of this user."""
    if given is None:
        pid = find_raylet()
        return pid, (f"raylet pid {pid}" if pid else "this probe")
    if _is_raylet(given):
        return given, f"raylet pid {given}"
    child = find_raylet(parent=given)
    return (child, f"raylet pid {child} (started by pid {given})") if child else (given, f"pid {given}")


def find_raylet(parent: int | None = None) -> int | None:
    """The first process named `raylet` of this user (a child of `parent` when given)."""
    for pid in _procfs.pids():
        if _is_raylet(pid) and os.access(f"/proc/{pid}/limits", os.R_OK) and _uid(pid) == os.getuid() \
                and (parent is None or _ppid(pid) == parent):
            return pid
    return None


def _ppid(pid: int) -> int | None:
    try:
        return int(_procfs.stat(pid)["ppid"])
    except (OSError, ValueError, IndexError):
        return None  # gone meanwhile


def _is_raylet(pid: int) -> bool:
    return (_procfs.read_text(f"/proc/{pid}/comm") or "").strip() == "raylet"


def _number(word: str) -> int | None:
    return int(word) if word.isdigit() else None


def _uid(pid: int | None) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid if pid else os.getuid()
    except OSError:
        return os.getuid()


def _open_files(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def _object_store(pid: int | None) -> int | None:
    for arg in _procfs.cmdline(pid) if pid else []:
        if arg.startswith("--object_store_memory="):
            return _number(arg.split("=", 1)[1])
    return None


def _shm() -> dict[str, int | None]:
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return {"shm_bytes": None, "shm_free_bytes": None}
    return {"shm_bytes": st.f_blocks * st.f_frsize, "shm_free_bytes": st.f_bavail * st.f_frsize}
