"""The arguments of `runbook triage` (argparse only: `runbook triage --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_format, add_lang, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", metavar="LOG", nargs="+",
                        help="the logs to read, plain or gzip: files, directories of rank or node "
                             "logs (read whole), or '-' for stdin")
    parser.add_argument("--top", type=positive_int, default=10, metavar="N",
                        help="show the N best matches (default 10)")
    add_format(parser)
    add_lang(parser)
