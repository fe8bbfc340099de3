"""`runbook` command line: builds the parser and dispatches; each subcommand is one module.

Only argparse is imported here, so `runbook --help` starts fast; a subcommand
imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys

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
    "triage": ("runbook.cli.triage", "rank the runbooks a log points to, from their log signatures"),
    "search": ("runbook.cli.search", "search runbooks and knowledge-base articles (English or 中文)"),
    "site": ("runbook.cli.site", "build or preview the bilingual static site (site build | site serve)"),
    "collect": ("runbook.cli.collect", "gather a redacted diagnosis bundle (.tar.gz) from every node"),
}


def build_parser() -> argparse.ArgumentParser:
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
        _arguments(module_name)(sub_parser)
    return parser


def _arguments(module_name: str):  # type: ignore[no-untyped-def]
    """The `add_arguments` of a subcommand module (these modules import only argparse)."""
    return importlib.import_module(module_name + "_args").add_arguments


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        print("runbook: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a crash the user did not cause: leave a log to paste
        from runbook.cli.crash import write_crash_log

        path = write_crash_log(exc, argv if argv is not None else sys.argv[1:])
        print(f"runbook: internal error: {type(exc).__name__}: {exc}\n"
              f"runbook: a log for a bug report is in {path}", file=sys.stderr)
        return 2
