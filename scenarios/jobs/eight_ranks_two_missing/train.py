#!/usr/bin/env python3
"""Scenario `eight_ranks_two_missing`: ranks prepare their data shards while two ranks never come.

One rank of a real 8-rank torch.distributed job on CPU (gloo; needs `torch`), one rank per host:
RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT come from the environment, as a multi-node launcher
gives them. The test starts ranks 0-5 on node01-node06 and none on node07 and node08 (node07 runs
nothing, node08 is down): ranks 6 and 7 are missing, but nothing shows it yet, because a rank
first prepares its data shard, which needs no peer, and only then calls `init_process_group`.

Preparing the shard: a real `torch.utils.data.DataLoader` (num_workers=1, batch_size 4) over the
shard's documents, files written at start to WORKDIR/data/shard_RR/part-NNNNN.txt. Its worker
process reads each document (at a bounded rate, as from remote storage: 0.125 s / speed a
document) and tokenises it (words hashed into a 32k vocabulary); the main process counts the
batches and logs a progress line for each, about every 0.5 s / speed:

    rank 2/8 | preparing data shard 2 | step 17 | documents 72 | tokens 5,184 | 7.9 docs/s

Rank 3's shard has a part that never arrives: `part-00002.txt` is a FIFO nobody writes (a file on
a network mount that stopped answering). Its DataLoader worker opens it and sleeps in open()
forever (state S, wchan `wait_for_partner`); the main thread waits for that worker's batch in the
DataLoader (`_next_data` -> `_get_data`, polling the worker's queue every 5 s; the worker is alive,
so it never gives up), and rank 3's log stops after its first two parts (4 progress lines). The
other ranks' logs keep moving for `--documents` documents (default 20000: 40 min / speed); then
a rank would join the process group (it would wait there for ranks 6 and 7) and train.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import zlib

sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../../..")))  # the repository root
from scenarios.jobs import _gloo_job as job  # noqa: E402  (the repository root is on sys.path now)
from scenarios.jobs._helpers import say  # noqa: E402

STALLED_RANK = 3
STALLED_PART = 2  # rank 3's part that never arrives
PARTS = 16
DOCS_PER_PART = 8
BATCH_SIZE = 4
READ_S = 0.125  # per document, at speed 1: a batch of 4 about every 0.5 s
VOCAB = 32768
COMMON_WORDS = ("the of and to in is was for on that with as by at from it his an were are which this "
         "be or has had first one their its new after but who not they have her she two been "
         "other when there all during into school time may years more most only over city some "
         "world would where later up such used many can state about national out known "
         "university united then made")


def write_shard(rank: int, folder: str) -> list[str]:
    """The shard's part files (8 short documents a line each); for the stalled rank one of them is
    a FIFO nobody writes. Returns their paths, in order."""
    os.makedirs(folder, exist_ok=True)
    rng, words = random.Random(rank), COMMON_WORDS.split()
    paths = []
    for part in range(PARTS):
        path = os.path.join(folder, f"part-{part:05d}.txt")
        paths.append(path)
        if os.path.lexists(path):
            os.remove(path)  # a FIFO or a part of an earlier start
        if rank == STALLED_RANK and part == STALLED_PART:
            os.mkfifo(path)  # open() for reading blocks until a writer comes: none ever does
            continue
        docs = [" ".join(rng.choice(words) for _ in range(rng.randint(40, 120)))
                for _ in range(DOCS_PER_PART)]
        with open(path, "w") as fh:
            fh.write("\n".join(docs) + "\n")
    return paths


def tokenise(text: str) -> list[int]:
    """Words hashed into the vocabulary (ids from 1; 0 pads)."""
    return [1 + zlib.crc32(word.encode()) % (VOCAB - 1) for word in text.lower().split()]


def make_dataset(paths: list[str], documents: int, speed: float):
    """A map-style Dataset over the shard's documents, cycling over its parts."""
    import torch

    class ShardDataset(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return documents

        def __getitem__(self, index: int):
            part = paths[(index // DOCS_PER_PART) % len(paths)]
            time.sleep(READ_S / speed)  # remote storage, read at a bounded rate
            with open(part) as fh:  # rank 3's FIFO part: its worker sleeps here forever
                text = fh.read().splitlines()[index % DOCS_PER_PART]
            return torch.tensor(tokenise(text), dtype=torch.int32)

    return ShardDataset()


def pad(samples: list):
    """Collate documents of different lengths into one [batch, longest] tensor (0 pads)."""
    import torch

    return torch.nn.utils.rnn.pad_sequence(samples, batch_first=True, padding_value=0)


def prepare_shard(rank: int, world: int, paths: list[str], documents: int, speed: float) -> None:
    """Read and tokenise the shard through a DataLoader with one worker; a line per batch."""
    import torch

    loader = torch.utils.data.DataLoader(make_dataset(paths, documents, speed), batch_size=BATCH_SIZE,
                                         num_workers=1, collate_fn=pad)
    began, done, tokens = time.monotonic(), 0, 0
    for step, batch in enumerate(loader):  # rank 3's main thread waits here, in _next_data
        done += batch.shape[0]
        tokens += int((batch != 0).sum())
        rate = done / max(time.monotonic() - began, 1e-6)
        say(f"rank {rank}/{world} | preparing data shard {rank} | step {step} | documents {done} | "
            f"tokens {tokens:,} | {rate:.1f} docs/s")
    say(f"rank {rank}/{world} | data shard {rank} ready: {done} documents, {tokens:,} tokens")


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="faster reading and steps when > 1")
    ap.add_argument("--documents", type=int, default=20000, help="documents in a shard")
    args = ap.parse_args(argv)
    rank, world = job.rank_env()
    paths = write_shard(rank, os.path.join("data", f"shard_{rank:02d}"))
    say(f"rank {rank}/{world} (host {os.uname()[1]}, pid {os.getpid()}): preparing data shard {rank} "
        f"({PARTS} parts x {DOCS_PER_PART} documents, DataLoader num_workers=1 batch_size={BATCH_SIZE}) "
        f"before init_process_group(backend=gloo, MASTER_ADDR={os.environ.get('MASTER_ADDR')} "
        f"MASTER_PORT={os.environ.get('MASTER_PORT')})")
    prepare_shard(rank, world, paths, args.documents, args.speed)
    job.init(rank, world)  # with ranks 6 and 7 missing, the ranks would wait here
    job.train_forever(rank, world, args.speed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
