"""What /proc says about the processes of a test cluster: standard library only, Linux."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (index 0 is the state)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].decode(errors="replace").split()


def pid_alive(pid: int) -> bool:
    """True while /proc/PID exists and is not a zombie."""
    fields = _stat_fields(pid) if pid > 0 else None
    return fields is not None and fields[:1] not in (["Z"], ["X"])


def start_ticks(pid: int) -> int | None:
    """When PID started (clock ticks since boot): with the pid, names one process for good."""
    fields = _stat_fields(pid) if pid > 0 else None
    return int(fields[19]) if fields and len(fields) > 19 else None


def children(pid: int) -> list[int]:
    """The direct children of PID, from every one of its threads."""
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as fh:
                kids.extend(int(x) for x in fh.read().split())
    return kids


def descendants(pid: int) -> list[int]:
    """The children of PID, theirs, and so on (a snapshot: each is read once)."""
    found: list[int] = []
    todo = children(pid)
    while todo:
        kid = todo.pop()
        found.append(kid)
        todo.extend(children(kid))
    return found


def cmdline(pid: int) -> str:
    """The command line of PID, its arguments joined by spaces ("" once it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def pid_namespace(pid: int) -> str | None:
    """The PID namespace PID lives in (`pid:[4026532…]`), or None once it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def namespace_pids(init_pid: int) -> list[int]:
    """Every live process in the PID namespace of `init_pid` (a namespace's pid 1), sorted."""
    target = pid_namespace(init_pid) if init_pid > 0 else None
    if target is None:
        return []
    return sorted(int(entry) for entry in os.listdir("/proc")
                  if entry.isdigit() and pid_namespace(int(entry)) == target and pid_alive(int(entry)))


def tail(path: Path, n: int = 2000) -> str:
    """The last `n` characters of a log file, or "" when it cannot be read."""
    try:
        return path.read_text(errors="replace")[-n:].strip()
    except OSError:
        return ""
