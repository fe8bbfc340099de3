"""The arguments of `runbook check` (argparse only: `runbook check --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_node_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("type", help="check type, e.g. gpu, process, stack (see `runbook show checks`)")
    parser.add_argument("--with", dest="withs", action="append", default=[], metavar="KEY=VALUE",
                        help="a check parameter; VALUE is read as JSON when it parses "
                        "(3, true, [\"a\"]), else as text (repeatable)")
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="the check's timeout (default: the check type's)")
    add_node_args(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")
