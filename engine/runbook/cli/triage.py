"""`runbook triage FILE|-`: which runbooks a log points to, ranked, with the lines that matched."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runbook.triage.scan import Match

SHOWN_LINES = 3  # matched lines printed per runbook in text output
SHOWN_IDS = 4  # taxonomy ids printed per runbook in text output (JSON has them all)
LINE_WIDTH = 150


def run(args: argparse.Namespace) -> int:
    if args.log != "-" and not os.path.isfile(args.log):
        what = "is a directory" if os.path.isdir(args.log) else "no such file"
        print(f"runbook triage: {args.log}: {what}", file=sys.stderr)
        return 2
    from runbook.cli.library_warnings import warn_unloaded
    from runbook.library.runbooks import load_library
    from runbook.triage.logstream import LogShape, LogSourceError, open_log
    from runbook.triage.scan import Triage

    library = load_library()
    warn_unloaded(library)
    scanner = Triage(library, on_warning=lambda m: print(f"runbook: warning: {m}", file=sys.stderr))
    try:
        shape = LogShape()
        with open_log(args.log, shape) as lines:
            scanner.feed(lines)
    except LogSourceError as exc:
        print(f"runbook triage: {exc}", file=sys.stderr)
        return 2
    matches = scanner.matches()[: args.top]
    source = "<stdin>" if args.log == "-" else args.log
    if args.format == "json":
        _print_json(source, scanner.lines, matches, args.lang, shape.notes())
    else:
        _print_text(source, scanner.lines, matches, args.lang, library)
        for note in shape.notes():
            print(f"note: {note}")
    return 0 if matches else 1


def _print_json(source: str, lines: int, matches: list[Match], lang: str, notes: list[str]) -> None:
    from runbook.triage.scan import SCHEMA

    print(json.dumps({"schema": SCHEMA, "source": source, "lines": lines, "notes": notes,
                      "matches": [m.to_json(lang) for m in matches]}, ensure_ascii=False, indent=2))


def _print_text(source: str, lines: int, matches: list[Match], lang: str, library: object) -> None:
    zh = lang == "zh"
    if not matches:
        print(f"{source}（{lines} 行）中没有匹配任何 runbook 特征" if zh
              else f"no runbook signature matches {source} ({lines} lines)")
        return
    print(f"{source}（{lines} 行）：{len(matches)} 个 runbook 匹配" if zh
          else f"{source} ({lines} lines): {len(matches)} runbook{'s' if len(matches) > 1 else ''} match")
    for rank, match in enumerate(matches, 1):
        runbook = library.get(match.runbook)  # type: ignore[attr-defined]
        title = runbook.title.get(lang) if runbook else ""
        print()
        print(f"{rank:2d}. {match.runbook} — {title}  ({'得分' if zh else 'score'} {match.score:.1f})")
        taxonomy = ", ".join(match.taxonomy[:SHOWN_IDS]) or "-"
        if len(match.taxonomy) > SHOWN_IDS:
            taxonomy += f" (+{len(match.taxonomy) - SHOWN_IDS})"
        print(f"    {'入口' if zh else 'entry'}: {match.entry}    "
              f"{'分类' if zh else 'taxonomy'}: {taxonomy}")
        print(f"    {match.why(lang)}")
        for hit in match.lines()[-SHOWN_LINES:]:
            text = hit.text if len(hit.text) <= LINE_WIDTH else hit.text[: LINE_WIDTH - 1] + "…"
            print(f"    {hit.line_no:>7} │ {text}")
        print(f"    → runbook run {match.runbook}")
