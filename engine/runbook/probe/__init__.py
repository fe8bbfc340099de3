"""The probe: the code that runs ON a node.

It reads one JSON request on stdin, runs one check, and prints one JSON answer
on stdout. Standard library only at import time, so it runs in any Python 3.8+
that a node has, the training environment's included. The same probe serves
the local, SSH and Ray transports.

Request:  {"check": "gpu", "with": {...}, "timeout": 5.0}
Answer:   {"probe": "runbook-probe/1", "result": {...}, "duration_s": 0.12}
      or  {"probe": "runbook-probe/1", "error": "one line", "duration_s": 0.01}
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

PROBE_PROTOCOL = "runbook-probe/1"


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Run the check a request names and wrap its result (or its error) in an answer."""
    from runbook.checks import CHECK_TYPES, load_check
    from runbook.checks.base import CheckContext

    start = time.monotonic()
    answer: dict[str, Any] = {"probe": PROBE_PROTOCOL}
    name = request.get("check")
    if name not in CHECK_TYPES:
        answer["error"] = f"unknown check type {name!r} (this node's probe knows {sorted(CHECK_TYPES)})"
        return answer
    timeout = float(request.get("timeout") or 10.0)
    ctx = CheckContext(deadline=start + timeout)
    params = dict(request.get("with") or {})
    answer.update(_run_bounded(lambda: load_check(name).run(params, ctx), timeout))
    answer["duration_s"] = round(time.monotonic() - start, 4)
    return answer


def _run_bounded(run: Callable[[], dict[str, Any]], timeout: float) -> dict[str, Any]:
    """{"result": ...} or {"error", "traceback"}; a check still running at its timeout is a
    finding, `timed_out`, even when it is stuck in a system call no signal interrupts (a read on
    a dead NFS mount, a /proc entry of a process stuck in the kernel): it is left behind, in a
    daemon thread, and the answer goes back on time."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            result = run()
            result.setdefault("timed_out", False)
            box["result"] = result
        except Exception as exc:  # a check bug on one node must not lose the others
            box["error"] = f"{type(exc).__name__}: {exc}"
            box["traceback"] = traceback.format_exc(limit=8)

    thread = threading.Thread(target=target, name="check", daemon=True)
    thread.start()
    thread.join(timeout)
    if not thread.is_alive():
        return box
    from runbook.checks.base import ACTIVE_GROUPS, kill_process_group

    for group in list(ACTIVE_GROUPS):  # the commands it started, if it was waiting on one
        kill_process_group(group)
    return {"result": {"timed_out": True,
                       "reason": f"the check did not return within {timeout:g}s: a read or system call "
                                 "hangs (a dead network mount, a stuck /proc entry or device)"}}


def _stop_on_signal(signum: int, _frame: object) -> None:
    """SIGTERM/SIGHUP from a transport: kill the check's commands, then go."""
    from runbook.checks.base import ACTIVE_GROUPS, kill_process_group

    for group in list(ACTIVE_GROUPS):
        kill_process_group(group)
    os._exit(128 + signum)


def serve(stop_at_eof: bool = False) -> int:
    """`--serve`: one JSON request per line on stdin, one JSON answer per line on stdout.

    A transport keeps one probe per node for a whole run this way, paying for one
    Python start instead of one per check. It ends at end of input. With `--stop-at-eof`
    (the SSH transport) the end of input also stops a check under way, with the commands it
    started: the transport closes its end (or its connection drops) when it no longer wants
    the answer, so a Ctrl-C needs no second connection to kill what runs on the node.
    """
    if stop_at_eof:
        return _serve_until_eof()
    for line in sys.stdin:
        _answer(line)
    return 0


def _answer(line: str) -> None:
    if not line.strip():
        return
    try:
        answer = handle(json.loads(line))
    except ValueError as exc:
        answer = {"probe": PROBE_PROTOCOL, "error": f"bad request: {exc}"}
    sys.stdout.write(json.dumps(answer, default=str) + "\n")
    sys.stdout.flush()


def _serve_until_eof() -> int:
    """Requests are read by a thread of their own, so the end of input is seen mid-check."""
    import queue

    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            lines.put(line)
        _stop_on_signal(0, None)  # kills the running check's commands and exits (status 128)

    threading.Thread(target=read, name="stdin", daemon=True).start()
    while True:  # ends in read(), at the end of input
        _answer(lines.get())


def main() -> int:
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _stop_on_signal)
    if "--serve" in sys.argv[1:]:
        return serve(stop_at_eof="--stop-at-eof" in sys.argv[1:])
    try:
        request = json.loads(sys.stdin.read() or "{}")
    except ValueError as exc:
        print(json.dumps({"probe": PROBE_PROTOCOL, "error": f"bad request: {exc}"}))
        return 2
    answer = handle(request)
    sys.stdout.write(json.dumps(answer, default=str))
    sys.stdout.flush()
    return 0
