"""`runbook i18n stamp [PATH...] [--accept]`: write translation fingerprints (`fp`).

Exit 0 when every pair is stamped, 1 when stale translations (one side changed
since the last stamp) were left alone, 2 on a path or file that cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from runbook.cli.lint.command import is_kb_dir

if TYPE_CHECKING:
    from runbook.i18n.stamp import StampResult

Target = tuple[Path, Callable[[Path, bool], "StampResult"]]


def is_article_dir(path: Path) -> bool:
    return path.is_dir() and ((path / "en.md").exists() or (path / "zh.md").exists())


def run(args: argparse.Namespace) -> int:
    from runbook.i18n.stamp import StampError

    targets = _targets([Path(p) for p in args.paths])
    if isinstance(targets, str):
        print(f"runbook i18n stamp: {targets}", file=sys.stderr)
        return 2
    results: list[StampResult] = []
    failed = 0
    for path, stamp in targets:
        try:
            results.append(stamp(path, args.accept))
        except StampError as exc:
            print(f"runbook i18n stamp: {exc}", file=sys.stderr)
            failed += 1
    _report(results, len(targets))
    return 2 if failed else 1 if any(r.stale for r in results) else 0


def _targets(paths: list[Path]) -> list[Target] | str:
    """(path, stamping function) for every runbook file and article folder; a message on a bad path."""
    from runbook.i18n.stamp import stamp_article, stamp_runbook
    from runbook.library.kb import kb_dirs
    from runbook.library.runbooks import runbook_files, search_path

    missing = [p for p in paths if not p.exists()]
    if missing:
        return f"{missing[0]}: no such file or directory"
    if not paths:
        paths = [*search_path(), *kb_dirs()]
    targets: list[Target] = []
    for path in paths:
        if is_article_dir(path):
            targets.append((path, stamp_article))
        elif is_kb_dir(path):
            targets.extend((d, stamp_article) for d in sorted(path.iterdir()) if is_article_dir(d))
        else:
            targets.extend((f, stamp_runbook) for f in runbook_files([path]))
    return targets


def _report(results: list[StampResult], n_targets: int) -> None:
    for result in results:
        for problem in result.stale:
            print(problem)
        if result.written or result.accepted:
            accepted = f" ({result.accepted} accepted as in step)" if result.accepted else ""
            print(f"{result.file}: {result.written + result.accepted} fingerprint(s) written{accepted}")
        if result.relaid and (result.written or result.accepted):
            print(f"{result.file}: note: {result.relaid} other line(s) re-laid out by the YAML "
                  "writer (mixed indentation or quoting); review them with git diff", file=sys.stderr)
    written = sum(r.written + r.accepted for r in results)
    changed = sum(bool(r.written or r.accepted) for r in results)
    stale = sum(len(r.stale) for r in results)
    summary = f"{written} fingerprint(s) written in {changed} of {n_targets} runbook(s) and article(s)"
    if stale:
        summary += (f"; {stale} stale translation(s) left unstamped (update the other language, "
                    "or pass --accept if the two already say the same thing)")
    print(summary, file=sys.stderr)
