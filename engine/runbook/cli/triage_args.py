import argparse

from runbook.cli.common_args import add_format, add_lang


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", metavar="LOG", nargs="+",
                        help="the logs to read, plain or gzip: files, directories of rank or node "
                             "logs (read whole), or '-' for stdin")
    parser.add_argument("--top", type=positive_int, default=10, metavar="N",
                        help="show the N best matches (default 10)")
    add_format(parser)
    add_lang(parser)
