import argparse

from runbook.cli.common_args import add_format


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", help="runbook files or directories "
                        "(default: the search path)")
    add_format(parser)
