"""Find a runbook by id on the search path, saying clearly why when it can't."""

from __future__ import annotations

import sys

from runbook.library import Library, load_library
from runbook.model import Runbook
from runbook.problems import did_you_mean


def find_runbook(runbook_id: str, library: Library | None = None) -> Runbook | None:
    library = library or load_library()
    runbook = library.get(runbook_id)
    if runbook is not None:
        return runbook
    broken = [r for r in library.results if r.runbook is None and runbook_id in r.path]
    if broken:
        print(f"runbook: {runbook_id}: the file has problems:", file=sys.stderr)
        for problem in broken[0].problems:
            print(f"  {problem}", file=sys.stderr)
        return None
    print(f"runbook: no runbook named {runbook_id!r}{did_you_mean(runbook_id, library.by_id)}"
          " (see `runbook list`)", file=sys.stderr)
    return None
