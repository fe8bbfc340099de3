"""`runbook site serve` watches the library's files by polling their modification times (no
file-system event library: the same code everywhere) and rebuilds what a saved file changes."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from runbook.format.model import LANGS
from runbook.site.incremental import ContentError, SearchRefresher, SiteSession
from runbook.site.serve import Live

POLL_S = 0.25  # how often the files are looked at
Stamp = tuple[int, int]  # (mtime_ns, size)


class Watcher:
    """Runbook files under the runbook directories, article files under the kb directories."""

    def __init__(self, runbook_dirs: list[Path], kb_dirs: list[Path]) -> None:
        self.runbook_dirs, self.kb_dirs = runbook_dirs, kb_dirs
        self._seen = self.scan()

    def scan(self) -> dict[Path, Stamp]:
        from runbook.library.runbooks import runbook_files

        files = runbook_files(self.runbook_dirs)
        files += [p for d in self.kb_dirs for lang in LANGS for p in sorted(d.glob(f"*/{lang}.md"))]
        stamps: dict[Path, Stamp] = {}
        for file in files:
            try:
                st = os.stat(file)
            except OSError:
                continue  # removed between the listing and the stat: the next scan says so
            stamps[file] = (st.st_mtime_ns, st.st_size)
        return stamps

    def changes(self) -> list[Path]:
        """Files saved, added or removed since the last call."""
        now = self.scan()
        changed = [f for f, stamp in now.items() if self._seen.get(f) != stamp]
        changed += [f for f in self._seen if f not in now]
        self._seen = now
        return sorted(changed)


def watch(session: SiteSession, watcher: Watcher, live: Live, search: SearchRefresher | None,
          stop: threading.Event, log: Callable[[str], None] | None = None) -> None:
    """Until `stop`: poll, rebuild what changed, tell the pages. A save that does not load
    is one line on stderr and a banner in the page; the last good site stays served."""
    say = log or _stderr
    while not stop.wait(POLL_S):
        changed = watcher.changes()
        if not changed:
            continue
        try:
            done = session.changed(changed)
        except ContentError as exc:
            live.failed(str(exc))
            say(f"runbook site serve: not rebuilt: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - a bug in one rebuild must not stop the preview
            live.failed(f"{type(exc).__name__}: {exc}")
            say(f"runbook site serve: rebuild failed: {type(exc).__name__}: {exc}")
            continue
        live.rebuilt()
        say(f"runbook site serve: {done.what}: {done.pages} pages rebuilt in {1000 * done.seconds:.0f} ms")
        if search is not None:
            search.request()


def start(session: SiteSession, live: Live, search: bool) -> tuple[threading.Event, threading.Thread]:
    """The watcher thread over the library's search path; set the event to stop it."""
    from runbook.library.kb import kb_dirs
    from runbook.library.runbooks import search_path

    stop = threading.Event()
    refresher = SearchRefresher(session.out, _stderr) if search else None
    thread = threading.Thread(target=watch, args=(session, Watcher(search_path(), kb_dirs()), live,
                                                  refresher, stop), name="site-watch", daemon=True)
    thread.start()
    return stop, thread


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # stdout's first line is the address, for scripts
