"""`system`: the node at a glance: OS, CPUs, load, memory, swap, disk and /dev/shm space."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import sys
from typing import Any

from runbook.checks import _procfs
from runbook.checks.base import CheckContext

NAME = "system"
SUMMARY = {
    "en": "Node basics: hostname, kernel, OS, Python, CPUs, load, memory, swap, disk, /dev/shm",
    "zh": "节点基本信息：主机名、内核、操作系统、Python、CPU、负载、内存、交换区、磁盘、/dev/shm",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "paths": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["/", "/tmp"],
            "description": "Paths whose file system free space is reported",
        },
    },
    "additionalProperties": False,
}
RESULT_FIELDS = {
    "hostname": {"type": "string", "en": "Host name", "zh": "主机名"},
    "kernel": {"type": "string", "en": "Kernel release (uname -r)", "zh": "内核版本（uname -r）"},
    "os": {"type": "string", "en": "PRETTY_NAME from /etc/os-release (null if absent)",
           "zh": "/etc/os-release 中的 PRETTY_NAME（不存在时为 null）"},
    "python": {"type": "object", "en": "The probe's Python: {version, executable}",
               "zh": "运行探针的 Python：{version, executable}"},
    "cpu_count": {"type": "integer", "en": "Logical CPUs", "zh": "逻辑 CPU 数"},
    "load_avg": {"type": "array", "en": "Load average over 1, 5 and 15 minutes",
                 "zh": "1、5、15 分钟平均负载"},
    "mem_total_mib": {"type": "integer", "en": "Total memory (MiB)", "zh": "内存总量（MiB）"},
    "mem_available_mib": {"type": "integer", "en": "Memory available for new work (MiB)",
                          "zh": "可用内存（MiB）"},
    "swap_used_mib": {"type": "integer", "en": "Swap in use (MiB)", "zh": "已使用的交换区（MiB）"},
    "uptime_s": {"type": "number", "en": "Seconds since boot", "zh": "开机以来的秒数"},
    "disk": {"type": "object",
             "en": "path -> {total_gib, free_gib, used_percent} (null when the path is missing)",
             "zh": "路径 -> {total_gib, free_gib, used_percent}（路径不存在时为 null）"},
    "shm": {"type": "object", "en": "/dev/shm size: {total_mib, free_mib} (null if absent)",
            "zh": "/dev/shm 空间：{total_mib, free_mib}（不存在时为 null）"},
}
DEFAULT_TIMEOUT = 5.0

_GIB = 1024 ** 3
_MIB = 1024 ** 2


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    paths = params.get("paths") or ["/", "/tmp"]
    mem = _procfs.meminfo()
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "os": os_pretty_name(),
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "cpu_count": os.cpu_count(),
        "load_avg": _load_avg(),
        "mem_total_mib": _kib_to_mib(mem.get("MemTotal")),
        "mem_available_mib": _kib_to_mib(mem.get("MemAvailable")),
        "swap_used_mib": _kib_to_mib(_difference(mem.get("SwapTotal"), mem.get("SwapFree"))),
        "uptime_s": round(_procfs.uptime(), 1),
        "disk": {str(path): _disk(str(path)) for path in paths},
        "shm": _shm(),
    }


def os_pretty_name(path: str = "/etc/os-release") -> str | None:
    for line in (_procfs.read_text(path) or "").splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "PRETTY_NAME":
            return value.strip().strip("\"'") or None
    return None


def _load_avg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _kib_to_mib(kib: int | None) -> int | None:
    return None if kib is None else kib // 1024


def _difference(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a - b


def _disk(path: str) -> dict[str, float] | None:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    # Like df: used / (used + available to users); root's reserved blocks count as neither.
    usable = usage.used + usage.free
    return {
        "total_gib": round(usage.total / _GIB, 2),
        "free_gib": round(usage.free / _GIB, 2),
        "used_percent": round(usage.used / usable * 100, 1) if usable else 0.0,
    }


def _shm() -> dict[str, int] | None:
    if not os.path.isdir("/dev/shm"):
        return None
    try:
        usage = shutil.disk_usage("/dev/shm")
    except OSError:
        return None
    return {"total_mib": usage.total // _MIB, "free_mib": usage.free // _MIB}
