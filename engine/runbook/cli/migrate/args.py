"""The arguments of `runbook migrate` (argparse only: `runbook migrate --help` imports no more)."""

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", help="runbook files or directories "
                        "(default: the search path)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="change nothing; exit 1 when a file needs migrating (for CI)")
    mode.add_argument("--diff", action="store_true",
                      help="print a unified diff of each change instead of writing it")
