"""The arguments of `runbook search` (argparse only: `runbook search --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_format, add_lang, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="+", metavar="QUERY",
                        help="words to look for, in English or Chinese (e.g. 'NCCL timeout', 显存不足)")
    parser.add_argument("--top", type=positive_int, default=10, metavar="N",
                        help="show the N best results (default 10)")
    add_format(parser)
    add_lang(parser)
