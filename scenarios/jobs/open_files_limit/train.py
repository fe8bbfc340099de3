#!/usr/bin/env python3
"""Scenario `open_files_limit`: a data job runs out of file descriptors under a real `ulimit -n`.

Standard library only, one machine. The job lowers its own soft RLIMIT_NOFILE to LIMIT (64 by
default), as a container's `--ulimit nofile` or a login shell's limits.conf does, and logs it. Its
shard loader then opens every shard of the dataset and keeps them open (a memory-mapped reader
per shard does the same). Near the limit `open()` fails with EMFILE: CPython raises
`OSError: [Errno 24] Too many open files: '<shard>'`, the traceback goes to the log, and the job
stays alive holding every descriptor it got, as a loader that caught the error and waits does.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import die_with_parent, say  # noqa: E402

SHARDS = 256


def make_shards(folder: str) -> list[str]:
    """The dataset: SHARDS small files."""
    paths = []
    for shard in range(SHARDS):
        path = os.path.join(folder, f"shard-{shard:05d}.bin")
        with open(path, "wb") as fh:
            fh.write(bytes(64))
        paths.append(path)
    return paths


def open_all(paths: list[str], held: list) -> None:
    """Every shard opened and kept open in `held`; fails at the limit (EMFILE)."""
    for count, path in enumerate(paths, 1):
        held.append(open(path, "rb"))  # noqa: SIM115 - held open on purpose
        if count % 16 == 0:
            say(f"[rank 0] loader: {count}/{len(paths)} shards open")


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="accepted for uniformity")
    ap.add_argument("--limit", type=int, default=64, help="the soft limit on open files")
    args = ap.parse_args(argv)
    die_with_parent()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (args.limit, hard))
    folder = tempfile.mkdtemp(prefix="runbook-open-files-")
    paths = make_shards(folder)
    say(f"[rank 0] pid {os.getpid()}: dataset of {SHARDS} shards in {folder}; open files limit: "
        f"ulimit -n {args.limit} (hard {hard})")
    held: list = []  # the loader's open shards: they outlive the error
    try:
        open_all(paths, held)
    except OSError:
        sys.stdout.write(traceback.format_exc())  # the job's own log, as an uncaught error prints it
        sys.stdout.flush()
    while True:  # the loader caught it and waits: the process keeps its descriptors
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
