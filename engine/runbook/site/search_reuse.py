"""Keep the search bundle of an earlier build when the pages it was built from are unchanged.

Pagefind 1.x has no incremental mode: it cannot take a page out of an index, and its Python API
(`PagefindIndex.add_html_file`) costs about 8x the CLI per page (measured in bench/README.md), so
indexing only the changed pages would make every build slower. Its output is a pure function of
the HTML it reads, though, so a bundle built from the same HTML bytes is the bundle a new run would
write: the fingerprint below (every *.html under the site, the way Pagefind finds them, plus the
options and Pagefind's version) decides whether the old bundle can stay. Search results are then
the same by construction."""

from __future__ import annotations

import hashlib
import shutil
from importlib import metadata
from pathlib import Path

FINGERPRINT_FILE = "runbook-source.sha256"  # inside the bundle, so it travels with it
PREVIOUS = ".pagefind-previous"  # where build_site parks the old bundle while it re-renders


def site_fingerprint(out: Path, options: tuple[str, ...]) -> str:
    """SHA-256 over every HTML file Pagefind would index (path and bytes), the options and
    Pagefind's version."""
    digest = hashlib.sha256()
    digest.update(_pagefind_version().encode())
    digest.update("\0".join(options).encode())
    for path in sorted(out.rglob("*.html")):
        relative = path.relative_to(out)
        # Our staging folders, never served; and the bundle: Pagefind's output, not its input.
        if relative.parts[0].startswith(".") or relative.parts[0] == "pagefind":
            continue
        digest.update(b"\0" + str(relative).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def park(bundle: Path, out: Path) -> Path | None:
    """Move an earlier bundle out of the way of the re-render; return where it went."""
    if not (bundle / FINGERPRINT_FILE).is_file():
        return None
    parked = out / PREVIOUS
    if parked.exists():
        shutil.rmtree(parked)
    bundle.rename(parked)
    return parked


def reuse(parked: Path | None, bundle: Path, fingerprint: str) -> bool:
    """Put the parked bundle back when it was built from the same pages; otherwise drop it."""
    if parked is None:
        return False
    if is_current(parked, fingerprint) and not bundle.exists():
        parked.rename(bundle)
        return True
    shutil.rmtree(parked)
    return False


def is_current(bundle: Path, fingerprint: str) -> bool:
    """Whether `bundle` was built from exactly the pages `fingerprint` describes."""
    mark = bundle / FINGERPRINT_FILE
    return mark.is_file() and mark.read_text("utf-8").strip() == fingerprint


def remember(bundle: Path, fingerprint: str) -> None:
    (bundle / FINGERPRINT_FILE).write_text(fingerprint + "\n", "utf-8")


def _pagefind_version() -> str:
    try:
        return metadata.version("pagefind")
    except metadata.PackageNotFoundError:
        return "unknown"
