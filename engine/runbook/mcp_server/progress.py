"""Progress of a long call as MCP progress notifications: nodes done and nodes left.

The engine says when a node is done (the walk's `on_node_done` listener, an ad hoc check's
answer, a node's bundle sections); `NodeCounter` counts them; `ContextProgress` sends each count
from the engine's thread to the client through the call's context. Progress is a courtesy: a
client that asked for none, or went away, never fails the call.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

Report = Callable[[int, int, str], None]  # (done, total, message)


class NodeCounter:
    """Counts nodes as they finish; also a walk listener (run/walk.py `Listener`)."""

    def __init__(self, total: int, report: Report | None) -> None:
        self.total, self.report = total, report
        self.done = 0
        self._lock = threading.Lock()  # collect finishes nodes on several threads

    def node_done(self, name: str, what: str) -> None:
        if self.report is None:
            return
        with self._lock:
            self.done += 1
            done = self.done
        self.report(done, self.total, f"{name}: {what}; {done} done, {self.total - done} left")

    def on_step(self, outcome: Any, evidence: Any) -> None:
        pass

    def on_node_done(self, outcome: Any) -> None:
        self.node_done(outcome.node.name, outcome.conclusion.id if outcome.conclusion else outcome.status)


class ContextProgress:
    """Sends progress through an MCP call's context, from any thread. Made in the call's worker
    thread, where it learns the way back to the event loop."""

    def __init__(self, context: Any) -> None:
        import anyio.from_thread
        import anyio.lowlevel

        self.context = context
        self.token = anyio.from_thread.run_sync(anyio.lowlevel.current_token)

    def __call__(self, done: int, total: int, message: str) -> None:
        import anyio.from_thread

        # The client went away, or asked for no progress: the call goes on all the same.
        with contextlib.suppress(Exception):
            anyio.from_thread.run(self.context.report_progress, done, total, message, token=self.token)
