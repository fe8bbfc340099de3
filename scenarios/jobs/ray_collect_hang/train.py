#!/usr/bin/env python3
"""Scenario `ray_collect_hang` (seed 001): Ray workers initialised, collection never returns.

A small self-play RL job on a real, local Ray cluster (CPU only; needs `ray`). It
starts its own cluster (`ray.init(address="local", num_cpus=4)`, with the dashboard,
so Ray's state API answers), creates 8 `SelfPlayWorker` actors (num_cpus=0.5 each)
in batches of 4 and waits until each batch has initialised ("Created 8/8
workers..."), then logs "Collecting trajectories...", submits `worker.run.remote(...)`
to every worker and loops on `ray.wait(futures, num_returns=1, timeout=300 / speed)`,
logging "Waiting for 8 workers... (elapsed: Xs)" before each wait. Every `run` plays
a few toy games and then blocks forever on the engine's lock, which the engine's
background thread took and never releases: the actors are ALIVE, their `run` tasks
RUNNING (state S, no CPU), and no future ever becomes ready.

The job writes the cluster's GCS address to WORKDIR/ray_address (and the session
directory to WORKDIR/ray_session) once Ray is up. The GCS, raylet and the other Ray
daemons are children of this process in its process group, so killing the group
ends the cluster; the actor worker processes exit as soon as their raylet is gone.
SIGTERM/SIGINT/SIGHUP shut Ray down cleanly first.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

# Every worker's log line reaches the driver's log, as in the field report (read at import).
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

import ray  # noqa: E402

log = logging.getLogger("scai.selfplay")
LOG_FORMAT = "%(asctime)s - %(name)s - %(levelname)s - %(message)s"


@ray.remote(num_cpus=0.5)
class SelfPlayWorker:
    """A self-play worker whose game engine deadlocks when the games are flushed."""

    def __init__(self, worker_id: int, device: str) -> None:
        logging.basicConfig(stream=sys.stdout, level=logging.INFO, format=LOG_FORMAT)
        self.worker_id = worker_id
        self.log = logging.getLogger(f"scai.selfplay.worker.{worker_id}")
        self.log.info("SelfPlayWorker %d (pid %d): engine (scai_engine.PyGameEngine) and model "
                      "ready on %s", worker_id, os.getpid(), device)
        self.engine_lock = threading.Lock()
        self.rng = random.Random(worker_id)
        # The engine's background thread takes the lock for its first flush and never
        # gives it back (a lost wake-up in the native engine).
        holder = threading.Thread(target=self.engine_lock.acquire, name="engine-flush",
                                  daemon=True)
        holder.start()
        holder.join()

    def ready(self) -> int:
        return os.getpid()

    def run(self, model_state: dict[str, Any], num_games: int = 10) -> list[Any]:
        trajectories = []
        for game in range(num_games):
            moves = [self.rng.randrange(34) for _ in range(200)]
            trajectories.append({"game": game, "moves": moves})
        self.engine_lock.acquire()  # blocks forever: state S, no CPU
        return trajectories  # never reached


def _start_ray(num_cpus: int, dashboard: bool) -> str:
    os.environ.pop("RAY_ADDRESS", None)  # start our own cluster, never join another
    ctx = ray.init(address="local", num_cpus=num_cpus, include_dashboard=dashboard,
                   object_store_memory=80 * 1024 * 1024, log_to_driver=True)
    info = ctx.address_info
    address = str(info.get("gcs_address") or info.get("address") or "")
    Path("ray_address").write_text(address + "\n")
    Path("ray_session").write_text(str(info.get("session_dir") or "") + "\n")
    return address


def _shutdown_on_signals() -> None:
    def stop(signum: int, _frame: object) -> None:
        ray.shutdown()
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0,
                    help="the ray.wait timeout is 300 s / speed")
    ap.add_argument("--actors", type=int, default=8, help="workers created")
    ap.add_argument("--batch-size", type=int, default=4, help="workers created per batch")
    ap.add_argument("--num-cpus", type=int, default=4, help="CPUs of the local Ray cluster")
    ap.add_argument("--no-dashboard", action="store_true",
                    help="start Ray without the dashboard (no state API)")
    args = ap.parse_args(argv)
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format=LOG_FORMAT)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    wait_timeout = 300.0 / max(args.speed, 1e-6)

    log.info("Loading config: selfplay.num_workers=%d, games_per_worker=10, device=cpu "
             "(rank=%d, world_size=%d)", args.actors, rank, world)
    _shutdown_on_signals()
    address = _start_ray(args.num_cpus, not args.no_dashboard)
    log.info("Ray cluster started: address=%s, num_cpus=%d (Ray %s)", address, args.num_cpus,
             ray.__version__)
    model_state = {"weights": [0.0] * 4096}
    log.info("Model created: DualResNet (toy, %d parameters)", len(model_state["weights"]))
    log.info("Starting iteration 1/1000")
    log.info("Initializing %d workers...", args.actors)
    workers: list[Any] = []
    for first in range(0, args.actors, args.batch_size):
        batch = [SelfPlayWorker.remote(i, "cpu")
                 for i in range(first, min(first + args.batch_size, args.actors))]
        ray.get([w.ready.remote() for w in batch])
        workers.extend(batch)
        log.info("Created %d/%d workers...", len(workers), args.actors)

    log.info("Collecting trajectories...")
    futures = [w.run.remote(model_state) for w in workers]
    log.info("Started %d workers, waiting for results...", len(futures))
    trajectories: list[Any] = []
    remaining = futures
    start = time.time()
    while remaining:
        log.info("Waiting for %d workers... (elapsed: %.1fs)", len(remaining),
                 time.time() - start)
        ready, remaining = ray.wait(remaining, num_returns=1, timeout=wait_timeout)
        for result in ray.get(ready):
            trajectories.extend(result)
    log.info("Collection complete: %d trajectories", len(trajectories))
    return 0


if __name__ == "__main__":
    sys.exit(main())
