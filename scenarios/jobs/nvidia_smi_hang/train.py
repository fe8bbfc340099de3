#!/usr/bin/env python3
"""Scenario `nvidia_smi_hang` (seed 001): self-play RL job stuck while its workers initialise.

A small self-play training job, CPU only, standard library only. It logs
"Initializing 100 workers...", starts a handful of real worker processes (4 by
default, standing in for the 100 Ray actors) whose engine initialisation blocks
forever on a lock that is never released (a stuck driver / engine resource), then
logs "Collecting trajectories..." and waits for their results with no timeout.
The log stops there. The main process and its workers are alive, sleeping
(state S) and use no CPU; nothing is ever printed again.

The scenario's other half is the fake `bin/nvidia-smi` that hangs: the launcher
puts its directory first on the diagnosing tool's PATH. This job never calls it.

Workers are forked into the job's process group, so killing the group kills them
all; they also ask the kernel to SIGKILL them if the main process dies.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import random
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import die_with_parent as _die_with_parent  # noqa: E402
from _helpers import set_comm as _set_comm

log = logging.getLogger("scai.selfplay")


def worker_main(worker_id: int, engine_lock: Any, ready: Any, results: Any) -> None:
    """A self-play worker: initialise the game engine, then play games (never gets there)."""
    _die_with_parent()
    _set_comm("SelfPlayWorker")
    wlog = logging.getLogger(f"scai.selfplay.worker.{worker_id}")
    wlog.info("SelfPlayWorker %d (pid %d): initializing engine (scai_engine.PyGameEngine) "
              "and model on cpu...", worker_id, os.getpid())
    ready.release()
    # Engine initialisation needs the shared device/engine resource; whoever holds it is
    # stuck, so this blocks forever in a futex wait: no CPU, state S, no output.
    engine_lock.acquire()
    results.put((worker_id, []))  # never reached


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="accepted for uniformity; unused")
    ap.add_argument("--num-workers", type=int, default=100,
                    help="workers the config asks for (logged, as in the field report)")
    ap.add_argument("--procs", type=int, default=4, help="worker processes really started")
    args = ap.parse_args(argv)
    logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                        format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))

    log.info("Loading config: selfplay.num_workers=%d, games_per_worker=10, device=cpu "
             "(rank=%d, world_size=%d)", args.num_workers, rank, world)
    rng = random.Random(0)
    model = [rng.gauss(0.0, 0.02) for _ in range(1 << 16)]
    log.info("Model created: DualResNet (toy, %d parameters)", len(model))
    log.info("Starting iteration 1/1000")

    ctx = mp.get_context("fork")
    engine_lock = ctx.Lock()
    engine_lock.acquire()  # held by the (stuck) engine/driver; never released
    ready = ctx.Semaphore(0)
    results = ctx.Queue()
    log.info("Initializing %d workers...", args.num_workers)
    workers = [ctx.Process(target=worker_main, args=(i, engine_lock, ready, results),
                           name=f"SelfPlayWorker-{i}", daemon=True)
               for i in range(args.procs)]
    for w in workers:
        w.start()
    deadline = time.monotonic() + 10.0
    for _ in workers:  # let each worker's line reach the log before ours
        if not ready.acquire(timeout=max(0.0, deadline - time.monotonic())):
            break
    log.info("Collecting trajectories...")
    # ray.wait on 100 futures in the original; here a blocking get with no timeout.
    trajectories = [results.get() for _ in workers]
    log.info("Collection complete: %d trajectories", len(trajectories))
    return 0


if __name__ == "__main__":
    sys.exit(main())
