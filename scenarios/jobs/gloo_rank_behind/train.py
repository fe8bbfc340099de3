#!/usr/bin/env python3
"""Scenario `gloo_rank_behind`: one rank skipped one all_reduce and is a collective behind.

One rank of a real torch.distributed job on CPU (gloo; needs `torch`), one rank per host:
RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT come from the environment. Every rank trains a
tiny linear model data-parallel for an epoch of `--steps` steps: one asynchronous
`dist.all_reduce` of the gradient per step (`async_op=True`), waited for in `wait_for`, which
polls `work.is_completed()` between short sleeps (as loops that overlap communication with other
work do), and a log line per step. Rank 2's shard holds a corrupted sample: at step
`--bad-step` its loss is not finite, and the loop skips the batch, as many training loops do,
*before* the gradient all_reduce instead of after it. From then on rank 2 is one collective
behind the others (gloo pairs the ranks' collectives by sequence number, so its all_reduces
complete with its peers' previous ones): it ends the epoch one collective early and waits, in
the same `wait_for`, for rank 0's "checkpoint saved" message (`dist.irecv`), while ranks 0, 1
and 3 wait in `wait_for` for the last step's all_reduce, which rank 2 never issues. Every
rank's Python stack is the same (`wait_for`, the same line) and nothing ever completes (gloo
timeout 1 h); no process burns a CPU. After 2 s without progress each rank dumps its flight
record (`_gloo_job.Watchdog`): rank 2's last collective is #steps-1, the others' #steps.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../../..")))  # the repository root
from scenarios.jobs import _gloo_job as job  # noqa: E402  (the repository root is on sys.path now)
from scenarios.jobs._helpers import say  # noqa: E402

BAD_RANK = 2


def wait_for(work, poll_s: float = 0.1) -> None:
    """Wait for an asynchronous collective (or message) while the host stays responsive."""
    while not work.is_completed():
        time.sleep(poll_s)
    work.wait()  # raises if it failed


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="faster steps when > 1")
    ap.add_argument("--steps", type=int, default=8, help="steps in the epoch")
    ap.add_argument("--bad-step", type=int, default=4, help="the step of rank 2's corrupted sample")
    args = ap.parse_args(argv)
    rank, world = job.rank_env()
    job.init(rank, world)
    import torch
    import torch.distributed as dist

    trainer = job.Trainer(rank, world)
    watchdog = job.Watchdog(rank)
    checkpoint = os.path.join(os.getcwd(), "checkpoint_epoch0.pt")  # rank 0 writes, on its host
    for step in range(args.steps):
        x, y = trainer.batch()
        if rank == BAD_RANK and step == args.bad_step:
            x[0, 0] = float("inf")  # the corrupted sample in rank 2's shard
        loss = trainer.backward(x, y)
        if not torch.isfinite(loss):
            say(f"rank {rank} step {step} loss {loss.item()} (not finite: batch skipped)")
            continue  # BUG: skips this step's all_reduce too; the peers do not skip theirs
        flat = trainer.flat_grad()
        wait_for(dist.all_reduce(flat, async_op=True))  # ranks 0, 1, 3 wait here at the last step
        trainer.apply(flat)
        say(f"rank {rank} step {step} loss {loss.item():.4f}")
        watchdog.beat()
        time.sleep(0.3 / args.speed)
    saved = torch.zeros(1)
    if rank == 0:
        torch.save(trainer.model.state_dict(), checkpoint)
        say(f"rank {rank} epoch 0 done; checkpoint saved to {checkpoint}")
        saved += 1
        for peer in range(1, world):
            dist.send(saved, dst=peer)
    else:
        say(f"rank {rank} epoch 0 done; waiting for rank 0's checkpoint")
        wait_for(dist.irecv(saved, src=0))  # rank 2 waits here: rank 0 never gets this far
    say(f"rank {rank} checkpoint of epoch 0 ready")
    job.sleep_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
