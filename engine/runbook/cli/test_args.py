import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", help="runbook files or directories "
                        "(default: the search path)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
