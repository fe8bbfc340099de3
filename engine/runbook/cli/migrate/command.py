"""`runbook migrate [PATH...]`: upgrade runbook files to the apiVersion this engine reads.

Files are rewritten in place (comments, key order and quoting kept) and then loaded,
so whatever the old file got wrong is reported the way `runbook lint` reports it.
`--check` changes nothing and exits 1 when a file needs migrating; `--diff` prints a
patch on stdout (status lines go to stderr then) instead of writing.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TextIO

NEEDS_MIGRATING = 1
FAILED = 2


def run(args: argparse.Namespace) -> int:
    from runbook.library.runbooks import runbook_files, search_path

    paths = [Path(p) for p in args.paths]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"runbook migrate: {missing[0]}: no such file or directory", file=sys.stderr)
        return FAILED
    files = runbook_files(paths or search_path())
    status_out = sys.stderr if args.diff else sys.stdout
    return max((migrate_file(file, args, status_out) for file in files), default=0)


def migrate_file(file: Path, args: argparse.Namespace, status_out: TextIO) -> int:
    """Migrate (or check, or diff) one file; returns its exit code."""
    from runbook.format.loader import load_text
    from runbook.format.safeyaml import LimitError, read_text
    from runbook.versions.migrate import MigrateError, migrate_text

    try:
        text = read_text(file)[0]
    except OSError as exc:
        print(f"{file}:1:1: (document): cannot read file: {exc.strerror or exc}", file=sys.stderr)
        return FAILED
    except LimitError as exc:
        print(f"{file}:{exc.line}:{exc.column}: (document): {exc.message}", file=sys.stderr)
        return FAILED
    try:
        migrated = migrate_text(text)
    except MigrateError as exc:
        print(exc.problem(str(file)), file=sys.stderr)
        return FAILED
    change = f"{migrated.from_version} -> {migrated.to_version}"
    if not migrated.changed:
        print(f"{file}: already {migrated.to_version}", file=status_out)
        return 0
    if args.check:
        print(f"{file}: needs migrating: {change}", file=status_out)
        return NEEDS_MIGRATING
    if args.diff:
        sys.stdout.writelines(difflib.unified_diff(
            text.splitlines(keepends=True), migrated.text.splitlines(keepends=True),
            f"a/{file}", f"b/{file}"))
    else:
        _replace(file, migrated.text)
        print(f"migrated {file}: {change}", file=status_out)
    return _print_problems(load_text(migrated.text, str(file)).problems)


def _print_problems(problems: list) -> int:  # type: ignore[type-arg]
    for problem in problems:
        print(problem, file=sys.stderr)
    return FAILED if any(p.severity == "error" for p in problems) else 0


def _replace(file: Path, text: str) -> None:
    """Write the new text beside the file and move it over it: never a half-written runbook."""
    fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        shutil.copymode(file, tmp)
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
