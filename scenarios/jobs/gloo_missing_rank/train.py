#!/usr/bin/env python3
"""Scenario `gloo_missing_rank`: a 4-rank job started on three hosts waits for the fourth.

One rank of a real torch.distributed job on CPU (gloo; needs `torch`), one rank per host:
RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT come from the environment. Start ranks 0, 1 and
3 on three hosts and nothing on the host meant for rank 2 (its node was left out of the
launch, or its launcher died): the three wait in `dist.init_process_group` for rank 2 forever
(gloo timeout 1 h): rank 0 holds the TCPStore and waits for its fourth client, ranks 1 and 3
wait for rank 2's store keys. State S, no CPU to speak of. They never issue a collective, so
there is no flight record to dump. With all four ranks started it trains normally (a log
line per step).

Scenario `gloo_lone_rank` runs this same program as rank 0 of a 2-rank job (RANK=0,
WORLD_SIZE=2) started alone on its host: it holds the TCPStore on MASTER_ADDR:MASTER_PORT and
waits in `init_process_group` for rank 1, which is never started.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../../..")))  # the repository root
from scenarios.jobs import _gloo_job as job  # noqa: E402  (the repository root is on sys.path now)


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="faster steps when > 1")
    args = ap.parse_args(argv)
    rank, world = job.rank_env()
    job.init(rank, world)  # ranks 0, 1, 3 wait here for rank 2
    job.train_forever(rank, world, args.speed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
