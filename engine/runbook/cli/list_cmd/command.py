"""`runbook list`: every runbook on the search path."""

from __future__ import annotations

import argparse
import json

from runbook.i18n.textwidth import pad


def run(args: argparse.Namespace) -> int:
    from runbook.cli.library_warnings import warn_unloaded
    from runbook.library.runbooks import load_library, runbook_rows

    library = load_library()
    warn_unloaded(library)
    rows = runbook_rows(library, args.lang)
    if args.format == "json":
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return 0
    width = max((len(r["id"]) for r in rows), default=10) + 2
    for r in rows:
        print(f"{pad(r['id'], width)}{pad(r['version'], 9)}{r['title']}")
    return 0
