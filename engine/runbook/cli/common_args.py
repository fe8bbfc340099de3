"""Arguments shared by several subcommands (argparse only)."""

from __future__ import annotations

import argparse
import os


def default_lang() -> str:
    """`zh` when the locale says Chinese, else `en`."""
    for name in ("RUNBOOK_LANG", "LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        value = os.environ.get(name, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def add_lang(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lang", choices=("en", "zh"), default=default_lang(),
                        help="language of the output (default: from the locale)")


def add_format(parser: argparse.ArgumentParser, formats: tuple[str, ...] = ("text", "json")) -> None:
    parser.add_argument("--format", choices=formats, default="text", help="output format")
