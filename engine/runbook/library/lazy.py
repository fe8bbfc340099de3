"""A library that loads a runbook only when it is asked for, from the library's index.

Opening it reads and hashes every file (milliseconds for a thousand) and takes what it
needs to know of each from the index (library/index.py): ids, problems, signatures, log
patterns. Files the index does not know yet (new or changed) are loaded now, from the load
cache or checked (in parallel when many), and the index is written again. After that,
`get(ID)` and `by_id[ID]` load that one runbook (from the load cache: a read and a decode);
`results`, `problems` and `runbooks()` load them all, as `load_library` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from runbook.format.loader import LoadResult
from runbook.format.model import Signature
from runbook.format.problems import Problem
from runbook.library.cache import Store, key_of
from runbook.library.index import (
    Summary,
    read_index,
    summarize,
    summary_problems,
    summary_signatures,
    write_index,
)
from runbook.library.loading import Source, load_by_file, read_sources
from runbook.library.runbooks import Library, assemble, claim_id, runbook_files, search_path

T = TypeVar("T")


class _LazyById(Mapping[str, LoadResult]):
    """`library.by_id`: ids known from the index, each runbook loaded on first use."""

    def __init__(self, library: IndexedLibrary) -> None:
        self._library = library

    def __getitem__(self, runbook_id: str) -> LoadResult:
        return self._library.load(self._library.ids[runbook_id])

    def __contains__(self, runbook_id: object) -> bool:
        return runbook_id in self._library.ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._library.ids)

    def __len__(self) -> int:
        return len(self._library.ids)


class IndexedLibrary(Library):
    """`Library`'s interface over the index; see the module's docstring."""

    def __init__(self, sources: Sequence[Source], summaries: dict[str, Summary],
                 loaded: dict[str, LoadResult], store: Store) -> None:
        self.sources, self.summaries, self.loaded, self.store = list(sources), summaries, loaded, store
        self._by_file = {source.file: source for source in self.sources}
        self.ids: dict[str, str] = {}  # runbook id -> its file (the first one on the search path)
        self.duplicates = [problem for source in self.sources
                           if (problem := claim_id(self.ids, source.file, summaries[source.file][0]))]
        self.by_id = _LazyById(self)  # type: ignore[assignment]
        self._whole: Library | None = None

    @classmethod
    def open(cls, files: Sequence[Path], roots: Sequence[str], store: Store) -> IndexedLibrary:
        """The library of `files`: summaries from the index where a file is unchanged, the other
        files loaded now (and the index written again)."""
        sources = read_sources(files)
        index = read_index(store, roots)
        known = {source.file: entry[1] for source in sources if source.failed is None
                 and (entry := index.get(source.file)) is not None and entry[0] == source.digest}
        loaded = load_by_file([source for source in sources if source.file not in known], store)
        summaries = {source.file: known[source.file] if source.file in known
                     else summarize(loaded[source.file]) for source in sources}
        readable = {s.file: (s.digest, summaries[s.file]) for s in sources if s.failed is None}
        if readable != index:  # a file new, changed or gone since the index was written
            write_index(store, roots, readable)
        return cls(sources, summaries, loaded, store)

    def load(self, file: str) -> LoadResult:
        """The LoadResult of one file of the library (loaded once)."""
        self._load([self._by_file[file]])
        return self.loaded[file]

    def _load(self, sources: Sequence[Source]) -> None:
        """Load those of `sources` not loaded yet and keep their results."""
        self.loaded.update(load_by_file([s for s in sources if s.file not in self.loaded], self.store))

    def _library(self) -> Library:
        """Every file loaded and checked together, as `load_library` gives them."""
        if self._whole is None:
            self._load(self.sources)
            self._whole = assemble(self.loaded[s.file] for s in self.sources)
        return self._whole

    @property  # type: ignore[override]
    def results(self) -> list[LoadResult]:
        return self._library().results

    @property  # type: ignore[override]
    def problems(self) -> list[Problem]:
        return self._library().problems

    def _winners(self) -> Iterator[tuple[str, str, Summary]]:
        """(runbook id, file, summary) of each runbook in the library, in search-path order."""
        for source in self.sources:
            rid = self.summaries[source.file][0]
            if rid is not None and self.ids.get(rid) == source.file:
                yield rid, source.file, self.summaries[source.file]

    def signatures(self) -> list[tuple[str, str, Signature]]:
        return [(rid, file, s) for rid, file, summary in self._winners() for s in summary_signatures(summary)]

    def log_patterns(self) -> dict[tuple[str, str, str], str]:
        return {(rid, step, name): source for rid, _, summary in self._winners()
                for step, name, source in summary[3]}

    def unloaded(self) -> list[tuple[str, list[Problem]]]:
        kept = set(self.ids.values())
        out = [(s.file, summary_problems(s.file, self.summaries[s.file])) for s in self.sources
               if s.file not in kept and self.summaries[s.file][1]]
        return out + [(p.file, [p]) for p in self.duplicates if p.file not in kept]

    def failed(self) -> list[tuple[str, list[Problem]]]:
        return [(s.file, summary_problems(s.file, self.summaries[s.file])) for s in self.sources
                if self.summaries[s.file][0] is None]

    def derived(self, name: str, compute: Callable[[], T], valid: Callable[[Any], bool]) -> T:
        key = key_of("derived", name, *(f"{s.file}\0{s.digest}" for s in self.sources))
        stored = self.store.read("derived", key)
        if stored is not None and valid(stored):
            return stored  # type: ignore[no-any-return]
        value = compute()
        self.store.write("derived", key, value)
        return value


def open_library(paths: Iterable[Path] | None = None, store: Store | None = None) -> Library:
    """The library as `load_library` gives it, loaded lazily from the library's index: a
    runbook is loaded when it is first asked for (`get`, `by_id`), so `run` and `triage`
    load only what they use. `results` and `problems` load everything."""
    roots = list(search_path() if paths is None else paths)
    return IndexedLibrary.open(runbook_files(roots), [str(r) for r in roots], store or Store())
