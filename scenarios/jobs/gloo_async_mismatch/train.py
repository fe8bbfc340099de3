#!/usr/bin/env python3
"""Scenario `gloo_async_mismatch`: the ranks issued different asynchronous collectives.

One rank of a real torch.distributed job on CPU (gloo; needs `torch`), one rank per host:
RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT come from the environment. Every rank trains a
tiny linear model data-parallel for `--steps` steps (one `dist.all_reduce` of the gradient per
step, a log line per step). Then each rank shares its metrics with an asynchronous collective
(`async_op=True`) and overlaps the wait with other work, polling `work.is_completed()`: ranks
0-2 call `dist.all_gather`, but rank 3, configured as the metrics "leader" by a stale flag,
calls `dist.broadcast` instead. Collective #steps+1 never completes on any rank: every rank
polls in `wait_for_metrics` (the same Python stack everywhere, time.sleep between polls), and
nothing but the flight recorder tells the ranks apart. Right after issuing, each rank writes its
flight-recorder dump to `<TORCH_FR_DUMP_TEMP_FILE><rank>` (and `.json`), as NCCL's watchdog
does on a timeout. The gloo timeout is 1 h: the job hangs until stopped.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../../..")))  # the repository root
from scenarios.jobs import _gloo_job as job  # noqa: E402  (the repository root is on sys.path now)
from scenarios.jobs._helpers import say  # noqa: E402

LEADER_RANK = 3  # the stale `--metrics-leader` of rank 3's launch line


def share_metrics(rank: int, world: int, loss: float):
    """Issue the metrics collective asynchronously; returns its Work."""
    import torch
    import torch.distributed as dist

    local = torch.tensor([loss, float(rank)])
    if rank == LEADER_RANK:
        say(f"rank {rank} issuing broadcast of metrics (async, src=0)")
        return dist.broadcast(local, src=0, async_op=True)
    gathered = [torch.zeros(2) for _ in range(world)]
    say(f"rank {rank} issuing all_gather of metrics (async)")
    return dist.all_gather(gathered, local, async_op=True)


def wait_for_metrics(rank: int, work, poll_s: float) -> None:
    """Overlap the metrics exchange with other work: poll until it completes."""
    while not work.is_completed():
        time.sleep(poll_s)
    say(f"rank {rank} metrics exchanged")


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="faster steps when > 1")
    ap.add_argument("--steps", type=int, default=3, help="training steps before the metrics")
    args = ap.parse_args(argv)
    rank, world = job.rank_env()
    job.init(rank, world)
    import torch.distributed as dist

    trainer = job.Trainer(rank, world)
    loss = None
    for step in range(args.steps):
        x, y = trainer.batch()
        loss = trainer.backward(x, y)
        flat = trainer.flat_grad()
        dist.all_reduce(flat)
        trainer.apply(flat)
        say(f"rank {rank} step {step} loss {loss.item():.4f}")
        time.sleep(0.3 / args.speed)
    work = share_metrics(rank, world, float(loss.item()) if loss is not None else 0.0)
    path = job.dump_flight_recorder(rank)
    if path:
        say(f"rank {rank}: flight recorder dumped to {path}")
    wait_for_metrics(rank, work, poll_s=0.5)
    job.sleep_forever()  # only if gloo ever paired the two ops
    return 0


if __name__ == "__main__":
    sys.exit(main())
