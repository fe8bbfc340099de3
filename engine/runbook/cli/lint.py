"""`runbook lint [PATH...]`: every problem of every file, one line each; exit 2 on errors.

Runbook files and knowledge-base folders are both linted; links between them are
checked in both directions. With no PATH: the runbook search path and the kb, and
then also that every taxonomy id has a conclusion (error) and an article (warning).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def is_kb_dir(path: Path) -> bool:
    return path.is_dir() and any((d / "en.md").exists() or (d / "zh.md").exists()
                                 for d in path.iterdir() if d.is_dir())


def run(args: argparse.Namespace) -> int:
    from runbook.coverage import taxonomy_coverage
    from runbook.kb import check_links, kb_dirs, load_kb
    from runbook.library import load_library, runbook_files, search_path

    paths = [Path(p) for p in args.paths]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"runbook lint: {missing[0]}: no such file or directory", file=sys.stderr)
        return 2
    kb_paths = [p for p in paths if is_kb_dir(p)] if paths else kb_dirs()
    rb_paths = [p for p in paths if not is_kb_dir(p)] if paths else search_path()
    files = runbook_files(rb_paths)
    # Linting only articles still checks their links against the runbooks on the search path.
    library = load_library(rb_paths or search_path())
    kb = load_kb(kb_paths or kb_dirs())
    links = check_links(kb, {r.id: r for r in library.runbooks()})
    linted = {str(f) for f in files}
    problems = (list(library.problems) if rb_paths else []) + (list(kb.problems) if kb_paths else [])
    problems += [p for p in links if p.file in linted or kb_paths and p.file not in
                 {r.path for r in library.runbooks()}]
    if not paths:
        problems += taxonomy_coverage(library.runbooks(), kb)
    problems.sort(key=lambda p: (p.file, p.line, p.column))
    return _report(problems, len(files) + len(kb.articles) * bool(kb_paths), args.format)


def _report(problems: list, n_files: int, fmt: str) -> int:  # type: ignore[type-arg]
    n_errors = sum(p.severity == "error" for p in problems)
    if fmt == "json":
        print(json.dumps({"files": n_files, "errors": n_errors, "problems": [
            {"file": p.file, "line": p.line, "column": p.column, "path": list(p.path),
             "message": p.message, "severity": p.severity} for p in problems]},
            ensure_ascii=False, indent=2))
    else:
        for problem in problems:
            print(problem)
        broken = len({p.file for p in problems if p.severity == "error"})
        summary = (f"{n_errors} error(s) in {broken} of {n_files} file(s)" if n_errors
                   else f"{n_files} file(s) OK")
        print(summary, file=sys.stderr)
    return 2 if n_errors else 0
