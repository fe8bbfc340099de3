"""Full garbage collections paused while a walk runs.

A walk over many nodes keeps every node's outcome, and the answers, lineages and decisions they
share, alive until the report: hundreds of thousands of long-lived containers. CPython's full
(oldest-generation) collection scans all of them each time the heap has grown by a quarter,
which cost a third of the walk's CPU at 30,000 nodes and found nothing to free (nothing the walk
keeps forms a cycle it drops). Young collections go on as usual, so short-lived cycles (an
exception's traceback, say) are still freed; only what survives them waits for the first full
collection after the walk. Thresholds are process-wide, so nested or concurrent walks (the MCP
server, `--watch`) share one pause and the last to finish restores them.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_NEVER = 1 << 30  # young collections between two full ones: none during the walk
_lock = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def full_collections_paused() -> Iterator[None]:
    """Within the block, only the young generations are collected."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            young, middle, _ = _saved
            gc.set_threshold(young, middle, _NEVER)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
