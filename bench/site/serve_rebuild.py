"""How long `runbook site serve` takes to rebuild after one runbook is saved.

Run from the repository root, on content `bench/site/run.py --keep DIR` left (or any library):
    .venv/bin/python bench/site/serve_rebuild.py --runbooks DIR [--kb DIR] [--repeat 5] [--json]

Loads the library as `site serve` does (RUNBOOK_PATH / RUNBOOK_KB_PATH set from the arguments),
builds the site once without search (untimed), then saves a runbook of DIR with a new title
`--repeat` times and times each incremental rebuild (the runbook with the median number of
steps, then the one with the most) (`SiteSession.changed`: reload the file,
re-render its pages, the pages that show it and the index pages). The file is restored at the
end. Prints the rebuild times (the search index is refreshed in the background afterwards and
is not part of them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TARGET_MS = 300.0


def measure(runbooks: Path, kb: Path | None, repeat: int, out: Path) -> dict[str, Any]:
    os.environ["RUNBOOK_PATH"] = str(runbooks)
    if kb:
        os.environ["RUNBOOK_KB_PATH"] = str(kb)
    from runbook.site.build import build_site, load_content
    from runbook.site.incremental import SiteSession
    from runbook.site.theme import Theme, find_theme

    content, _ = load_content()
    theme = Theme(find_theme(ROOT / "site"))
    build = build_site(content, theme, out, search=False)
    session = SiteSession(content, theme, out)
    # Only runbooks under --runbooks are edited (never the repository's own files): the one with
    # the median number of steps, and the one with the most (the slowest flowchart).
    root = runbooks.resolve()
    mine = sorted((rb for rb in content.runbooks if Path(rb.path).resolve().is_relative_to(root)),
                  key=lambda rb: (len(rb.steps), rb.id))
    if not mine:
        raise SystemExit(f"serve_rebuild: no runbook under {runbooks}")
    picks = {"median": mine[len(mine) // 2].id, "largest": mine[-1].id}
    return {"site_pages": build.pages, "target_ms": TARGET_MS,
            **{name: _saves(session, rid, repeat) for name, rid in picks.items()}}


def _saves(session: Any, rid: str, repeat: int) -> dict[str, Any]:
    """Save runbook `rid` with a new title `repeat` times; time each rebuild. The first runs
    with a cold Markdown cache (the first save of a session), the rest warm."""
    target = next(rb for rb in session.content.runbooks if rb.id == rid)
    file = Path(target.path)
    original = file.read_text("utf-8")
    title = target.title.get("en")
    times, cpu, pages = [], [], 0
    try:
        for i in range(repeat):
            file.write_text(original.replace(title, f"{title} (edit {i + 1})", 1), "utf-8")
            begin = time.process_time()  # CPU too: on a shared machine the wall time waits for a core
            done = session.changed([file])
            cpu.append(time.process_time() - begin)
            times.append(done.seconds)
            pages = done.pages
    finally:
        file.write_text(original, "utf-8")
        session.changed([file])
    return {"runbook": rid, "steps": len(target.steps), "pages_rebuilt": pages,
            "runs_ms": [round(1000 * t, 1) for t in times],
            "median_ms": round(1000 * statistics.median(times), 1),
            "median_cpu_ms": round(1000 * statistics.median(cpu), 1)}


def report(result: dict[str, Any]) -> str:
    lines = []
    for name in ("median", "largest"):
        r = result[name]
        met = "met" if r["median_ms"] < TARGET_MS else "MISSED"
        runs = " ".join(f"{t:.0f}" for t in r["runs_ms"])
        lines.append(f"site serve, one saved runbook ({name}: {r['runbook']}, {r['steps']} steps): "
                     f"{r['pages_rebuilt']} of {result['site_pages']} pages rebuilt in "
                     f"{r['median_ms']:.0f} ms (median; runs {runs} ms; CPU {r['median_cpu_ms']:.0f} ms); "
                     f"target under {TARGET_MS:.0f} ms: {met}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runbooks", type=Path, required=True,
                        help="a runbook directory to add to the search path; one of its files is edited")
    parser.add_argument("--kb", type=Path, help="a kb directory to add to the kb path")
    parser.add_argument("--repeat", type=int, default=5, help="saves to time (default 5)")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of a line")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as work:
        result = measure(args.runbooks, args.kb, args.repeat, Path(work) / "site")
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
