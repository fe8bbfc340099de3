"""The arguments of `runbook lint` (argparse only: `runbook lint --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_format


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Check runbook files and knowledge-base articles and print every problem with its place "
        "(file:line:col: path.in.doc: message). Stale translations (only the English or only the "
        "Chinese changed since `runbook i18n stamp`) are warnings.")
    parser.epilog = ("Pull requests: runbook lint --strict --base origin/main "
                     "(fetch it first: git fetch origin main)")
    parser.add_argument("paths", nargs="*", help="runbook files or directories, kb directories "
                        "(default: the runbook search path and the kb)")
    parser.add_argument("--base", metavar="REV", default=None,
                        help="also compare each runbook with the same file at git revision REV: "
                             "changed behaviour needs a version bump (a removed step or conclusion a "
                             "major one), a new version a changelog entry in English and Chinese, "
                             "and a text changed in one language only is a stale translation")
    parser.add_argument("--strict", action="store_true",
                        help="warnings fail too (exit 2), as in CI")
    add_format(parser)
