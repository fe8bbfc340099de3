"""The arguments of `runbook list` (argparse only: `runbook list --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_format, add_lang


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_format(parser)
    add_lang(parser)
