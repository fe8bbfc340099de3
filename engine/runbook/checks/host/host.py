"""`host`: faults of the node outside the GPU: reboots, load, memory, OOM kills, full disks, D state.

Everything comes from /proc, statvfs and the kernel log (dmesg, else journalctl -k); a log
this user may not read is reported as such (oom_readable: false), never raised.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from typing import Any

from runbook.checks import _kernel_log, _procfs
from runbook.checks.base import CheckContext
from runbook.checks.log import log_files

NAME = "host"
SUMMARY = {
    "en": "Host health outside the GPU: uptime and reboots, load, memory and swap, kernel OOM kills, "
          "disk space, processes stuck in D state",
    "zh": "GPU 之外的主机健康：运行时长与重启、负载、内存与交换区、内核 OOM 杀进程、磁盘空间、D 状态进程",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "paths": {"type": "array", "items": {"type": "string"}, "default": ["/", "/tmp"],
                  "description": "Paths the job writes (checkpoints, logs, caches): free space of each"},
        "oom_window_s": {"type": "number", "exclusiveMinimum": 0, "default": 86400,
                         "description": "Report OOM kills of the last this many seconds"},
        "log": {"type": "string", "description": "The job's log (glob allowed: the newest match): whether "
                                                 "it was written since the node booted"},
    },
    "additionalProperties": False,
}
_OOM_FIELDS = "time, process, pid, constraint, message"
_D_FIELDS = "pid, comm, cmdline, wchan, threads_d"
RESULT_FIELDS = {
    "uptime_s": {"type": "number", "en": "Seconds since boot", "zh": "开机以来的秒数"},
    "boot_time": {"type": "string", "en": "When the node booted (ISO 8601, local time)",
                  "zh": "节点的开机时间（ISO 8601，本地时间）"},
    "recent_reboot": {"type": "boolean", "en": "The node booted less than an hour ago",
                      "zh": "节点在一小时内重启过"},
    "log_since_boot": {"type": "boolean",
                       "en": "The job's log (`log`) was written after the node booted: the job ran since, so "
                             "the boot did not end it; null without a log",
                       "zh": "作业日志（`log`）在节点启动之后写过：作业在此后运行过，启动并没有终止它；"
                             "没有日志时为 null"},
    "load_avg": {"type": "array", "en": "Load average over 1, 5 and 15 minutes",
                 "zh": "1、5、15 分钟平均负载"},
    "cpu_count": {"type": "integer", "en": "Logical CPUs", "zh": "逻辑 CPU 数"},
    "load_per_core": {"type": "number", "en": "1-minute load divided by the CPU count",
                      "zh": "1 分钟负载除以 CPU 数"},
    "mem": {"type": "object", "en": "Memory: {total_mib, available_mib, used_percent}",
            "zh": "内存：{total_mib, available_mib, used_percent}"},
    "swap_used_mib": {"type": "integer", "en": "Swap in use (MiB)", "zh": "已使用的交换区（MiB）"},
    "oom_kills": {"type": "array",
                  "en": f"Kernel OOM kills within oom_window_s, oldest first (at most 50): "
                        f"{{{_OOM_FIELDS}}}; constraint CONSTRAINT_MEMCG means a cgroup (container) limit",
                  "zh": f"oom_window_s 内的内核 OOM 杀进程事件，按时间先后（最多 50 个）：{{{_OOM_FIELDS}}}；"
                        "constraint 为 CONSTRAINT_MEMCG 表示触发的是 cgroup（容器）内存上限"},
    "oom_count": {"type": "integer", "en": "OOM kills within oom_window_s",
                  "zh": "oom_window_s 内的 OOM 杀进程次数"},
    "oom_readable": {"type": "boolean", "en": "The kernel log could be read (dmesg or journalctl -k)",
                     "zh": "能读取内核日志（dmesg 或 journalctl -k）"},
    "oom_reason": {"type": "string", "en": "Why the kernel log could not be read (null when read)",
                   "zh": "无法读取内核日志的原因（读取成功时为 null）"},
    "disks": {"type": "object",
              "en": "path -> {total_gib, free_gib, used_percent, full (used >= 95%)}; null when the "
                    "path is missing",
              "zh": "路径 -> {total_gib, free_gib, used_percent, full（已用 >= 95%）}；路径不存在时为 null"},
    "disks_full": {"type": "array", "en": "Paths whose file system is full (>= 95% used)",
                   "zh": "所在文件系统已满（已用 >= 95%）的路径"},
    "d_state": {"type": "array",
                "en": f"Processes with a thread in D state (stuck in the kernel: I/O, driver), at most "
                      f"50: {{{_D_FIELDS}}}",
                "zh": f"有线程处于 D 状态（卡在内核中：I/O 或驱动）的进程，最多 50 个：{{{_D_FIELDS}}}"},
    "d_state_count": {"type": "integer", "en": "Processes with a thread in D state",
                      "zh": "有线程处于 D 状态的进程数"},
}
DEFAULT_TIMEOUT = 8.0

_MIB = 1024 ** 2
_GIB = 1024 ** 3
_RECENT_BOOT_S = 3600
_FULL_PERCENT = 95.0
_LIST_MAX = 50
_CMDLINE_MAX = 300
_MESSAGE_MAX = 160
_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\)")
_OOM_KILL = re.compile(r"oom-kill:.*?constraint=(\w+).*?,task=([^,]*),pid=(\d+)")


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    uptime = _procfs.uptime()
    mem = _procfs.meminfo()
    load = _load_avg()
    cpus = os.cpu_count() or 1
    disks = {str(path): _disk(str(path)) for path in params.get("paths") or ["/", "/tmp"]}
    d_state = d_state_processes(ctx)
    result: dict[str, Any] = {
        "uptime_s": round(uptime, 1),
        "boot_time": _kernel_log.iso(time.time() - uptime),
        "recent_reboot": uptime < _RECENT_BOOT_S,
        "log_since_boot": _written_since(params.get("log"), uptime),
        "load_avg": load,
        "cpu_count": cpus,
        "load_per_core": round(load[0] / cpus, 2) if load else None,
        "mem": _mem(mem),
        "swap_used_mib": _swap_used(mem),
        "disks": disks,
        "disks_full": [path for path, disk in disks.items() if disk and disk["full"]],
        "d_state": d_state[:_LIST_MAX],
        "d_state_count": len(d_state),
    }
    result.update(_oom(ctx, float(params.get("oom_window_s") or 86400)))
    return result


def _written_since(log: str | None, uptime: float) -> bool | None:
    """Whether the newest file `log` names was modified after the boot (None: no such file)."""
    files = log_files.matching_files(log) if log else []
    return files[0]["age_s"] < uptime if files else None


def _load_avg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _mem(mem: dict[str, int]) -> dict[str, Any]:
    total, available = mem.get("MemTotal"), mem.get("MemAvailable")
    used = round((total - available) / total * 100, 1) if total and available is not None else None
    return {"total_mib": None if total is None else total // 1024,
            "available_mib": None if available is None else available // 1024,
            "used_percent": used}


def _swap_used(mem: dict[str, int]) -> int | None:
    if mem.get("SwapTotal") is None or mem.get("SwapFree") is None:
        return None
    return (mem["SwapTotal"] - mem["SwapFree"]) // 1024


def _disk(path: str) -> dict[str, Any] | None:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    # Like df: used / (used + available to users); root's reserved blocks count as neither.
    usable = usage.used + usage.free
    percent = round(usage.used / usable * 100, 1) if usable else 0.0
    return {"total_gib": round(usage.total / _GIB, 2), "free_gib": round(usage.free / _GIB, 2),
            "used_percent": percent, "full": percent >= _FULL_PERCENT}


# -- OOM kills ------------------------------------------------------------------------------------


def _oom(ctx: CheckContext, window_s: float) -> dict[str, Any]:
    log = _kernel_log.read_kernel_log(ctx, min(2.0, ctx.remaining() / 3))
    if not log.readable:
        return {"oom_kills": [], "oom_count": 0, "oom_readable": False,
                "oom_reason": f"kernel log not readable: {log.reason}"}
    since = time.time() - window_s
    kills = [k for k in parse_oom(log.lines) if k["_epoch"] is None or k["_epoch"] >= since]
    for kill in kills:
        del kill["_epoch"]
    return {"oom_kills": kills[-_LIST_MAX:], "oom_count": len(kills), "oom_readable": True,
            "oom_reason": None}


def parse_oom(lines: list[str], booted: float | None = None) -> list[dict[str, Any]]:
    """One event per process the OOM killer killed, oldest first, with `_epoch` for filtering.

    A kill logs `oom-kill:constraint=...,task=NAME,pid=N` (kernels >= 4.19) and
    `[Memory cgroup ]Out of memory: Killed process N (NAME) ...`; both make one event.
    """
    kills: list[dict[str, Any]] = []
    by_pid: dict[int, dict[str, Any]] = {}
    for line in lines:
        if "illed process" not in line and "oom-kill:" not in line:
            continue
        epoch, text = _kernel_log.split_line(line, booted)
        killed, summary = _KILLED.search(text), _OOM_KILL.search(text)
        if killed:
            pid, name, constraint = int(killed.group(1)), killed.group(2), None
        elif summary:
            pid, name, constraint = int(summary.group(3)), summary.group(2), summary.group(1)
        else:
            continue
        event = by_pid.get(pid)
        if event is None or (epoch and event["_epoch"] and epoch - event["_epoch"] > 60):
            event = {"time": _kernel_log.iso(epoch), "process": None, "pid": pid, "constraint": None,
                     "message": None, "_epoch": epoch}
            by_pid[pid] = event  # a pid seen again minutes later is another process
            kills.append(event)
        if killed:  # the kill itself: its line is the message
            event["process"], event["message"] = name, text.strip()[:_MESSAGE_MAX]
        else:
            event["constraint"] = constraint
            event["process"] = event["process"] or name
            event["message"] = event["message"] or text.strip()[:_MESSAGE_MAX]
    return kills


# -- D state --------------------------------------------------------------------------------------


def d_state_processes(ctx: CheckContext, proc: str | None = None) -> list[dict[str, Any]]:
    """Processes with at least one thread in D (uninterruptible) state, from /proc."""
    root = proc or _procfs.PROC
    found = []
    for pid in _pids(root):
        if time.monotonic() > ctx.deadline - 1.0:
            break  # a huge process table: report what was found
        stuck = _d_threads(root, pid)
        if stuck:
            found.append(_describe(root, pid, stuck))
    return found


def _pids(root: str) -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir(root) if name.isdigit())
    except OSError:
        return []


def _d_threads(root: str, pid: int) -> list[int]:
    """Ids of the process's threads in D state (just the process when tasks are unreadable)."""
    try:
        tids = [int(t) for t in os.listdir(f"{root}/{pid}/task") if t.isdigit()]
        paths = {tid: f"{root}/{pid}/task/{tid}/stat" for tid in tids}
    except OSError:
        paths = {pid: f"{root}/{pid}/stat"}
    return [tid for tid, path in sorted(paths.items())
            if _state(_procfs.read_text(path) or "") == "D"]


def _state(stat_text: str) -> str | None:
    rest = stat_text.rpartition(")")[2].split()
    return rest[0] if rest else None


def _describe(root: str, pid: int, stuck: list[int]) -> dict[str, Any]:
    comm = (_procfs.read_text(f"{root}/{pid}/comm") or "").strip() or None
    raw = _procfs.read_text(f"{root}/{pid}/cmdline") or ""
    wchan = (_procfs.read_text(f"{root}/{pid}/task/{stuck[0]}/wchan")
             or _procfs.read_text(f"{root}/{pid}/wchan") or "").strip()
    return {"pid": pid, "comm": comm, "cmdline": raw.replace("\0", " ").strip()[:_CMDLINE_MAX],
            "wchan": None if wchan in ("", "0") else wchan, "threads_d": len(stuck)}
