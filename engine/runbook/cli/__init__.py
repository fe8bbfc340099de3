"""`runbook` command line: builds the parser and dispatches; each subcommand is one room.

This folder is a list of commands. Each is a package named for its command (`list_cmd/` for
`list`: its docstring says why), laid out the same way:

    run/__init__.py    a docstring and nothing more: `args.py` is imported through it
    run/args.py        add_arguments(parser), importing argparse and common_args.py only
    run/command.py     run(args) -> int, importing what it needs inside `run`
    run/slurm_ended.py the helpers that only this command uses

The modules beside the rooms are shared by several commands: `common_args.py` (arguments),
`interrupts.py` and `crash.py` (Ctrl-C and the crash log, for `main`), `library_warnings.py`
and `resolve.py` (ID@VERSION). One package per command,
rather than an `args/` folder holding every parser, keeps a command's parts in one place;
adding a command is one room and one line in `COMMANDS`.

`runbook`, `runbook --help` and `runbook --version` are answered before argparse is even
imported (on Python 3.11 it costs as much as starting the interpreter), and a subcommand's
parser gets only that subcommand's arguments (its `args.py`); the subcommand imports what it
needs when it runs (its `command.py`).
"""

from __future__ import annotations

import importlib
import sys

from runbook import __version__

TYPE_CHECKING = False  # typing itself costs a tenth of `runbook --help`
if TYPE_CHECKING:
    import argparse

# subcommand -> (its room: the package holding command.py and args.py, one-line help)
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
    "alerts": ("runbook.cli.alerts", "alerts serve: diagnose each alert Alertmanager sends, read-only"),
    "ssh-masters": ("runbook.cli.ssh_masters", "list the SSH connections kept open for reuse "
                    "(--ssh-persist); --stop ends them"),
    "mcp": ("runbook.cli.mcp", "serve the runbooks as tools to an on-call assistant (MCP; read-only "
            "by default)"),
}


DESCRIPTION = ("Diagnose hung, crashed or slow distributed training with declarative runbooks "
               "(English / 中文).")
EPILOG = "Example: runbook run training-hang --set log=train.log"


def build_parser(only: str | None = "") -> argparse.ArgumentParser:
    """The whole parser; with `only`, the arguments of that subcommand alone (None: of none),
    which is all one command line needs."""
    import argparse

    parser = argparse.ArgumentParser(prog="runbook", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"runbook {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (room, help_text) in COMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if only == "" or only == name:
            _arguments(room)(sub_parser)
    return parser


def top_level_help() -> str:
    """What `runbook --help` prints: the commands and the two options, in argparse's layout."""
    width = max(len(name) for name in COMMANDS) + 2
    commands = "\n".join(f"    {name.ljust(width)}{help_text}" for name, (_, help_text) in COMMANDS.items())
    return (f"usage: runbook [-h] [--version] COMMAND ...\n\n{DESCRIPTION}\n\npositional arguments:\n"
            f"  COMMAND\n{commands}\n\noptions:\n  -h, --help  show this help message and exit\n"
            f"  --version   show program's version number and exit\n\n{EPILOG}\n")


def _answered_without_argparse(argv: list[str]) -> int | None:
    """The exit status of a command line that needs no parser (help, version), else None."""
    if argv in ([], ["-h"], ["--help"]):
        print(top_level_help(), end="")
        return 0 if argv else 2
    if argv == ["--version"]:
        print(f"runbook {__version__}")
        return 0
    return None


def _command_in(argv: list[str]) -> str | None:
    """The subcommand a command line names: the first word that is not an option."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def _arguments(room: str):  # type: ignore[no-untyped-def]
    """The `add_arguments` of a subcommand's `args.py` (these modules import only argparse)."""
    return importlib.import_module(room + ".args").add_arguments


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    answered = _answered_without_argparse(words)
    if answered is not None:
        return answered
    parser = build_parser(only=_command_in(words))
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    import threading

    from runbook.cli.interrupts import INTERRUPTED_EXIT, leave_promptly, stop_signals

    module = importlib.import_module(COMMANDS[args.command][0] + ".command")
    before = set(threading.enumerate())
    with stop_signals():
        code = _run(module, args, argv)
        if code == INTERRUPTED_EXIT:
            leave_promptly(before, as_program=argv is None)
    return code


def _run(module: object, args: argparse.Namespace, argv: list[str] | None) -> int:
    from runbook.cli.interrupts import INTERRUPTED_EXIT, interrupt_reason

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
