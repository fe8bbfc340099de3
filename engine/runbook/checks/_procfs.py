"""Reading /proc directly (no psutil): helpers the node-side checks share.

Standard library only, Python >= 3.8, like every check module. Functions that
read one process raise OSError (FileNotFoundError when the process is gone,
PermissionError when it belongs to someone else); callers decide what that means.
"""

from __future__ import annotations

import os
from typing import Any

PROC = "/proc"

# Environment variables that launchers (torchrun, deepspeed, mpirun via torch) set on each rank.
RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


def read_bytes(path: str, limit: int = -1) -> bytes:
    with open(path, "rb") as f:
        return f.read(limit)


def read_text(path: str) -> str | None:
    """A small text file's content, or None when it cannot be read."""
    try:
        return read_bytes(path).decode("utf-8", "replace")
    except OSError:
        return None


def pids() -> list[int]:
    """Process ids (thread-group leaders) listed in /proc, ascending."""
    try:
        names = os.listdir(PROC)
    except OSError:
        return []
    return sorted(int(name) for name in names if name.isdigit())


def parse_stat(text: str) -> dict[str, Any]:
    """The fields of /proc/PID/stat that checks use (see proc(5))."""
    # comm is in parentheses and may itself hold spaces or parentheses: cut at the last ')'.
    head, _, tail = text.rpartition(")")
    pid_text, _, comm = head.partition(" (")
    rest = tail.split()
    # rest[0] is field 3 (state), so field n of proc(5) is rest[n - 3].
    return {
        "pid": int(pid_text),
        "comm": comm,
        "state": rest[0],
        "ppid": int(rest[1]),
        "pgrp": int(rest[2]),
        "session": int(rest[3]),
        "utime": int(rest[11]),
        "stime": int(rest[12]),
        "threads": int(rest[17]),
        "starttime": int(rest[19]),
        "rss_pages": int(rest[21]),
    }


def stat(pid: int) -> dict[str, Any]:
    return parse_stat(read_bytes(f"{PROC}/{pid}/stat").decode("utf-8", "replace"))


def cmdline(pid: int) -> list[str]:
    """argv of a process; [] for zombies and kernel threads."""
    data = read_bytes(f"{PROC}/{pid}/cmdline")
    if not data:
        return []
    return [part.decode("utf-8", "replace") for part in data.rstrip(b"\0").split(b"\0")]


def parse_environ(data: bytes) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name:
            env[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def environ(pid: int) -> dict[str, str]:
    """The environment a process started with (needs the same user or root)."""
    return parse_environ(read_bytes(f"{PROC}/{pid}/environ"))


def exe(pid: int) -> str | None:
    """Path of the process's executable, or None when unreadable."""
    try:
        return os.readlink(f"{PROC}/{pid}/exe")
    except OSError:
        return None


def maps_contain(pid: int, needle: bytes) -> bool:
    """Whether /proc/PID/maps names a mapping containing `needle` (e.g. b"libtorch")."""
    with open(f"{PROC}/{pid}/maps", "rb") as f:
        return any(needle in line for line in f)


def uptime() -> float:
    text = read_text(f"{PROC}/uptime") or "0"
    return float(text.split()[0])


def clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError):
        return 100


def page_size() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError):
        return 4096


def ancestors(pid: int) -> set[int]:
    """`pid` and every process above it (walking ppid up to init)."""
    seen: set[int] = set()
    current = pid
    while current > 0 and current not in seen:
        seen.add(current)
        try:
            current = stat(current)["ppid"]
        except (OSError, ValueError, IndexError):
            break
    return seen


def fd_targets(pid: int) -> list[str]:
    """The fd paths of a process (`/proc/PID/fd/N`); raises OSError when fd/ is unreadable."""
    fd_dir = f"{PROC}/{pid}/fd"
    return [f"{fd_dir}/{fd}" for fd in os.listdir(fd_dir)]


def holds_file(pid: int, dev: int, ino: int) -> bool:
    """Whether a process has the file (device, inode) open: a log it writes, redirected or not.
    os.stat follows each fd's magic link, so a file seen through another mount still matches."""
    for path in fd_targets(pid):
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_ino == ino and st.st_dev == dev:
            return True
    return False


def cwd(pid: int) -> str | None:
    try:
        return os.readlink(f"{PROC}/{pid}/cwd")
    except OSError:
        return None


def socket_inodes_of(pid: int) -> set[int]:
    """Inodes of the sockets a process holds open (raises OSError when fd/ is unreadable)."""
    inodes: set[int] = set()
    fd_dir = f"{PROC}/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def meminfo() -> dict[str, int]:
    """/proc/meminfo as name -> kB."""
    values: dict[str, int] = {}
    for line in (read_text(f"{PROC}/meminfo") or "").splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[name.strip()] = int(parts[0])
    return values
