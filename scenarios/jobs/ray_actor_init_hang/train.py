#!/usr/bin/env python3
"""Scenario `ray_actor_init_hang` (seed 001): Ray self-play workers stuck initialising.

A small self-play RL job on a real, local Ray cluster (CPU only; needs `ray`). It
starts its own cluster (`ray.init(address="local", num_cpus=4)`, no dashboard by
default), logs "Initializing 100 workers...", creates 8 `SelfPlayWorker` actors
(num_cpus=0.5 each, so all of them are scheduled) whose `__init__` blocks forever
while "initialising the Rust engine" (it waits on an event nobody sets), logs
"Collecting trajectories..." and blocks in `ray.get` on their `run` calls. Nothing
is logged after that. In Ray's state the actors stay PENDING_CREATION with their
creation task RUNNING, and their `run` calls wait for a node assignment.

Like the seed's `python train.py --config config.yaml`, it reads `selfplay.num_workers`
and `selfplay.games_per_worker` from WORKDIR/config.yaml, written with the seed's
defaults (100 workers, 10 games each) when it is missing; `--num-workers` overrides the
file. The job writes the cluster's GCS address to WORKDIR/ray_address (and the session
directory to WORKDIR/ray_session) once Ray is up. The GCS, raylet and the other Ray
daemons are children of this process in its process group, so killing the group
ends the cluster; the actor worker processes exit as soon as their raylet is gone.
SIGTERM/SIGINT/SIGHUP shut Ray down cleanly first.
"""

from __future__ import annotations

import argparse
import logging
import os
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
DEFAULT_CONFIG = """\
# Self-play configuration (python train.py --config config.yaml)
selfplay:
  num_workers: 100  # concurrent Ray workers
  games_per_worker: 10
  device: cpu
"""


def _load_config(path: str) -> dict[str, str]:
    """`selfplay.*` of the config file (two-level YAML), written with the defaults if missing."""
    config = Path(path)
    if not config.exists():
        config.write_text(DEFAULT_CONFIG)
    values: dict[str, str] = {}
    section = None
    for line in config.read_text().splitlines():
        text = line.split("#", 1)[0].rstrip()
        if not text.strip() or ":" not in text:
            continue
        key, _, value = text.strip().partition(":")
        if not line.startswith((" ", "\t")):
            section = key
        elif section == "selfplay":
            values[key] = value.strip()
    return values


@ray.remote(num_cpus=0.5)
class SelfPlayWorker:
    """A self-play worker whose game engine never finishes initialising."""

    def __init__(self, worker_id: int, device: str) -> None:
        logging.basicConfig(stream=sys.stdout, level=logging.INFO, format=LOG_FORMAT)
        self.worker_id = worker_id
        wlog = logging.getLogger(f"scai.selfplay.worker.{worker_id}")
        wlog.info("SelfPlayWorker %d (pid %d): initializing engine (scai_engine.PyGameEngine) "
                  "and model on %s...", worker_id, os.getpid(), device)
        # The (Rust/PyO3) engine waits for a device/engine resource that never becomes
        # ready: no CPU, state S, and the actor never leaves PENDING_CREATION.
        engine_ready = threading.Event()
        engine_ready.wait()

    def run(self, model_state: dict[str, Any]) -> list[Any]:
        return []  # never reached: the actor never finishes __init__


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
    ap.add_argument("--speed", type=float, default=1.0, help="accepted for uniformity; unused")
    ap.add_argument("--config", default="config.yaml", help="configuration file (YAML)")
    ap.add_argument("--num-workers", type=int, default=None,
                    help="workers the config asks for (logged, as in the field report; "
                         "default: selfplay.num_workers of --config)")
    ap.add_argument("--actors", type=int, default=8, help="actors really created")
    ap.add_argument("--num-cpus", type=int, default=4, help="CPUs of the local Ray cluster")
    ap.add_argument("--dashboard", action="store_true", help="start the Ray dashboard too")
    args = ap.parse_args(argv)
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format=LOG_FORMAT)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))

    config = _load_config(args.config)
    if args.num_workers is None:
        args.num_workers = int(config.get("num_workers", 100))
    log.info("Loading config: selfplay.num_workers=%d, games_per_worker=%s, device=cpu "
             "(rank=%d, world_size=%d)", args.num_workers, config.get("games_per_worker", "10"),
             rank, world)
    _shutdown_on_signals()
    address = _start_ray(args.num_cpus, args.dashboard)
    log.info("Ray cluster started: address=%s, num_cpus=%d (Ray %s)", address, args.num_cpus,
             ray.__version__)
    model_state = {"weights": [0.0] * 4096}
    log.info("Model created: DualResNet (toy, %d parameters)", len(model_state["weights"]))
    log.info("Starting iteration 1/1000")
    log.info("Initializing %d workers...", args.num_workers)
    workers = [SelfPlayWorker.remote(i, "cpu") for i in range(args.actors)]
    time.sleep(0.5)  # the original submits the games right away; give the log a moment
    log.info("Collecting trajectories...")
    futures = [w.run.remote(model_state) for w in workers]
    trajectories = ray.get(futures)  # blocks forever: no worker finishes initialising
    log.info("Collection complete: %d trajectories", len(trajectories))
    return 0


if __name__ == "__main__":
    sys.exit(main())
