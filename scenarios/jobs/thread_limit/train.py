#!/usr/bin/env python3
"""Scenario `thread_limit`: a data job runs out of tasks under a real limit and cannot start a thread.

Standard library only, one machine. The job first puts itself under a real limit on tasks, the
way a container, a Slurm job or a shared login node does (the launcher's pid is kept):

- as root, with a writable pids cgroup (v2, or the v1 pids controller): a cgroup of its own,
  `.../runbook-scenarios/thread_limit-PID`, with `pids.max` LIMIT, and itself moved into it;
- as root without one: RLIMIT_NPROC of LIMIT more tasks than the user `nobody` runs, then it
  becomes `nobody` (root is exempt from RLIMIT_NPROC), as `setpriv --reuid nobody` with
  `prlimit --nproc` does;
- as any other user: RLIMIT_NPROC of LIMIT more tasks than the user runs now.

It logs which limit it set, then its shard prefetcher starts one reader thread per shard (256
shards). Thread number LIMIT or so fails: CPython raises `RuntimeError: can't start new thread`
(pthread_create answered EAGAIN), the traceback goes to the log and the main thread ends; the
interpreter then waits for its reader threads, which wait forever: the process stays, holding
every thread it has, as a job that lost its main loop does.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import say  # noqa: E402

SHARDS = 256
NOBODY = 65534


def _tasks_of(uid: int) -> int:
    """Threads of every process of `uid` (what RLIMIT_NPROC counts)."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            total += int(fields.get("Threads", "0"))
    return total


def _pids_cgroup_root() -> str | None:
    """Where a pids cgroup of our own can be made: v2 with the pids controller, or v1's pids."""
    v2 = "/sys/fs/cgroup"
    try:
        with open(os.path.join(v2, "cgroup.controllers")) as fh:
            if "pids" in fh.read().split():
                return v2
    except OSError:
        pass
    v1 = "/sys/fs/cgroup/pids"
    return v1 if os.path.isfile(os.path.join(v1, "cgroup.procs")) else None


def _into_cgroup(root: str, limit: int) -> str | None:
    """A cgroup under `root` with pids.max = limit, this process in it; None when not allowed."""
    parent = os.path.join(root, "runbook-scenarios")
    folder = os.path.join(parent, f"thread_limit-{os.getpid()}")
    try:
        os.makedirs(parent, exist_ok=True)
        if root == "/sys/fs/cgroup":  # v2: the parent must hand the pids controller down
            with open(os.path.join(parent, "cgroup.subtree_control"), "w") as fh:
                fh.write("+pids")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "pids.max"), "w") as fh:
            fh.write(str(limit))
        with open(os.path.join(folder, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
    except OSError:
        return None
    return folder


def put_under_limit(limit: int, via: str) -> str:
    """Set a real limit of about `limit` new tasks on this process (`via`: auto, cgroup or nproc);
    what was set, for the log."""
    if via == "cgroup" and os.geteuid() != 0:
        raise SystemExit("--via cgroup needs root")
    if os.geteuid() == 0:
        root = _pids_cgroup_root() if via != "nproc" else None
        folder = _into_cgroup(root, limit) if root else None
        if folder:
            return f"pids.max {limit} in cgroup {folder}"
        if via == "cgroup":
            raise SystemExit("no writable pids cgroup (v2 with pids, or v1's pids controller)")
        allowed = _tasks_of(NOBODY) + limit
        resource.setrlimit(resource.RLIMIT_NPROC, (allowed, allowed))
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        return f"ulimit -u {allowed} as uid {NOBODY}"
    allowed = _tasks_of(os.getuid()) + limit
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    if hard != resource.RLIM_INFINITY:
        allowed = min(allowed, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (allowed, hard))
    return f"ulimit -u {allowed} as uid {os.getuid()}"


def prefetch(stop: threading.Event) -> None:
    """The prefetcher: a reader thread per shard, each waiting for its turn (forever here)."""
    readers = []
    for shard in range(SHARDS):
        reader = threading.Thread(target=stop.wait, name=f"shard-{shard:03d}")
        reader.start()  # fails at the limit (pthread_create: EAGAIN)
        readers.append(reader)
        if shard % 16 == 15:
            say(f"[rank 0] prefetcher: {shard + 1}/{SHARDS} shard readers started")
    say(f"[rank 0] prefetcher: all {SHARDS} shard readers started")  # not reached under the limit


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="accepted for uniformity")
    ap.add_argument("--limit", type=int, default=64, help="new tasks the job may create")
    ap.add_argument("--via", choices=("auto", "cgroup", "nproc"), default="auto",
                    help="the limit: a pids cgroup (root), RLIMIT_NPROC, or the first that works")
    args = ap.parse_args(argv)
    what = put_under_limit(args.limit, args.via)
    say(f"[rank 0] pid {os.getpid()}: tokenised dataset, {SHARDS} shards; task limit: {what}")
    prefetch(threading.Event())
    return 0


if __name__ == "__main__":
    sys.exit(main())
