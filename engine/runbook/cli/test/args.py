"""The arguments of `runbook test` (argparse only: `runbook test --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_format, add_lang


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", help="runbook files or directories "
                        "(default: the search path)")
    add_format(parser)
    parser.add_argument("--coverage", action="store_true",
                        help="also report which steps, branches and conclusions the cases reach; "
                             "fail when a branch or a conclusion is never reached")
    parser.add_argument("--replay", nargs="+", metavar="DIR",
                        help="walk recorded incidents (`runbook run ... --record DIR`) again with "
                             "today's runbooks and say which now end at another conclusion")
    parser.add_argument("--accept", action="store_true",
                        help="with --replay: make each recording expect the conclusions the "
                             "replay reached (after a deliberate change to a runbook)")
    add_lang(parser)
