"""`runbook lint [PATH...]`: every problem of every file, one line each; exit 2 on errors."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    from runbook.library import load_library, runbook_files, search_path

    paths = [Path(p) for p in args.paths] or search_path()
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"runbook lint: {missing[0]}: no such file or directory", file=sys.stderr)
        return 2
    files = runbook_files(paths)
    library = load_library(paths)
    problems = sorted(library.problems, key=lambda p: (p.file, p.line, p.column))
    n_errors = sum(p.severity == "error" for p in problems)
    if args.format == "json":
        print(json.dumps({"files": len(files), "errors": n_errors, "problems": [
            {"file": p.file, "line": p.line, "column": p.column, "path": list(p.path),
             "message": p.message, "severity": p.severity} for p in problems]},
            ensure_ascii=False, indent=2))
    else:
        for problem in problems:
            print(problem)
        broken = len({p.file for p in problems if p.severity == "error"})
        summary = (f"{n_errors} error(s) in {broken} of {len(files)} file(s)" if n_errors
                   else f"{len(files)} file(s) OK")
        print(summary, file=sys.stderr)
    return 2 if n_errors else 0
