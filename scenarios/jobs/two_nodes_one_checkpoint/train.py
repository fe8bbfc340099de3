#!/usr/bin/env python3
"""Scenario `two_nodes_one_checkpoint` (#29): every node's local rank 0 saves to one shared path.

Needs `torch`. Started as one process, the "job", like a launcher for two nodes of two GPUs: it
starts four ranks (this file with `--rank N`, torch.distributed on gloo, CPU) with
GROUP_RANK/NODE_RANK 0 or 1 and LOCAL_RANK 0 or 1, all in one directory, which plays the
shared file system both nodes mount: writes to it go at `SHARED_FS_BYTES_PER_S` (8 MB/s, a busy
NFS server), so a save of the 4 MB model takes about half a second.

The ranks train a small model with averaged gradients (`dist.all_reduce`), so every rank holds the
same weights. At `--save-every` steps the training script saves the way many scripts do, guarded
by `LOCAL_RANK == 0` instead of the global rank: `torch.save(state, "ckpt/tmp.pt")` then
`os.replace("ckpt/tmp.pt", "ckpt/last.pt")`. Rank 0 (node 0) and rank 2 (node 1) both do it at
once: both write the one tmp.pt, the first to finish renames it, and the other's `os.replace`
fails with `FileNotFoundError: [Errno 2] No such file or directory: 'ckpt/tmp.pt' ->
'ckpt/last.pt'`. That rank dies with the traceback; the launcher, like torchrun, stops the others
and exits 1. Each save line names its node and rank (`node1: [rank2]: saving checkpoint to ...`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import die_with_parent as _die_with_parent  # noqa: E402
from _helpers import free_port as _free_port
from _helpers import say

NODES = 2
PER_NODE = 2
CKPT = "ckpt"
WIDTH = 512  # 4 layers of 512x512 floats: 4 MB to save
SHARED_FS_BYTES_PER_S = 8 * 1024 * 1024
JOB_TIMEOUT_S = 600


class SharedFile:
    """A file on the emulated shared storage: opened at once, written at its bandwidth."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close(); torch.save writes through it

    def write(self, data) -> int:
        time.sleep(len(data) / SHARED_FS_BYTES_PER_S)
        return self._file.write(data)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def save(torch, state: dict, path: str) -> None:
    """The training script's save: to a temporary name, then renamed over the last one."""
    tmp = os.path.join(os.path.dirname(path), "tmp.pt")
    target = SharedFile(tmp)
    try:
        torch.save(state, target)
    finally:
        target.close()
    os.replace(tmp, path)


def rank_main(args: argparse.Namespace) -> int:
    _die_with_parent()
    import datetime

    import torch
    import torch.distributed as dist

    node, local_rank = int(os.environ["GROUP_RANK"]), int(os.environ["LOCAL_RANK"])
    dist.init_process_group("gloo", rank=args.rank, world_size=NODES * PER_NODE,
                            timeout=datetime.timedelta(seconds=120))
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(4)])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(args.rank)
    tag = f"node{node}: [rank{args.rank}]:"
    say(f"{tag} started (GROUP_RANK={node} LOCAL_RANK={local_rank} WORLD_SIZE={NODES * PER_NODE})")
    for step in range(1, args.steps + 1):
        x = torch.randn(8, WIDTH, generator=gen)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        for param in model.parameters():
            dist.all_reduce(param.grad)
            param.grad /= NODES * PER_NODE
        optimizer.step()
        if args.rank == 0:
            say(f"step {step} | loss {loss.item():.5f}")
        if step % args.save_every == 0 and local_rank == 0:  # the bug: once per node, not once
            os.makedirs(CKPT, exist_ok=True)
            path = os.path.join(CKPT, "last.pt")
            say(f"{tag} saving checkpoint to {path} (step {step})")
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
            save(torch, state, path)
            say(f"{tag} saved {path}")
        dist.barrier()
        time.sleep(0.1 / args.speed)
    dist.destroy_process_group()
    return 0


def job(args: argparse.Namespace) -> int:
    port = str(_free_port())
    procs = []
    for rank in range(NODES * PER_NODE):
        node, local = divmod(rank, PER_NODE)
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                   LOCAL_RANK=str(local), GROUP_RANK=str(node), NODE_RANK=str(node),
                   WORLD_SIZE=str(NODES * PER_NODE), LOCAL_WORLD_SIZE=str(PER_NODE),
                   GLOO_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1")
        argv = [sys.executable, os.path.abspath(__file__), "--rank", str(rank), "--steps", str(args.steps),
                "--save-every", str(args.save_every), "--speed", f"{args.speed:g}"]
        procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL))
    say(f"[launcher] {NODES} nodes x {PER_NODE} ranks on one shared directory (MASTER_PORT={port}): "
        f"pids {' '.join(str(p.pid) for p in procs)}")
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            rank, code = failed[0]
            say(f"[launcher] rank {rank} (pid {procs[rank].pid}) exited with status {code}: "
                "stopping the other ranks")
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
            for proc in procs:
                proc.wait()
            return 1
        if all(c == 0 for c in codes):
            say("[launcher] all ranks finished")
            return 0
        time.sleep(0.2)
    for proc in procs:
        proc.kill()
    return 1


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="steps come faster when > 1")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--save-every", type=int, default=4)
    ap.add_argument("--rank", type=int, default=None, help="internal: run one rank")
    args = ap.parse_args(argv)
    return rank_main(args) if args.rank is not None else job(args)


if __name__ == "__main__":
    sys.exit(main())
