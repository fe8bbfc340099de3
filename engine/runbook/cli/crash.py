"""A crash log ready to paste into an issue: versions, command, traceback."""

from __future__ import annotations

import os
import platform
import sys
import traceback
from pathlib import Path

from runbook import __version__


def write_crash_log(exc: BaseException, argv: list[str]) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "runbook"
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / "crash.log"
    body = [
        "### runbook crash", "",
        f"- runbook: {__version__}", f"- python: {sys.version.split()[0]} ({sys.executable})",
        f"- platform: {platform.platform()}", f"- command: runbook {' '.join(argv)}", "",
        "```", *traceback.format_exception(type(exc), exc, exc.__traceback__), "```", "",
    ]
    path.write_text("\n".join(body), encoding="utf-8")
    return path
