#!/usr/bin/env python3
"""Scenario `world_size_exceeds_devices` (seed 002): world_size is larger than the devices, the ranks wait.

A real torch.distributed launch on CPU (gloo backend; needs `torch`). The job script is set up
for 4 GPUs per node (`--nproc-per-node 4`, exported as GPUS_PER_NODE=4) on one node, so its
world_size is num_nodes * gpus_per_node = 1 * 4 = 4, but the node gave it two devices
(`--devices 0,1`, exported as CUDA_VISIBLE_DEVICES=0,1). The launcher does what the classic
`mp.spawn(train, nprocs=<GPUs>)` scripts do: it starts one process per device it was given
(counted from CUDA_VISIBLE_DEVICES, without initialising CUDA before forking), each told
WORLD_SIZE=4 / LOCAL_WORLD_SIZE=4 and RANK=LOCAL_RANK=its index. Ranks 2 and 3 have no device
and are never started.

The two ranks really call `dist.init_process_group("gloo", world_size=4)`: rank 0's TCPStore
waits for 4 clients and 2 come, rank 1 waits for the keys of the ranks that never come. Both
wait (state S; rank 0's store polls for clients, a few % CPU) for torch's default timeout of 30
minutes (`--init-timeout`), after which torch 2.x raises `DistStoreError: Timed out after N
seconds waiting for clients. 2/4 clients joined.` (rank 0) and `wait timeout after ...ms`
(rank 1), and the launcher exits.

Why not "ranks 2 and 3 fail on cuda:2 / cuda:3": on a GPU node with two visible GPUs a rank
that calls `torch.cuda.set_device(2)` dies with `CUDA error: invalid device ordinal`, but on a
CPU-only build every rank, 0 and 1 included, would die of `Torch not compiled with CUDA enabled`,
which is a different failure (no CUDA at all). So the ranks bind `cuda:LOCAL_RANK` only where
torch has CUDA and run on the CPU otherwise; what this scenario reproduces for real is the
consequence the world size itself causes: the process group waits for ranks no device exists for.
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

TORCH_DEFAULT_TIMEOUT_S = 1800.0  # torch.distributed's default process-group timeout (gloo)


# -- the launcher -------------------------------------------------------------------------------


def launch(args: argparse.Namespace) -> int:
    addr = os.environ.get("MASTER_ADDR") or "127.0.0.1"
    port = os.environ.get("MASTER_PORT") or str(_free_port())
    devices = [d for d in args.devices.split(",") if d.strip()]
    world_size = args.nnodes * args.nproc_per_node
    _say(f"[launcher] config: nnodes={args.nnodes} nproc_per_node={args.nproc_per_node} -> "
         f"world_size={world_size}, MASTER_ADDR={addr} MASTER_PORT={port}")
    _say(f"[launcher] CUDA_VISIBLE_DEVICES={args.devices}: spawning one process per device "
         f"({len(devices)})")
    procs: list = []
    for local_rank in range(len(devices)):
        rank = args.node_rank * args.nproc_per_node + local_rank
        env = dict(os.environ)
        env.update({
            "RANK": str(rank), "LOCAL_RANK": str(local_rank), "GROUP_RANK": str(args.node_rank),
            "WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(args.nproc_per_node),
            "GPUS_PER_NODE": str(args.nproc_per_node), "NNODES": str(args.nnodes),
            "CUDA_VISIBLE_DEVICES": args.devices,
            "MASTER_ADDR": addr, "MASTER_PORT": port, "PYTHONUNBUFFERED": "1",
        })
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        argv = [sys.executable, os.path.abspath(__file__), "--rank-process",
                "--init-timeout", f"{args.init_timeout:g}", "--speed", f"{args.speed:g}"]
        argv += ["--tag", args.tag] if args.tag else []
        procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL))
        _say(f"[launcher] rank {rank} (local_rank {local_rank}) started (pid {procs[-1].pid})")
    while True:
        for local_rank, proc in enumerate(procs):
            code = proc.poll()
            if code is not None:
                rank = args.node_rank * args.nproc_per_node + local_rank
                _say(f"[launcher] rank {rank} exited with status {code}; stopping the others")
                for other in procs:
                    if other.poll() is None:
                        other.kill()
                        other.wait()
                return code or 1
        time.sleep(0.5 / args.speed)


# -- one rank -----------------------------------------------------------------------------------


def rank_main(init_timeout: float) -> int:
    _die_with_parent()
    import torch
    import torch.distributed as dist

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    else:
        device = "cpu (torch.cuda.is_available() is False)"
    _say(f"rank {rank}/{world_size} (local_rank {local_rank}, device {device}, pid {os.getpid()}): "
         "init_process_group(backend=gloo)")
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=init_timeout))
    _say(f"rank {rank} initialised process group")  # never: ranks 2 and 3 do not exist
    dist.destroy_process_group()
    return 0


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="how often the launcher polls its ranks")
    ap.add_argument("--nproc-per-node", type=int, default=4,
                    help="GPUs (ranks) per node the job is configured for (GPUS_PER_NODE)")
    ap.add_argument("--nnodes", type=int, default=1, help="nodes the job is configured for")
    ap.add_argument("--node-rank", type=int, default=0, help="this node's index")
    ap.add_argument("--devices", default="0,1",
                    help="the devices the node gave the job (exported as CUDA_VISIBLE_DEVICES)")
    ap.add_argument("--init-timeout", type=float, default=TORCH_DEFAULT_TIMEOUT_S,
                    help="init_process_group timeout in seconds (torch's default: 1800)")
    ap.add_argument("--rank-process", action="store_true", help="internal: run as one rank")
    ap.add_argument("--tag", default="", help="unused; put on every command line of the job so "
                    "that a tool can tell this job's processes from another's")
    args = ap.parse_args(argv)
    if args.rank_process:
        return rank_main(args.init_timeout)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
