#!/usr/bin/env python3
"""Scenario `ray_open_files_limit`: Ray's workers cannot start under a low open-files limit.

Real Ray on CPU (needs `ray`). As on a node whose batch shell or container has a low open-files
limit, the launcher sets RLIMIT_NOFILE to 64 (soft and hard: `ray.init()` raises its soft limit
to the hard one, so a low hard limit is what sticks) and execs the job. The job starts Ray with
`ray.init()` (Ray warns: `File descriptor limit 64 is too low`) and creates 16 rollout actors;
the raylet runs out of descriptors while it starts their workers (`Raylet failed to accept new
connection: Too many open files`), most actors never start, and the driver waits for them
forever, logging `Waiting for N actors...` every 10 s. On a loaded machine the raylet may
instead abort while it creates a worker's files (`worker_pool.cc: Too many workers, failed to
create a file`), and the driver ends without its raylet. The raylet is the driver's child and
inherits its limit; everything is in the job's process group.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import exec_self, say  # noqa: E402

NOFILE = 64
ACTORS = 16


def train() -> None:
    import ray

    say(f"[rank 0] pid {os.getpid()}: ray {ray.__version__}, open files limit "
        f"{resource.getrlimit(resource.RLIMIT_NOFILE)}")
    ray.init(num_cpus=2, include_dashboard=False)

    @ray.remote(num_cpus=0)
    class Rollout:
        def ready(self) -> int:
            return os.getpid()

    say(f"Initializing {ACTORS} workers...")
    pending = [Rollout.remote().ready.remote() for _ in range(ACTORS)]
    started = time.monotonic()
    while pending:  # as a collector does: wait, log, wait again (the actors never come)
        ready, pending = ray.wait(pending, num_returns=len(pending), timeout=10)
        say(f"Waiting for {len(pending)} workers... (elapsed: {time.monotonic() - started:.1f}s)")
    say("Workers initialized")


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="(unused)")
    ap.add_argument("--train", action="store_true", help="(internal) the job, under the low limit")
    args = ap.parse_args(argv)
    if args.train:
        train()
        return 0
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS",)}
    say(f"[launcher] ulimit -n {NOFILE} (soft and hard, as this node's batch shell has it); exec the job")
    exec_self(__file__, env, "--train")
    return 1


if __name__ == "__main__":
    sys.exit(main())
