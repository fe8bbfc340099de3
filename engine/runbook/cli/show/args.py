"""The arguments of `runbook show` (argparse only: `runbook show --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_format, add_lang


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="runbook id (see `runbook list`; ID@VERSION pins a version), "
                        "`checks`, or check:TYPE")
    add_format(parser)
    add_lang(parser)
