import argparse

from runbook.cli.common_args import add_lang


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="runbook id, e.g. training-hang")
    parser.add_argument("--nodes", help="nodes to diagnose (default: this machine)")
    parser.add_argument("--executor", choices=("local",), default=None,
                        help="how to reach nodes (default: local for this machine)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                        help="a runbook parameter, e.g. --set log=train.log (repeatable)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--output", "-o", help="write the report to this file")
    add_lang(parser)
    parser.add_argument("--forks", type=int, default=64, help="nodes checked at once (default 64)")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="deadline for the whole run in seconds (default 300)")
    parser.add_argument("--python", help="Python on the node that runs the probe "
                        "(default: python3 on PATH; use the training environment's)")
