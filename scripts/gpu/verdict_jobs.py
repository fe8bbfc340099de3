#!/usr/bin/env python3
"""Real CUDA jobs for the verdict cases that need a GPU (scripts/gpu-verdicts.sh runs them).

    python3 scripts/gpu/verdict_jobs.py spin            # a rank behind a kernel that never ends
    python3 scripts/gpu/verdict_jobs.py hold --gib 60   # a stale process holding the GPU
    python3 scripts/gpu/verdict_jobs.py train --gib 24  # fits an empty GPU; OOMs beside `hold`
    torchrun --nproc-per-node 2 scripts/gpu/verdict_jobs.py same-gpu   # two NCCL ranks, one GPU
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=... python3 scripts/gpu/verdict_jobs.py lone-rank  # no peer

Each writes a training-style log to stdout (`step N | loss X`) as a rank launched by torchrun
would, so runbook reads it as it reads a real job's log.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

GIB = 1 << 30


def log(msg: str) -> None:
    print(f"[rank{os.environ.get('RANK', '0')}] {msg}", flush=True)


def train_steps(steps: int, work: torch.Tensor) -> torch.Tensor:
    """A few real steps (a matrix product and a reduction), one log line each."""
    for step in range(steps):
        work = torch.tanh(work @ work) * 0.5
        log(f"step {step} | loss {float(work.float().pow(2).mean()):.4f}")
        time.sleep(0.5)
    return work


def spin(args: argparse.Namespace) -> int:
    """Train a few steps, then wait in torch.cuda.synchronize() behind a kernel that spins forever.

    torch.cuda._sleep launches one spinning block: the GPU reports 100% utilisation at low power,
    what a rank shows when its NCCL kernel waits for a peer that never arrives."""
    device = torch.device("cuda", 0)
    work = train_steps(args.steps, torch.randn(2048, 2048, device=device))
    log(f"step {args.steps} | entering the next step (work {work.shape[0]}x{work.shape[1]})")
    torch.cuda._sleep(1 << 62)  # cycles: longer than any job lives
    torch.cuda.synchronize()  # never returns
    return 0


def hold(args: argparse.Namespace) -> int:
    """A notebook someone left running: it holds `--gib` GiB of GPU 0 and idles."""
    held = torch.empty(int(args.gib * GIB), dtype=torch.uint8, device="cuda")
    print(f"[notebook] pid {os.getpid()} holds {held.numel() / GIB:.1f} GiB of GPU 0; idle", flush=True)
    while True:
        time.sleep(3600)


def train(args: argparse.Namespace) -> int:
    """A job whose activations need `--gib` GiB each step: fits an empty 80 GB GPU, not a shared one."""
    device = torch.device("cuda", 0)
    work = train_steps(2, torch.randn(2048, 2048, device=device))
    for step in range(2, 2 + args.steps):
        activations = torch.empty(int(args.gib * GIB), dtype=torch.uint8, device=device)
        log(f"step {step} | loss {float(work.float().mean()):.4f} | "
            f"activations {activations.numel() / GIB:.1f} GiB")
        del activations
    return 0


def same_gpu(args: argparse.Namespace) -> int:
    """Each rank of a torchrun job on cuda:0 (the LOCAL_RANK mapping forgotten), NCCL backend."""
    import torch.distributed as dist

    device = torch.device("cuda", 0)  # the bug: should be LOCAL_RANK
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    log(f"init_process_group done: world size {dist.get_world_size()}")
    tensor = torch.ones(1024, device=device)
    dist.all_reduce(tensor)
    torch.cuda.synchronize()
    log(f"step 0 | loss {float(tensor[0]):.4f}")
    dist.destroy_process_group()
    return 0


def lone_rank(args: argparse.Namespace) -> int:
    """Rank 0 of a two-rank NCCL job whose rank 1 was never started: it waits in the rendezvous."""
    import torch.distributed as dist

    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    log(f"joining the process group: WORLD_SIZE={os.environ.get('WORLD_SIZE')} "
        f"MASTER={os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}")
    dist.init_process_group("nccl", device_id=device)  # waits for rank 1
    log("init_process_group done")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="job", required=True)
    sub.add_parser("spin").add_argument("--steps", type=int, default=6)
    sub.add_parser("hold").add_argument("--gib", type=float, default=60.0)
    job = sub.add_parser("train")
    job.add_argument("--gib", type=float, default=24.0)
    job.add_argument("--steps", type=int, default=4)
    sub.add_parser("same-gpu")
    sub.add_parser("lone-rank")
    args = parser.parse_args()
    jobs = {"spin": spin, "hold": hold, "train": train, "same-gpu": same_gpu, "lone-rank": lone_rank}
    return jobs[args.job](args)


if __name__ == "__main__":
    sys.exit(main())
