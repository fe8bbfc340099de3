#!/usr/bin/env python3
"""Scenario `gloo_rank_outside`: one rank of a 4-rank job is outside every collective.

One rank of a real torch.distributed job on CPU (gloo; needs `torch`), one rank per host:
RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT come from the environment. Every rank trains a
tiny linear model data-parallel (one `dist.all_reduce` of the gradient per step, a log line per
step). Every `--save-every` steps each rank writes its shard of the checkpoint first; the
rank that holds shard 2 (rank 2) waits in `save_shard` for the previous write of its shard to
be released (a lock file nobody removes: a stuck shared file system), so it never reaches
the step's all_reduce. Ranks 0, 1 and 3 wait in `dist.all_reduce` for it forever (gloo
timeout 1 h); rank 2 sleeps in `save_shard`. No process burns a CPU. After 2 s without
progress each rank dumps its flight record (`_gloo_job.Watchdog`): ranks 0, 1, 3 issued one
collective more than rank 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../../..")))  # the repository root
from scenarios.jobs import _gloo_job as job  # noqa: E402  (the repository root is on sys.path now)
from scenarios.jobs._helpers import say  # noqa: E402

STUCK_RANK = 2


def save_shard(rank: int, step: int, folder: str) -> None:
    """Write this rank's checkpoint shard once the previous write of it is released."""
    lock = os.path.join(folder, f"shard{rank}.lock")
    if rank == STUCK_RANK:  # left behind by a write the file system never finished
        with open(lock, "w") as fh:
            fh.write("writer gone\n")
    say(f"rank {rank} step {step} saving shard {rank}")
    while os.path.exists(lock):
        time.sleep(0.5)  # nobody releases it: rank 2 stays here, outside the all_reduce
    with open(os.path.join(folder, f"shard{rank}.txt"), "w") as fh:
        fh.write(f"step {step}\n")


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="faster steps when > 1")
    ap.add_argument("--save-every", type=int, default=5, help="steps between checkpoint shards")
    args = ap.parse_args(argv)
    rank, world = job.rank_env()
    job.init(rank, world)
    import torch.distributed as dist

    trainer = job.Trainer(rank, world)
    watchdog = job.Watchdog(rank)
    folder = os.path.join(os.getcwd(), "checkpoint")
    os.makedirs(folder, exist_ok=True)
    step = 0
    while True:
        x, y = trainer.batch()
        loss = trainer.backward(x, y)
        if step > 0 and step % args.save_every == 0:
            save_shard(rank, step, folder)
        flat = trainer.flat_grad()
        dist.all_reduce(flat)  # ranks 0, 1, 3 wait here at step 5 for rank 2
        trainer.apply(flat)
        say(f"rank {rank} step {step} loss {loss.item():.4f}")
        watchdog.beat()
        step += 1
        time.sleep(0.3 / args.speed)


if __name__ == "__main__":
    sys.exit(main())
