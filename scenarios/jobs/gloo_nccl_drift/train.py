#!/usr/bin/env python3
"""Scenario `gloo_nccl_drift`: one host's NCCL settings differ, and every rank hangs alike.

One rank of a real torch.distributed job on CPU (gloo; needs `torch`), one rank per host:
RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT come from the environment, and the NCCL_*
settings the host's launch script exported. On a GPU cluster, a node launched with other
NCCL transport settings than its peers (NCCL_IB_DISABLE=1 there, InfiniBand elsewhere;
NCCL_SOCKET_IFNAME naming an interface the others do not use) makes the first collective wait
on every rank: each side waits for peers on a transport the other side never opens, and every
rank's stack looks the same.

On CPU the scenario reproduces that with gloo: every rank creates the same two process groups
(one per transport, all four ranks in each) and runs its gradient all_reduce on the group of
the transport its own NCCL_* settings select: `socket` where NCCL_IB_DISABLE=1 or
NCCL_SOCKET_IFNAME is not `lo`, else `ib`. The rank on the host whose settings differ waits
in `dist.all_reduce` on one group, the others in `dist.all_reduce` on the other: all four wait
at the same line of the same function, forever (gloo timeout 1 h), no CPU burnt. Only the
ranks' settings tell the hosts apart. With the same settings everywhere it trains normally (a
log line per step).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../../..")))  # the repository root
from scenarios.jobs import _gloo_job as job  # noqa: E402  (the repository root is on sys.path now)
from scenarios.jobs._helpers import say  # noqa: E402


def transport() -> str:
    """The transport this rank's NCCL settings select."""
    if os.environ.get("NCCL_IB_DISABLE", "0") not in ("", "0"):
        return "socket"
    return "ib" if os.environ.get("NCCL_SOCKET_IFNAME", "lo") == "lo" else "socket"


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="faster steps when > 1")
    args = ap.parse_args(argv)
    rank, world = job.rank_env()
    dist = job.init(rank, world)
    groups = {"ib": dist.new_group(backend="gloo", timeout=job.GLOO_TIMEOUT, group_desc="transport_ib"),
              "socket": dist.new_group(backend="gloo", timeout=job.GLOO_TIMEOUT,
                                       group_desc="transport_socket")}
    mine = transport()
    say(f"rank {rank} transport {mine} (NCCL_IB_DISABLE={os.environ.get('NCCL_IB_DISABLE', 'unset')} "
        f"NCCL_SOCKET_IFNAME={os.environ.get('NCCL_SOCKET_IFNAME', 'unset')})")
    trainer = job.Trainer(rank, world)
    watchdog = job.Watchdog(rank)
    step = 0
    while True:
        x, y = trainer.batch()
        loss = trainer.backward(x, y)
        flat = trainer.flat_grad()
        dist.all_reduce(flat, group=groups[mine])  # every rank waits here when transports differ
        trainer.apply(flat)
        say(f"rank {rank} step {step} loss {loss.item():.4f}")
        watchdog.beat()
        step += 1
        time.sleep(0.3 / args.speed)


if __name__ == "__main__":
    sys.exit(main())
