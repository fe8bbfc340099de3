#!/usr/bin/env python3
"""Scenario `master_port_taken` (seed 002): a DDP launch fails because MASTER_PORT is already taken.

A real torch.distributed launch on CPU (gloo backend; needs `torch`). Started as one process,
the job first leaves a process of a "previous run" behind: the rendezvous store host of an
earlier launch of the same job (like a torchrun agent whose workers are gone but which never
exited) that created a real `torch.distributed.TCPStore` server on MASTER_ADDR:MASTER_PORT and
now only waits. Its output goes to `previous_run.log` (an earlier run wrote its own log), not
to the job's log.

Then the new run starts, the way a torchrun-like launcher does it: two ranks as child processes
of the same interpreter with RANK / LOCAL_RANK / WORLD_SIZE=2 / MASTER_ADDR / MASTER_PORT in
their environment. Rank 0 calls `dist.init_process_group("gloo", ...)`, whose env:// rendezvous
creates the TCPStore *server* on MASTER_PORT, and fails at once with torch's own error (torch
2.x: `DistNetworkError: The server socket has failed to listen on any local network address.
port: P, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use`; older
versions: `The server socket has failed to bind to [::]:P (errno: 98 - Address already in
use)`). Rank 1 (a store client) waits for rank 0; the launcher sees rank 0 exit, kills rank 1
and exits with rank 0's status. The leftover store stays, listening on the port, in the job's
process group (so stopping the scenario ends it) but without PR_SET_PDEATHSIG: it outlives the
launcher, as a real leftover does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import die_with_parent as _die_with_parent  # noqa: E402
from _helpers import free_port as _free_port
from _helpers import say as _say

WORLD_SIZE = 2
RANK_TIMEOUT = timedelta(hours=1)  # rank 1 waits for rank 0 (silently) until the launcher kills it
READY_TIMEOUT_S = 120.0  # the leftover store must be up before the new run starts (torch import)
PREVIOUS_LOG = "previous_run.log"


def _listening(port: int) -> bool:
    """Whether some socket listens on `port` (read from /proc/net/tcp*, no connection made)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


# -- the process of the previous run -------------------------------------------------------------


def previous_run_store(addr: str, port: int) -> int:
    """The earlier launch's store host: a real TCPStore server on the port, then waiting forever."""
    import torch.distributed as dist

    store = dist.TCPStore(addr, port, world_size=WORLD_SIZE, is_master=True,
                          timeout=timedelta(hours=1), wait_for_workers=False)
    _say(f"[previous run] rendezvous store up on {addr}:{port} (pid {os.getpid()}); "
         "waiting for workers that are gone")
    while store is not None:  # a leftover: nothing left to wait for, never exits
        time.sleep(3600)
    return 0


def leave_previous_run(argv_tail: list, addr: str, port: int) -> subprocess.Popen:
    """Start the leftover (same process group, no pdeathsig) and wait until it listens."""
    argv = [sys.executable, os.path.abspath(__file__), "--previous-run"] + argv_tail
    with open(PREVIOUS_LOG, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not _listening(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            _say(f"[scenario] the previous run's store did not come up (see {PREVIOUS_LOG})")
            proc.kill()
            sys.exit(3)
        time.sleep(0.1)
    return proc


# -- the launcher of the new run ----------------------------------------------------------------


def _rank_env(rank: int, addr: str, port: int) -> dict:
    env = dict(os.environ)
    env.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank), "GROUP_RANK": "0",
        "WORLD_SIZE": str(WORLD_SIZE), "LOCAL_WORLD_SIZE": str(WORLD_SIZE),
        "MASTER_ADDR": addr, "MASTER_PORT": str(port), "PYTHONUNBUFFERED": "1",
    })
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env


def launch(speed: float, tag: str) -> int:
    addr = os.environ.get("MASTER_ADDR") or "127.0.0.1"
    port = int(os.environ.get("MASTER_PORT") or _free_port())
    tail = ["--speed", f"{speed:g}"] + (["--tag", tag] if tag else [])
    leave_previous_run(tail, addr, port)

    _say(f"[launcher] starting {WORLD_SIZE} ranks (gloo, cpu), MASTER_ADDR={addr} MASTER_PORT={port}")
    procs: list = []
    for rank in range(WORLD_SIZE):
        argv = [sys.executable, os.path.abspath(__file__), "--rank", str(rank)] + tail
        procs.append(subprocess.Popen(argv, env=_rank_env(rank, addr, port), stdin=subprocess.DEVNULL))
        _say(f"[launcher] rank {rank} started (pid {procs[-1].pid})")
    while True:
        for rank, proc in enumerate(procs):
            code = proc.poll()
            if code is not None:
                _say(f"[launcher] rank {rank} exited with status {code}; stopping the others")
                for other in procs:
                    if other.poll() is None:
                        other.kill()
                        other.wait()
                status = code or 1
                _say(f"[launcher] job failed (exit status {status})")
                return status
        time.sleep(0.2 / speed)


# -- one rank of the new run --------------------------------------------------------------------


def rank_main(rank: int) -> int:
    _die_with_parent()
    import torch.distributed as dist

    _say(f"rank {rank} initialising process group (backend=gloo, world_size={WORLD_SIZE}, "
         f"MASTER_ADDR={os.environ['MASTER_ADDR']} MASTER_PORT={os.environ['MASTER_PORT']}, "
         f"pid {os.getpid()})")
    # Rank 0 hosts the TCPStore on MASTER_PORT: this raises DistNetworkError (EADDRINUSE).
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE, timeout=RANK_TIMEOUT)
    _say(f"rank {rank} initialised process group")  # never reached by rank 0
    dist.destroy_process_group()
    return 0


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="how often the launcher polls its ranks")
    ap.add_argument("--rank", type=int, default=None, help="internal: run as this rank")
    ap.add_argument("--previous-run", action="store_true",
                    help="internal: be the leftover store host of an earlier run")
    ap.add_argument("--tag", default="", help="unused; put on every command line of the job so "
                    "that a tool can tell this job's processes from another's")
    args = ap.parse_args(argv)
    if args.previous_run:
        return previous_run_store(os.environ.get("MASTER_ADDR") or "127.0.0.1",
                                  int(os.environ["MASTER_PORT"]))
    if args.rank is not None:
        return rank_main(args.rank)
    return launch(args.speed, args.tag)


if __name__ == "__main__":
    sys.exit(main())
