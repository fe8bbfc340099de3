"""`runbook lint [PATH...] [--base REV] [--strict]`: every problem of every file, one line each.

Runbook files and knowledge-base folders are both linted; links between them are
checked in both directions. With no PATH: the runbook search path and the kb, and
then also that every taxonomy id has a conclusion (error) and an article (warning).

Translations: a text (or article) whose fingerprint (`fp`, written by `runbook i18n
stamp`) shows that only its English or only its Chinese changed is a stale
translation (warning). With `--base REV` each runbook is also compared with the same
file at git revision REV: changed behaviour needs a higher version, a removed step
or conclusion a higher major version, a version never goes down, a new version needs
a changelog entry in both languages, and texts without `fp` are checked for one-sided
changes against REV. `--strict` makes warnings fail too (CI runs it).
Exit 0 clean, 2 on errors (or warnings under --strict) and on a bad path or REV.
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
    from runbook.i18n.translations import kb_problems
    from runbook.library.coverage import taxonomy_coverage
    from runbook.library.kb import check_links, kb_dirs, load_kb
    from runbook.library.runbooks import load_in_context, load_library, runbook_files, search_path
    from runbook.versions.changes import runbook_changes
    from runbook.versions.gitrev import GitRevError, Revision

    paths = [Path(p) for p in args.paths]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"runbook lint: {missing[0]}: no such file or directory", file=sys.stderr)
        return 2
    kb_paths = [p for p in paths if is_kb_dir(p)] if paths else kb_dirs()
    rb_paths = [p for p in paths if not is_kb_dir(p)] if paths else search_path()
    files = runbook_files(rb_paths)
    linted = {str(f) for f in files}
    # Given files are linted with the rest of the library around them (their references to
    # other runbooks resolve); only their own problems are reported. Linting only articles
    # still checks their links against the runbooks on the search path.
    library = load_in_context(rb_paths)[0] if rb_paths else load_library(search_path())
    kb = load_kb(kb_paths or kb_dirs())
    links = check_links(kb, {r.id: r for r in library.runbooks()})
    problems = [p for p in library.problems if p.file in linted] + (list(kb.problems) if kb_paths else [])
    problems += [p for p in links if p.file in linted or kb_paths and p.file not in
                 {r.path for r in library.runbooks()}]
    if not paths:
        problems += taxonomy_coverage(library.runbooks(), kb)
    revision = Revision(args.base) if args.base else None
    try:
        problems += runbook_changes([r for r in library.results if r.path in linted], revision)
        problems += kb_problems(kb, revision) if kb_paths else []
    except GitRevError as exc:
        print(f"runbook lint: --base {args.base}: {exc}", file=sys.stderr)
        return 2
    problems.sort(key=lambda p: (p.file, p.line, p.column))
    # An article is one file per language: count those, as problems name them.
    n_article_files = sum(len(langs) for langs in kb.articles.values()) if kb_paths else 0
    return _report(problems, len(files) + n_article_files, args.format, args.strict)


def _report(problems: list, n_files: int, fmt: str, strict: bool) -> int:  # type: ignore[type-arg]
    n_errors = sum(p.severity == "error" for p in problems)
    n_warnings = len(problems) - n_errors
    failing = n_errors + (n_warnings if strict else 0)
    if fmt == "json":
        print(json.dumps({"files": n_files, "errors": n_errors, "warnings": n_warnings,
                          "strict": strict, "problems": [
            {"file": p.file, "line": p.line, "column": p.column, "path": list(p.path),
             "message": p.message, "severity": p.severity} for p in problems]},
            ensure_ascii=False, indent=2))
    else:
        for problem in problems:
            print(problem)
        print(_summary(problems, n_files, n_errors, n_warnings, strict), file=sys.stderr)
    return 2 if failing else 0


def _summary(problems: list, n_files: int, n_errors: int, n_warnings: int,  # type: ignore[type-arg]
             strict: bool) -> str:
    if strict and n_warnings:
        broken = len({p.file for p in problems})
        return (f"{n_errors} error(s) and {n_warnings} warning(s) in {broken} of {n_files} file(s) "
                "(--strict: warnings fail too)")
    if n_errors:
        broken = len({p.file for p in problems if p.severity == "error"})
        return f"{n_errors} error(s) in {broken} of {n_files} file(s)"
    return f"{n_files} file(s) OK" + (f", {n_warnings} warning(s)" if n_warnings else "")
