"""Checks sent to many nodes: one queue of work, a fixed set of threads, no future per check.

The walk hands over each group of nodes that get the same request at once (`send`). A
transport that batches by itself (`run_many`, see transports/__init__.py), directly or as the
one transport NodeTransports has for the whole group (`batcher`), gets the whole group in one
call, drained on one of these threads; any other is asked node by node by these threads.
Every answer lands on the caller's queue as `(tag, answer)`, in the order they come.

The threads are daemons and `close` drops the work not started: a check that hangs (or a run
stopped by Ctrl-C) never holds the process; the transports' own close() stops what runs.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from queue import Empty, SimpleQueue
from typing import Any

from runbook.transports import Node, ProbeAnswer, Transport, own_request, run_many

Answers = SimpleQueue  # of (tag, ProbeAnswer)
_STOP = None


class CheckPool:
    """`threads` threads running checks, started on first use and reused by every round."""

    def __init__(self, threads: int) -> None:
        self.size = max(1, threads)
        self._work: SimpleQueue[tuple[Any, ...] | None] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        # work items sent and not yet done: the threads wanted, never more (a thread's stack is
        # address space, and under a tight RLIMIT_AS idle threads are what runs out first)
        self._pending = 0
        self._count = threading.Lock()

    def send(self, transport: Transport, nodes: Sequence[Node], request: dict[str, Any], timeout: float,
             tags: Sequence[int], answers: Answers) -> None:
        """Ask every node in `nodes` for `request`; node i's answer is put as (tags[i], answer)."""
        batcher = _batcher(transport, nodes)
        self._start(1 if batcher is not None else len(nodes))
        if batcher is not None:
            self._work.put((_drain, batcher, nodes, request, timeout, tags, answers))
            return
        put = self._work.put
        for node, tag in zip(nodes, tags, strict=True):
            put((None, transport, node, request, timeout, tag, answers))

    def close(self) -> None:
        """Drop the work not started and let every thread end after its current check."""
        try:
            while True:
                self._work.get_nowait()
        except Empty:
            pass
        for _ in self._threads:
            self._work.put(_STOP)

    def _start(self, items: int) -> None:
        with self._count:
            self._pending += items
            wanted = min(self.size, self._pending)
        while len(self._threads) < wanted:
            thread = threading.Thread(target=self._serve, name=f"runbook-check-{len(self._threads)}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self) -> None:
        get = self._work.get
        while True:
            work = get()
            if work is _STOP:
                return
            batch, transport, node, request, timeout, tag, answers = work
            if batch is not None:
                batch(transport, node, request, timeout, tag, answers)
                self._done()
                continue
            try:
                answer = transport.run_check(node, own_request(request), timeout)
            except Exception as exc:  # a transport's bug is this node's error, never the walk's end
                answer = ProbeAnswer("error", error=f"{type(exc).__name__}: {exc}")
            self._done()  # before the answer lands: the walk's next round may ask at once
            answers.put((tag, answer))

    def _done(self) -> None:
        with self._count:
            self._pending -= 1


def _batcher(transport: Transport, nodes: Sequence[Node]) -> Transport | None:
    """What answers `nodes` as a group: the transport itself when it has `run_many`, or the one
    transport a dispatcher (NodeTransports) has for all of them when that one has it."""
    if getattr(transport, "run_many", None) is not None:
        return transport
    batcher = getattr(transport, "batcher", None)
    try:
        return batcher(nodes) if batcher is not None else None
    except Exception:  # a transport that cannot be made: each node's check says so, node by node
        return None


def _drain(transport: Transport, nodes: Sequence[Node], request: dict[str, Any], timeout: float,
           tags: Sequence[int], answers: Answers) -> None:
    """A batching transport's answers, passed on as they come; the nodes it never answered get an
    error each, so the walk decides them instead of waiting for the deadline."""
    pending = set(range(len(nodes)))
    try:
        for index, answer in run_many(transport, nodes, request, timeout):
            if index in pending:
                pending.discard(index)
                answers.put((tags[index], answer))
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    else:
        error = "the transport gave no answer for this node"
    for index in sorted(pending):
        answers.put((tags[index], ProbeAnswer("error", error=error)))
