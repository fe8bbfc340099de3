"""The load cache: what loading a runbook file gave, keyed by the file's content, like .pyc files.

Entries live under `$XDG_CACHE_HOME/runbook` (default `~/.cache/runbook`): `load/` holds one
entry per loaded file, `index/` one summary per library (library/index.py), `derived/` what
commands compute from a whole library (triage's word weights). A key is the sha256 of the
engine's fingerprint (the bytes of its own source, schema and taxonomy), the file's path as
shown in problems and the file's digest, so an entry is never stale: a changed file, a moved
file or another engine misses and loads again. Each entry is marshal of plain data written
here, behind a magic line and the sha256 of its payload; a corrupt, truncated or foreign entry
is ignored (and rewritten), never an error. Deleting the folder is always safe. A cache that
cannot be written (a read-only home) is skipped silently: commands only get slower.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

import runbook
from runbook.format.loader import LoadResult, positions_snapshot, restore, restore_positions, snapshot
from runbook.format.yamlpos import DuplicateKeyError, Positions, parse

MAGIC = b"runbook-cache 1\n"
PACKAGE = Path(runbook.__file__).resolve().parent
# What loading a file, summarising it, or what is derived from a library depends on: the format
# and its checks, the check types' parameters, the job analyses, this package and triage's
# word weights (derived()); the schema and the taxonomy.
_FINGERPRINTED = ("__init__.py", "format/*.py", "checks/**/*.py", "jobs/*.py", "library/*.py", "triage/*.py",
                  "schema/runbook.v1.json", "data/*.yaml")
Snapshot = tuple[tuple[Any, ...], Any]  # (loader.snapshot, loader.positions_snapshot) of one file


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "runbook"


@lru_cache(maxsize=1)
def engine_fingerprint() -> str:
    """The engine's version and the bytes of the code and data loading depends on (about a
    millisecond): an edited loader, schema or taxonomy makes every entry miss, even without a
    new version number."""
    digest = hashlib.sha256(runbook.__version__.encode())
    for pattern in _FINGERPRINTED:
        for path in sorted(PACKAGE.glob(pattern)):
            digest.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key_of(*parts: str) -> str:
    return hashlib.sha256("\0".join((engine_fingerprint(), *parts)).encode()).hexdigest()


class Store:
    """Reads and writes cache entries under `root`; never raises for the cache's own sake."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else cache_root()
        self.writable = True  # until a write fails: then the rest of the command skips writing

    def path(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key[2:]

    def read(self, kind: str, key: str) -> Any:
        """The value stored under `key`, or None when there is none or it is damaged."""
        try:
            blob = self.path(kind, key).read_bytes()
        except OSError:
            return None
        head, body = blob[:len(MAGIC) + 32], blob[len(MAGIC) + 32:]
        if head != MAGIC + hashlib.sha256(body).digest():
            return None
        try:
            stored_key, value = marshal.loads(body)
        except (ValueError, EOFError, TypeError):
            return None
        return value if stored_key == key else None

    def write(self, kind: str, key: str, value: Any) -> None:
        """Store `value` (plain data) atomically; skipped when it or the folder cannot be written."""
        if not self.writable:
            return
        try:
            body = marshal.dumps((key, value))
        except ValueError:  # a value marshal cannot hold (a YAML date): this one is not cached
            return
        target = self.path(kind, key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            import tempfile  # only a write needs it (shutil and random come with it)

            fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        except OSError:
            self.writable = False
            return
        try:  # write aside, then rename: a reader sees the old entry or the whole new one
            with os.fdopen(fd, "wb") as fh:
                fh.write(MAGIC + hashlib.sha256(body).digest() + body)
            os.replace(temp, target)
        except OSError:
            self.writable = False
            Path(temp).unlink(missing_ok=True)

    # -- loaded files: the result, and its positions apart (only reporting a problem reads them) --

    def get_result(self, file: str, digest: str, text: str) -> LoadResult | None:
        """What loading `file` (`text`, of `digest`) gave, or None when the cache has no sound entry."""
        plain = self.read("load", key_of("load", file, digest))
        if plain is None:
            return None
        return restore(plain, file, digest, lambda: self._positions(file, digest, text))

    def _positions(self, file: str, digest: str, text: str) -> Positions | None:
        key = key_of("positions", file, digest)
        try:
            return restore_positions(self.read("positions", key))
        except (TypeError, ValueError):  # missing or damaged: parse again (no checks) and keep them
            try:
                positions = parse(text)[1]
            except (yaml.YAMLError, DuplicateKeyError):
                return None
            self.write("positions", key, (positions.values, positions.keys))
            return positions

    def put_result(self, file: str, digest: str, result: LoadResult | Snapshot) -> None:
        plain, positions = (snapshot(result), positions_snapshot(result)) if isinstance(result, LoadResult) \
            else result
        self.write("positions", key_of("positions", file, digest), positions)
        self.write("load", key_of("load", file, digest), plain)
