#!/usr/bin/env python3
"""A two-rank gloo job started by `srun` inside an `sbatch` job (one task per node).

Ranks come from Slurm itself (SLURM_PROCID, SLURM_NTASKS), as with `srun python train.py`
and no launcher of its own. Three endings, chosen with --mode:

- `healthy`: a step line per second, forever (until scancel);
- `mismatch`: three steps, then rank 0 validates with an extra all_reduce that rank 1 never
  calls, while rank 1 waits in the checkpoint barrier: both wait forever (seed 002);
- `alloc-fails`: three steps, then rank 1 asks for more host memory than exists and dies of the
  allocator's error; srun ends the step and the job fails.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--mode", choices=("healthy", "mismatch", "alloc-fails"), default="healthy")
    ap.add_argument("--master", required=True, help="HOST:PORT of rank 0's store")
    args = ap.parse_args()
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(hours=1))
    weights = torch.ones(1024)
    step = 0
    while True:
        grad = torch.full((1024,), 0.01 * (rank + 1))
        dist.all_reduce(grad)
        weights -= grad
        print(f"rank {rank} step {step} loss {float(weights.abs().mean()):.4f}", flush=True)
        step += 1
        if step == 3 and args.mode == "mismatch":
            if rank == 0:
                dist.all_reduce(torch.ones(1))  # validation: only rank 0 gets here
            dist.barrier()  # checkpoint
        if step == 3 and args.mode == "alloc-fails" and rank == 1:
            torch.empty(1 << 60, dtype=torch.uint8)  # the allocator refuses: the rank dies
        time.sleep(1.0)


if __name__ == "__main__":
    sys.exit(main())
