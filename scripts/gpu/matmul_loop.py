#!/usr/bin/env python3
"""A small real CUDA job for the GPU checks: matrix multiplies in a loop, one `step` line a second.

Started with RANK/WORLD_SIZE in its environment, as a launcher starts a rank, it looks to
runbook like one rank of a training job (the distributed env, libtorch mapped, a log that
moves) and holds a known amount of GPU memory, so the `gpu` check's process list and memory
figures can be compared with what the job itself says it holds. It stops after --seconds.

    RANK=0 WORLD_SIZE=1 python3 scripts/gpu/matmul_loop.py --seconds 120 --hold-gib 2 > train.log 2>&1 &
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--size", type=int, default=4096, help="square matrices of this size")
    parser.add_argument("--hold-gib", type=float, default=2.0, help="extra GPU memory to hold")
    args = parser.parse_args()
    device = torch.device("cuda", 0)
    held = torch.empty(int(args.hold_gib * (1 << 30)), dtype=torch.uint8, device=device)
    a = torch.randn(args.size, args.size, device=device, dtype=torch.bfloat16)
    b = torch.randn(args.size, args.size, device=device, dtype=torch.bfloat16)
    allocated = torch.cuda.memory_allocated(device) >> 20
    print(f"pid {os.getpid()} on {torch.cuda.get_device_name(device)}: "
          f"allocated {allocated} MiB (held {held.numel() >> 20} MiB)", flush=True)
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        started = time.monotonic()
        while time.monotonic() - started < 1.0:
            c = a @ b
            a = torch.tanh(c) * 0.5
        torch.cuda.synchronize()
        step += 1
        print(f"step {step} | loss {float(a.float().abs().mean()):.4f} | "
              f"mem {torch.cuda.memory_reserved(device) >> 20} MiB", flush=True)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
