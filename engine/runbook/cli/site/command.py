"""`runbook site build|serve`: the bilingual static site from runbooks/ and kb/."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def run(args: argparse.Namespace) -> int:
    from runbook.site.serve import serve
    from runbook.site.theme import ThemeError

    out = Path(args.output)
    built: tuple[Any, Any] | None = None
    try:
        if args.site_command == "build" or not args.no_build:
            code, built = _build(args, out)
            if code:
                return code
    except ThemeError as exc:
        print(f"runbook site: {exc}", file=sys.stderr)
        return 2
    if args.site_command != "serve":
        return 0
    if not (out / "index.html").exists():
        print(f"runbook site serve: {out} has no site (run without --no-build)", file=sys.stderr)
        return 2
    if built is None or args.no_watch:
        return serve(out, args.host, args.port)
    return _serve_live(args, out, *built)


def _serve_live(args: argparse.Namespace, out: Path, content: Any, theme: Any) -> int:
    """Serve, watch the library, rebuild what a saved file changes and reload the open pages."""
    from runbook.site import watch
    from runbook.site.incremental import SiteSession
    from runbook.site.serve import Live, serve

    live = Live()
    stop, thread = watch.start(SiteSession(content, theme, out), live, search=not args.no_search)
    try:
        return serve(out, args.host, args.port, live)
    finally:
        stop.set()
        thread.join(timeout=5)


def _build(args: argparse.Namespace, out: Path) -> tuple[int, tuple[Any, Any] | None]:
    """Build the site; (exit code, (content, theme)) for serve to keep up to date."""
    from runbook.site.build import build_site, load_content
    from runbook.site.theme import Theme, find_theme

    theme = Theme(find_theme(Path(args.theme) if args.theme else None))
    repo_url = args.repo_url if args.repo_url is not None else os.environ.get("RUNBOOK_REPO_URL", "")
    content, broken = load_content(repo_url)
    for problem in broken:
        print(problem, file=sys.stderr)
    if broken and args.strict:
        print(f"runbook site: {len(broken)} error(s) in the content; fix them (runbook lint) "
              "and build again", file=sys.stderr)
        return 2, None
    if broken:  # one broken file never costs the rest of the site: build what loaded
        print(f"runbook site: warning: {len(broken)} problem(s) in the content (runbook lint); "
              "building the rest", file=sys.stderr)
    result = build_site(content, theme, out, search=not args.no_search)
    per_page = 1000 * result.seconds / max(result.pages, 1)
    print(f"runbook site: {result.pages} pages in {out} ({result.seconds:.2f} s, {per_page:.1f} ms/page, "
          f"search index {result.search_seconds:.2f} s)", file=sys.stderr)
    if result.search_error and not args.no_search:
        print(f"runbook site: warning: no search index: {result.search_error}", file=sys.stderr)
    return 0, (content, theme)
