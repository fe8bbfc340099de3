"""/proc helpers the fake clusters share (scenarios/cluster.py, scenarios/slurm.py): standard
library only."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True while /proc/PID exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def children(pid: int) -> list[int]:
    """The direct children of PID, from every one of its threads."""
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as fh:
                kids.extend(int(x) for x in fh.read().split())
    return kids


def tail(path: Path, n: int = 2000) -> str:
    """The last `n` characters of a log file, or "" when it cannot be read."""
    try:
        return path.read_text(errors="replace")[-n:].strip()
    except OSError:
        return ""
