"""Small helpers the scenario jobs share (standard library only, Python >= 3.8).

A scenario's train.py runs as a script (`python3 scenarios/jobs/NAME/train.py`), so it imports
this module by putting `scenarios/jobs/` on sys.path first.
"""

import ctypes
import os
import socket
import sys


def die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies (best effort; group kill is the main path)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def say(text: str) -> None:
    """One line in one write(): ranks share the log, and print() writes the newline apart."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def set_comm(name: str) -> None:
    """Name the process (what ps and /proc/PID/comm show), as real workers do."""
    try:
        with open("/proc/self/comm", "w") as fh:
            fh.write(name[:15])
    except OSError:
        pass


def exec_self(script: str, env: dict, *args: str) -> None:
    """Replace this process by `script ARGS` with `env`, as a launcher script's
    `export VAR=...; exec python train.py` does: the job keeps the pid the launcher was given."""
    os.execve(sys.executable, [sys.executable, os.path.abspath(script), *args], env)
