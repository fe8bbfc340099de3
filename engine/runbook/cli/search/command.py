"""`runbook search QUERY`: runbooks and knowledge-base articles, in English or Chinese."""

from __future__ import annotations

import argparse
import json

from runbook.i18n.textwidth import clip, pad

SNIPPET_COLUMNS = 150  # display columns of a snippet in text output (CJK characters take two)


def run(args: argparse.Namespace) -> int:
    from runbook.cli.library_warnings import warn_unloaded, warn_unloaded_articles
    from runbook.library.kb import load_kb
    from runbook.library.lazy import open_library
    from runbook.library.search import SCHEMA, search

    query = " ".join(args.query)
    library, kb = open_library(), load_kb()
    warn_unloaded(library)
    warn_unloaded_articles(kb)
    results = search(query, library, kb, args.lang, args.top)
    zh = args.lang == "zh"
    if args.format == "json":
        print(json.dumps({"schema": SCHEMA, "query": query, "results": [r.to_json() for r in results]},
                         ensure_ascii=False, indent=2))
    elif not results:
        print(f"没有与 “{query}” 匹配的 runbook 或文章" if zh
              else f"no runbook or article matches '{query}'")
    else:
        for rank, result in enumerate(results, 1):
            kind = {"runbook": "runbook", "kb": "文章" if zh else "kb"}[result.kind]
            print(f"{rank:2d}. {pad(kind, 8)}{result.id} — {result.title}  ({result.score:.1f})")
            if result.snippet and result.snippet != result.title:
                print(f"    {clip(result.snippet, SNIPPET_COLUMNS)}")
            print(f"    → {result.command or result.path}")
    return 0 if results else 1
