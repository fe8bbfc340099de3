"""`runbook` command line: builds the parser and dispatches; each subcommand is one module.

Only argparse is imported here, so `runbook --help` starts fast; a subcommand
imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

from runbook import __version__

# subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("runbook.cli.list_cmd", "list the runbooks on the search path"),
    "show": ("runbook.cli.show", "show one runbook: steps, branches, conclusions and fixes"),
    "run": ("runbook.cli.run", "walk a runbook on this machine or on many nodes"),
    "lint": ("runbook.cli.lint", "check runbook files and print every problem with its place"),
    "test": ("runbook.cli.test", "replay test cases and recorded incidents through each runbook's tree"
             " (--coverage, --replay DIR)"),
    "i18n": ("runbook.cli.i18n", "keep translations in step: i18n stamp writes English/Chinese fingerprints"),
    "migrate": ("runbook.cli.migrate", "upgrade runbook files written for an older apiVersion (in place)"),
    "new": ("runbook.cli.new", "scaffold a new runbook, its tests and its knowledge-base article"),
    "check": ("runbook.cli.check", "run one check ad hoc on nodes (like ansible -m) and print its result"),
    "triage": ("runbook.cli.triage", "name the failures logs show, causes first"),
    "search": ("runbook.cli.search", "search runbooks and knowledge-base articles (English or 中文)"),
    "site": ("runbook.cli.site", "build or preview the bilingual static site (site build | site serve)"),
    "collect": ("runbook.cli.collect", "gather a redacted diagnosis bundle (.tar.gz) from every node"),
}


def build_parser(only: str | None = "") -> argparse.ArgumentParser:
    """The whole parser; with `only`, the arguments of that subcommand alone (None: of none),
    which is all one command line needs: `runbook --help` then imports no subcommand module."""
    parser = argparse.ArgumentParser(
        prog="runbook",
        description="Diagnose hung, crashed or slow distributed training with declarative "
                    "runbooks (English / 中文).",
        epilog="Example: runbook run training-hang --set log=train.log",
    )
    parser.add_argument("--version", action="version", version=f"runbook {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if only == "" or only == name:
            _arguments(module_name)(sub_parser)
    return parser


def _command_in(argv: list[str]) -> str | None:
    """The subcommand a command line names: the first word that is not an option."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def _arguments(module_name: str):  # type: ignore[no-untyped-def]
    """The `add_arguments` of a subcommand module (these modules import only argparse)."""
    return importlib.import_module(module_name + "_args").add_arguments


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
def _stop_signals() -> Iterator[None]:
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


def _leave_promptly(before: set[threading.Thread], as_program: bool) -> None:
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(only=_command_in(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    module = importlib.import_module(COMMANDS[args.command][0])
    before = set(threading.enumerate())
    with _stop_signals():
        code = _run(module, args, argv)
        if code == INTERRUPTED_EXIT:
            _leave_promptly(before, as_program=argv is None)
    return code


def _run(module: object, args: argparse.Namespace, argv: list[str] | None) -> int:
    try:
        return int(module.run(args))  # type: ignore[attr-defined]
    except KeyboardInterrupt:
        print(f"runbook: {interrupt_reason()}", file=sys.stderr)
        return INTERRUPTED_EXIT
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a crash the user did not cause: leave a log to paste
        from runbook.cli.crash import write_crash_log

        path = write_crash_log(exc, argv if argv is not None else sys.argv[1:])
        print(f"runbook: internal error: {type(exc).__name__}: {exc}\n"
              f"runbook: a log for a bug report is in {path}", file=sys.stderr)
        return 2
