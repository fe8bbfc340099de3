"""The arguments of `runbook new` (argparse only: `runbook new --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_lang


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="the new runbook's id: lowercase letters, digits and '-' "
                        "(e.g. dataloader-open-files)")
    parser.add_argument("--taxonomy", metavar="A.B,C.D",
                        help="taxonomy ids of its conclusion, comma-separated (see taxonomy.yaml; "
                        "default: asked on a terminal)")
    parser.add_argument("--dir", metavar="DIR", help="where the runbook and its tests go "
                        "(default: the first directory of $RUNBOOK_PATH, else ./runbooks)")
    parser.add_argument("--kb-dir", metavar="DIR", help="where its knowledge-base article goes "
                        "(default: the first directory of $RUNBOOK_KB_PATH, else ./kb)")
    add_lang(parser)
