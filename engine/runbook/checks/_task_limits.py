"""Limits on how many tasks and files a process may have, read from /proc and the cgroup tree.

Shared by the `limits` check (host/) and the `ray_limits` check (distributed/): RLIMIT_* as
/proc/PID/limits shows them, the threads a user runs (what RLIMIT_NPROC counts), and the tightest
`pids.max` on the way up from a process's cgroup. Standard library only.
"""

from __future__ import annotations

import os
import time
from typing import Any

from runbook.checks import _procfs

CGROUP_ROOT = "/sys/fs/cgroup"
MAX_PROCS = 200_000  # /proc entries read at most when counting a user's threads


def parse_limits(text: str) -> dict[str, tuple[int | None, int | None]]:
    """`/proc/PID/limits` as {name: (soft, hard)}, None for `unlimited`."""
    found: dict[str, tuple[int | None, int | None]] = {}
    for line in text.splitlines()[1:]:
        words = line[26:].split()  # the name column is 26 characters wide
        if len(words) >= 2 and line[:26].strip():
            found[line[:26].strip()] = (_number(words[0]), _number(words[1]))
    return found


def user_threads(uid: int, deadline: float | None = None) -> int:
    """Threads of every process whose real uid is `uid` (what the kernel checks RLIMIT_NPROC
    against), bounded in count and, given a deadline, in time."""
    total = 0
    for count, pid in enumerate(_procfs.pids()):
        if count >= MAX_PROCS or (deadline is not None and time.monotonic() > deadline):
            break
        status = _procfs.read_text(f"/proc/{pid}/status") or ""
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            total += _number(fields.get("Threads", "").strip()) or 0
    return total


def _number(word: str) -> int | None:
    return int(word) if word.isdigit() else None


def _int_file(path: str) -> int | None:
    return _number((_procfs.read_text(path) or "").strip())


def pids_cgroup_dirs(cgroup_text: str, root: str = CGROUP_ROOT) -> list[str]:
    """The pids cgroup directories of a process, its own first, then each one above it up to the
    root: cgroup v2 (`0::/path`) and, where the v1 pids controller is mounted, `N:pids:/path`."""
    found: list[str] = []
    for line in cgroup_text.splitlines():
        hier, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hier == "0" and controllers == "":
            unified = os.path.exists(os.path.join(root, "cgroup.controllers"))
            base = root if unified else os.path.join(root, "unified")  # hybrid: v2 beside v1
        elif "pids" in controllers.split(","):
            base = os.path.join(root, "pids")
        else:
            continue
        parts = [p for p in path.strip().split("/") if p]
        for depth in range(len(parts), -1, -1):
            found.append(os.path.join(base, *parts[:depth]))
    return found


def pids_of(pid: int) -> dict[str, Any]:
    """pids_limit of a running process."""
    return pids_limit(_procfs.read_text(f"/proc/{pid}/cgroup") or "")


def pids_limit(cgroup_text: str, root: str = CGROUP_ROOT) -> dict[str, Any]:
    """The tightest pids.max on the way up from a process's cgroup (its /proc/PID/cgroup text), and
    the refusals seen (pids.events `max`, the most of any level)."""
    best: dict[str, Any] = {"cgroup": None, "pids_max": None, "pids_current": None}
    best_share = -1.0
    events = 0
    for folder in pids_cgroup_dirs(cgroup_text, root):
        events = max(events, _events_max(folder))
        limit = (_procfs.read_text(os.path.join(folder, "pids.max")) or "").strip()
        current = _int_file(os.path.join(folder, "pids.current"))
        if not limit.isdigit() or current is None:
            continue  # "max" or no pids controller here
        share = current / max(int(limit), 1)
        if share > best_share:
            best_share = share
            best = {"cgroup": folder, "pids_max": int(limit), "pids_current": current}
    return {**best, "pids_events_max": events}


def _events_max(folder: str) -> int:
    for line in (_procfs.read_text(os.path.join(folder, "pids.events")) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "max" and value.strip().isdigit():
            return int(value.strip())
    return 0
