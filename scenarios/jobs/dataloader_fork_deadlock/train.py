#!/usr/bin/env python3
"""Scenario `dataloader_fork_deadlock`: a DataLoader worker forked while a lock was held, mid-run.

A small text classifier trained on CPU (needs `torch`): an EmbeddingBag over word ids and a linear
layer, batches from a `torch.utils.data.DataLoader` with two worker processes and
`persistent_workers=False` (the default), so the workers are forked anew at the start of every
epoch. The dataset tokenises through a `TokenCache` shared by the whole process: a dict guarded by
a `threading.Lock`, the way tokenizer and image-decoder caches are.

Epoch 1 trains (`epoch 1 | step N | loss X | ... samples/s`, about every 0.25 s / speed). At the
end of the epoch the job saves a snapshot of the cache on a background thread (asynchronously, so
training goes on): the thread holds the cache's lock while it writes the snapshot (2 s). The next
epoch's iterator forks its workers meanwhile. `fork` copies the lock in its held state but not the
thread that holds it, so in the children nobody will ever release it: each worker's first
`TokenCache.lookup` blocks forever on a futex (state S, wchan futex_wait_queue), and the main
thread waits in the DataLoader for a batch that never comes (`_next_data` -> `_get_data`, polling
every 5 s; the workers are alive and `timeout=0`, so it never gives up). The log stops after
`epoch 2 | started` and the last step of epoch 1.

The start method is `fork` (Linux's default before Python 3.14, and what most training code
gets); with `spawn` or `forkserver` the workers start with a fresh, free lock and the job trains on.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import say  # noqa: E402

STEPS_PER_EPOCH = 24
BATCH_SIZE = 8
STEP_S = 0.25  # per step, at speed 1
SNAPSHOT_S = 2.0  # the cache snapshot holds the lock this long
VOCAB = 4096
COMMON_WORDS = ("the of and to in is was for on that with as by at from it his an were are which this be or "
         "has had first one their its new after but who not they have her she two been other when "
         "there all during into school time may years more most only over city some world")


class TokenCache:
    """word -> id, shared by the dataset and the snapshot thread; one lock guards it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[str, int] = {}

    def lookup(self, word: str) -> int:
        with self._lock:  # a worker forked while the snapshot held it waits here forever
            if word not in self._ids:
                self._ids[word] = 1 + zlib.crc32(word.encode()) % (VOCAB - 1)
            return self._ids[word]

    def snapshot(self, path: str, holding: threading.Event, seconds: float) -> None:
        """Write the cache to `path`, holding the lock throughout (a consistent copy)."""
        with self._lock:
            holding.set()
            time.sleep(seconds)  # a slow disk: the lock stays taken meanwhile
            with open(path, "w") as fh:
                json.dump(self._ids, fh)


CACHE = TokenCache()


def make_dataset(size: int):
    import torch

    class Sentences(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return size

        def __getitem__(self, index: int):
            rng = random.Random(index)
            vocabulary = COMMON_WORDS.split()
            words = [rng.choice(vocabulary) for _ in range(rng.randint(8, 24))]
            ids = [CACHE.lookup(word) for word in words]
            return torch.tensor(ids, dtype=torch.long), index % 2

    return Sentences()


def collate(samples: list):
    """EmbeddingBag input: the ids concatenated, with each sentence's offset."""
    import torch

    lengths = [len(ids) for ids, _ in samples]
    offsets = torch.tensor([0] + lengths[:-1]).cumsum(0)
    return torch.cat([ids for ids, _ in samples]), offsets, torch.tensor([label for _, label in samples])


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="faster steps when > 1")
    ap.add_argument("--epochs", type=int, default=100)
    args = ap.parse_args(argv)
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    embed, head = torch.nn.EmbeddingBag(VOCAB, 32), torch.nn.Linear(32, 2)
    optim = torch.optim.SGD(list(embed.parameters()) + list(head.parameters()), lr=0.5)
    loader = torch.utils.data.DataLoader(
        make_dataset(STEPS_PER_EPOCH * BATCH_SIZE), batch_size=BATCH_SIZE, num_workers=2,
        collate_fn=collate, persistent_workers=False, multiprocessing_context="fork")
    snapshot_dir = os.path.abspath("token_cache")  # in the job's working directory
    os.makedirs(snapshot_dir, exist_ok=True)
    say(f"[train] pid {os.getpid()}: text classifier on CPU, DataLoader num_workers=2 "
        f"persistent_workers=False start_method=fork, {STEPS_PER_EPOCH} steps an epoch")
    step, began = 0, time.monotonic()
    for epoch in range(1, args.epochs + 1):
        say(f"epoch {epoch} | started")
        for ids, offsets, labels in loader:  # epoch 2: the main thread waits here, in _next_data
            loss = torch.nn.functional.cross_entropy(head(embed(ids, offsets)), labels)
            optim.zero_grad()
            loss.backward()
            optim.step()
            step += 1
            time.sleep(STEP_S / args.speed)
            rate = step * BATCH_SIZE / max(time.monotonic() - began, 1e-6)
            say(f"epoch {epoch} | step {step} | loss {loss.item():.4f} | {rate:.1f} samples/s")
        # Save the cache asynchronously; the next epoch starts (and forks) while it writes. The
        # event only makes the race certain for the test: in the wild the timing decides.
        holding = threading.Event()
        path = os.path.join(snapshot_dir, f"epoch{epoch}.json")
        threading.Thread(target=CACHE.snapshot, args=(path, holding, SNAPSHOT_S), name="cache-snapshot",
                         daemon=True).start()
        holding.wait()
        say(f"epoch {epoch} | done, saving token cache snapshot to {path} (background thread)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
