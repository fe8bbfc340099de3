"""The arguments of `runbook i18n` (argparse only: `runbook i18n --help` imports no more)."""

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="i18n_command", metavar="ACTION", required=True)
    stamp = actions.add_parser(
        "stamp", help="record that each English/Chinese pair is in step (writes `fp` fingerprints)",
        description="Write or refresh the translation fingerprint (`fp`) of every text whose "
                    "fingerprint is missing or whose two sides both changed, and of every "
                    "knowledge-base article. A pair where only one side changed since it was "
                    "stamped is a stale translation: it is listed and left alone (exit 1) "
                    "unless --accept is given. Nothing but `fp` keys is changed.",
        epilog="Example: edit the Chinese of a changed text, then: runbook i18n stamp "
               "runbooks/training-hang.yaml")
    stamp.add_argument("paths", nargs="*", metavar="PATH",
                       help="runbook files or directories, kb directories or article folders "
                            "(default: the runbook search path and the kb)")
    stamp.add_argument("--accept", action="store_true",
                       help="also stamp pairs where only one side changed (you checked that "
                            "they say the same thing)")
