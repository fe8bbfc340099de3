#!/usr/bin/env python3
"""Scenario `ray_long_temp_dir`: ray.init() fails because the job's TMPDIR is too long for Ray's sockets.

Real Ray on CPU (needs `ray`). As on an HPC node whose batch system gives every job a scratch
folder on shared storage and points TMPDIR at it, the launcher makes
`DIR/scratch/<user>/slurm_jobdir/<job id>/tmp.<node>` and execs the job with TMPDIR set to it
(RAY_TMPDIR and RAY_ADDRESS unset: a plain `ray.init()` starts Ray here). Ray's temp dir is then
`$TMPDIR/ray`, its session's object-store socket `$TMPDIR/ray/session_<date>_<pid>/sockets/
plasma_store` is longer than the 107 bytes AF_UNIX allows, and `ray.init()` raises Ray's own
`OSError: validate_socket_filename failed: AF_UNIX path length cannot exceed 107 bytes: ...`
before it starts any process. The job exits 1 with the traceback in its log.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import exec_self, say  # noqa: E402

JOB_ID = "48213377"


def train() -> None:
    say(f"[rank 0] pid {os.getpid()}: SLURM_JOB_ID={os.environ.get('SLURM_JOB_ID')} "
        f"TMPDIR={os.environ.get('TMPDIR')}")
    import ray

    say(f"[rank 0] ray {ray.__version__}: ray.init(num_cpus=1)")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    say("[rank 0] ray started")  # not reached: the socket path is too long
    ray.shutdown()


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="(unused: the job fails at once)")
    ap.add_argument("--train", action="store_true", help="(internal) the job, with TMPDIR set")
    args = ap.parse_args(argv)
    if args.train:
        train()
        return 0
    tmpdir = os.path.join(os.getcwd(), "scratch", getpass.getuser(), "slurm_jobdir", JOB_ID, "tmp.node0001")
    os.makedirs(tmpdir, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_TMPDIR", "RAY_ADDRESS")}
    env.update({"TMPDIR": tmpdir, "SLURM_JOB_ID": JOB_ID})
    say(f"[launcher] export TMPDIR={tmpdir} ({len(tmpdir.encode())} bytes); exec the job")
    exec_self(__file__, env, "--train")
    return 1


if __name__ == "__main__":
    sys.exit(main())
