"""Loading many runbook files: from the load cache where it has them, the rest in parallel.

A file is read and hashed (both cheap); the cache (library/cache.py) gives back what loading
it gave before, or it is parsed and checked now and the result stored. Many files to check
(more than PARALLEL_MIN) are checked in worker processes, one per core: YAML parsing and
schema validation are pure Python and hold the GIL. Results come back in file order, the
same as a serial load gives.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from runbook.format.loader import (
    LoadResult,
    file_digest,
    load_text,
    positions_snapshot,
    read_source,
    restore,
    restore_positions,
    snapshot,
)
from runbook.library.cache import Snapshot, Store

PARALLEL_MIN = 50  # files to check below which worker processes cost more than they save
CHUNK = 8


@dataclass
class Source:
    """One file read: its text and digest, or the result of a file that could not be read."""

    file: str
    text: str = ""
    digest: str = ""
    failed: LoadResult | None = None


def read_sources(files: Sequence[Path]) -> list[Source]:
    out = []
    for file in files:
        read = read_source(file)
        if isinstance(read, LoadResult):
            out.append(Source(str(file), failed=read))
        else:
            out.append(Source(str(file), read[0], file_digest(read[1])))
    return out


def load_sources(sources: Sequence[Source], store: Store) -> list[LoadResult]:
    """Each source's LoadResult, in order: the cache's, or loaded now (and then cached)."""
    results: list[LoadResult | None] = []
    misses: list[int] = []
    for i, source in enumerate(sources):
        result = source.failed or store.get_result(source.file, source.digest, source.text)
        results.append(result)
        if result is None:
            misses.append(i)
    for i, result in zip(misses, check_many([sources[i] for i in misses], store), strict=True):
        results[i] = result
    return [r for r in results if r is not None]


def load_by_file(sources: Sequence[Source], store: Store) -> dict[str, LoadResult]:
    """Each source's LoadResult (as `load_sources` gives it), by file."""
    return {source.file: result for source, result in zip(sources, load_sources(sources, store), strict=True)}


def check_many(sources: Sequence[Source], store: Store) -> list[LoadResult]:
    """Parse and check each source (in worker processes when there are many) and cache it."""
    if len(sources) >= PARALLEL_MIN and (os.cpu_count() or 1) > 1:
        plains = _in_processes(sources)
        if plains is not None:
            out = []
            for source, plain in zip(sources, plains, strict=True):
                store.put_result(source.file, source.digest, plain)
                result = restore(plain[0], source.file, source.digest, partial(restore_positions, plain[1]))
                out.append(result if result is not None else _check(source))
            return out
    out = []
    for source in sources:
        result = _check(source)
        store.put_result(source.file, source.digest, result)
        out.append(result)
    return out


def _check(source: Source) -> LoadResult:
    return load_text(source.text, source.file, digest=source.digest)


def _snapshot_of(source: Source) -> Snapshot:
    """In a worker: load one file and send back its plain snapshot (the parent rebuilds it)."""
    result = _check(source)
    return snapshot(result), positions_snapshot(result)


def _in_processes(sources: Sequence[Source]) -> list[Snapshot] | None:
    """Snapshots of every source in order, or None when worker processes cannot run here."""
    # Imported here: multiprocessing is a cost every command would pay, only a big cold load needs it.
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    workers = min(os.cpu_count() or 1, max(1, len(sources) // CHUNK))
    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(_snapshot_of, sources, chunksize=CHUNK))
    except (OSError, BrokenProcessPool, RuntimeError):  # no /dev/shm, no fork: check them here
        return None
