"""The arguments of `runbook collect` (argparse only: `runbook collect --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_node_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("Example: runbook collect --nodes 'gpu[01-16]' --set log='logs/*.log' "
                     "--set config=recipe/config.yaml -o bundle.tar.gz")
    add_node_args(parser)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                        help="log=PATH (a glob picks the newest file), config=GLOB (repeatable), "
                        "pid=PID or match=REGEX (the training process; default: found automatically)")
    parser.add_argument("--output", "-o", default="runbook-bundle.tar.gz", metavar="FILE",
                        help="the bundle to write (default runbook-bundle.tar.gz)")
    parser.add_argument("--report", metavar="FILE",
                        help="a JSON report of `runbook run` to put in the bundle as report.json")
    parser.add_argument("--redact", action="append", default=[], metavar="REGEX",
                        help="also hide what this regex matches (only its groups, if it has some); "
                        "repeatable")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="deadline for the whole collection in seconds (default 300)")
    parser.add_argument("--section-timeout", type=float, default=None, metavar="S",
                        help="time limit of each section (default: the section's own, 5 to 90 s)")
