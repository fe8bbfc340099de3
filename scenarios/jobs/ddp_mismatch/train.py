#!/usr/bin/env python3
"""Scenario `ddp_mismatch` (seed 002): a two-rank DDP job hangs because the ranks took different paths.

A real torch.distributed job on CPU (gloo backend; needs `torch`). Started as one process,
it launches two ranks the way torchrun does: child processes of the same interpreter with
RANK / LOCAL_RANK / WORLD_SIZE / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT in their
environment. Both ranks train a tiny linear model for a few steps (gradients averaged with
`dist.all_reduce`, one log line per step), then reach the end of the epoch, where the code
branches on the rank, as the seed's troubleshooting guide warns against:

- rank 0 validates and averages the validation loss with an extra `dist.all_reduce`
  (a collective only rank 0 calls), then would wait at the checkpoint barrier;
- rank 1 skips validation and goes straight to the checkpoint `dist.barrier()`.

So rank 0 waits in all_reduce and rank 1 in barrier, forever: the gloo timeout is one hour,
the watchdog never fires, both ranks sleep (state S) with no CPU, and the log stops at the
two `entering` lines. The launcher process only waits for its ranks (and ends the job if one
of them exits). Ranks are in the job's process group and also get SIGKILL when the launcher
process dies.
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
GLOO_TIMEOUT = timedelta(hours=1)


# -- the launcher process ----------------------------------------------------------------------


def _rank_env(rank: int, port: str) -> dict:
    env = dict(os.environ)
    env.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank), "GROUP_RANK": "0",
        "WORLD_SIZE": str(WORLD_SIZE), "LOCAL_WORLD_SIZE": str(WORLD_SIZE),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "PYTHONUNBUFFERED": "1",
    })
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env


def launch(speed: float, steps: int, tag: str) -> int:
    """Start the ranks and wait; when one exits, stop the others and pass its status on."""
    port = os.environ.get("MASTER_PORT") or str(_free_port())
    _say(f"[launcher] starting {WORLD_SIZE} ranks (gloo, cpu), MASTER_ADDR=127.0.0.1 MASTER_PORT={port}")
    procs: list[subprocess.Popen] = []
    for rank in range(WORLD_SIZE):
        argv = [sys.executable, os.path.abspath(__file__), "--rank", str(rank),
                "--speed", f"{speed:g}", "--steps", str(steps)] + (["--tag", tag] if tag else [])
        procs.append(subprocess.Popen(argv, env=_rank_env(rank, port), stdin=subprocess.DEVNULL))
        _say(f"[launcher] rank {rank} started (pid {procs[-1].pid})")
    while True:
        for rank, proc in enumerate(procs):
            code = proc.poll()
            if code is not None:
                _say(f"[launcher] rank {rank} exited with status {code}; stopping the others")
                for other in procs:
                    if other.poll() is None:
                        other.kill()
                return code or 1
        time.sleep(0.5)


# -- one rank ----------------------------------------------------------------------------------


def train_steps(rank: int, steps: int, speed: float) -> None:
    """A few real data-parallel steps: local backward, gradients averaged with all_reduce."""
    import torch
    import torch.distributed as dist

    torch.manual_seed(0)  # same initial weights on every rank
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1 + rank)  # each rank its own shard of the data
    true_w = torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8
    for step in range(steps):
        x = torch.randn(32, 8, generator=gen)
        y = x @ true_w
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for param in model.parameters():
            dist.all_reduce(param.grad)
            param.grad /= WORLD_SIZE
        opt.step()
        _say(f"rank {rank} step {step} loss {loss.item():.4f}")
        time.sleep(0.2 / speed)


def validate(rank: int) -> float:
    """Rank 0 only: average the validation loss over ranks (a collective the others never call)."""
    import torch
    import torch.distributed as dist

    val_loss = torch.tensor([0.5])
    _say(f"rank {rank} entering extra all_reduce (validation loss, only rank 0 validates)")
    dist.all_reduce(val_loss)  # rank 1 is in barrier(): this never completes
    return float(val_loss.item()) / WORLD_SIZE


def save_checkpoint(rank: int) -> None:
    """Every rank: wait for the others before the checkpoint is written."""
    import torch.distributed as dist

    _say(f"rank {rank} entering barrier (before checkpoint)")
    dist.barrier()  # rank 0 is in all_reduce(): this never completes
    _say(f"rank {rank} checkpoint saved")


def rank_main(rank: int, speed: float, steps: int) -> int:
    _die_with_parent()
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE, timeout=GLOO_TIMEOUT)
    _say(f"rank {rank} initialised process group (backend=gloo, world_size={WORLD_SIZE}, pid {os.getpid()})")
    train_steps(rank, steps, speed)
    _say(f"rank {rank} epoch 0 done")
    if rank == 0:
        validate(rank)
    save_checkpoint(rank)
    dist.destroy_process_group()
    return 0


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="faster steps when > 1")
    ap.add_argument("--steps", type=int, default=5, help="training steps before the hang")
    ap.add_argument("--rank", type=int, default=None, help="internal: run as this rank")
    ap.add_argument("--tag", default="", help="unused; passed on to the ranks' command lines so "
                    "that a tool can tell this job's processes from another's")
    args = ap.parse_args(argv)
    if args.rank is None:
        return launch(args.speed, args.steps, args.tag)
    return rank_main(args.rank, args.speed, args.steps)


if __name__ == "__main__":
    sys.exit(main())
