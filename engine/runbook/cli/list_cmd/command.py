"""`runbook list`: every runbook on the search path."""

from __future__ import annotations

import argparse
import json

from runbook.i18n.textwidth import pad


def run(args: argparse.Namespace) -> int:
    from runbook.cli.library_warnings import warn_unloaded
    from runbook.library.runbooks import load_library

    library = load_library()
    warn_unloaded(library)
    rows = sorted(library.runbooks(), key=lambda r: r.id)
    if args.format == "json":
        print(json.dumps([{"id": r.id, "version": r.version, "title": r.title.get(args.lang),
                           "tags": r.tags, "path": r.path} for r in rows],
                         ensure_ascii=False, indent=2))
        return 0
    width = max((len(r.id) for r in rows), default=10) + 2
    for r in rows:
        print(f"{pad(r.id, width)}{pad(r.version, 9)}{r.title.get(args.lang)}")
    return 0
