"""The arguments of `runbook ssh-masters` (argparse only)."""

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stop", action="store_true", help="end every kept connection now (each "
                        "ends by itself --ssh-persist seconds after its last use)")
