import argparse

from runbook.cli.common_args import add_lang, add_node_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="runbook id, e.g. training-hang")
    add_node_args(parser)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                        help="a runbook parameter, e.g. --set log=train.log (repeatable)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--output", "-o", help="write the report to this file")
    add_lang(parser)
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="deadline for the whole run in seconds (default 300)")
