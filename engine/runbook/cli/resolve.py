"""Find a runbook by id on the search path for a command, printing why when it can't.

The finding and its pins (`ID@1.2.0`, `ID@sha256:1f2e3d4c...`) are versions/pins.py's; this
module names the library's broken files once and prints the reason (and the file's problems,
one a line) for `run` and `show`.
"""

from __future__ import annotations

import sys

from runbook.cli.library_warnings import warn_unloaded
from runbook.format.model import Runbook
from runbook.library.lazy import open_library
from runbook.library.runbooks import Library
from runbook.versions.pins import RunbookNotFound, resolve_runbook


def find_runbook(name: str, library: Library | None = None) -> Runbook | None:
    """The runbook `name` (`ID`, `ID@VERSION`, `ID@sha256:PREFIX`) names, or None after
    printing why there is none."""
    library = library or open_library()
    warn_unloaded(library)
    try:
        return resolve_runbook(name, library)
    except RunbookNotFound as exc:
        print(f"runbook: {exc}", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return None
