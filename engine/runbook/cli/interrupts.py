"""Ctrl-C and SIGTERM while a command runs: the first stops it the Ctrl-C way (it writes what it
found and exits 130), a second exits at once; threads still busy never hold the exit."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

INTERRUPTED_EXIT = 130
EXIT_GRACE_S = 3.0  # after an interrupt, how long threads still busy may hold the exit
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []  # the signal that interrupted this command, once one did


def interrupt_reason() -> str:
    """What stopped the command, for the partial report: Ctrl-C or SIGTERM."""
    if _received and _received[-1] == signal.SIGTERM:
        return "interrupted (SIGTERM)"
    return "interrupted (Ctrl-C)"


def _first_signal(signum: int, _frame: object) -> None:
    """SIGINT or SIGTERM: stop the command the Ctrl-C way (it writes what it found, 130);
    from now on a second one exits at once."""
    _received.append(signum)
    for stop in _STOP_SIGNALS:
        signal.signal(stop, _second_signal)
    raise KeyboardInterrupt


def _second_signal(_signum: int, _frame: object) -> None:
    os.write(2, b"runbook: interrupted again; exiting now\n")
    os._exit(INTERRUPTED_EXIT)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Our SIGINT/SIGTERM handlers while a command runs (the main thread only: signal.signal
    refuses others), the caller's back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {stop: signal.getsignal(stop) for stop in _STOP_SIGNALS}
    _received.clear()
    for stop in _STOP_SIGNALS:
        signal.signal(stop, _first_signal)
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)


def leave_promptly(before: set[threading.Thread], as_program: bool) -> None:
    """After an interrupt the report is written: nothing more is worth waiting for. A thread
    of the command still blocked in a connect or a check must not hold the exit (Python joins
    such threads first), and run as the program, Python winding down must not meet a second
    Ctrl-C with the default handler (killed by SIGINT instead of exit 130): it ends here."""
    deadline = time.monotonic() + EXIT_GRACE_S
    mine = [t for t in threading.enumerate() if t not in before and not t.daemon]
    for thread in mine:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    if as_program or any(t.is_alive() for t in mine):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed pipe must not stop the exit
                stream.flush()
        os._exit(INTERRUPTED_EXIT)
