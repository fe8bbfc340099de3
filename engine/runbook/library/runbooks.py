"""Finding runbooks: the search path, and checks that need every runbook at once.

Search path: each directory in $RUNBOOK_PATH (os.pathsep-separated), then
`./runbooks`, then the built-in library (the clone's `runbooks/`, or the copy a wheel
carries: see library/shipped.py). Test files (`*.tests.yaml`) live beside runbooks and are not runbooks.

`load_library` loads and checks every file (from the load cache where it can: library/cache.py);
`open_library` (library/lazy.py) loads a runbook only when it is asked for.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from runbook.format.loader import LoadResult
from runbook.format.model import Runbook, Signature
from runbook.format.problems import Problem
from runbook.format.suggest import Suggestions
from runbook.library.cache import Store
from runbook.library.index import step_patterns
from runbook.library.loading import load_sources, read_sources
from runbook.library.shipped import shipped_dir

T = TypeVar("T")

TEST_SUFFIX = ".tests.yaml"


def search_path() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("RUNBOOK_PATH", "").split(os.pathsep) if p]
    dirs.append(Path.cwd() / "runbooks")
    dirs.append(shipped_dir("runbooks"))
    unique: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [u.resolve() for u in unique]:
            unique.append(d)
    return unique


def runbook_files(paths: Iterable[Path]) -> list[Path]:
    """Runbook files under the given files/directories (test files left out), sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(p for p in sorted(path.rglob("*.yaml")) if _is_runbook_file(p))
        else:
            found.append(path)
    return found


def _is_runbook_file(path: Path) -> bool:
    return not path.name.endswith(TEST_SUFFIX) and "tests" not in path.parts[-2:-1]


@dataclass
class Library:
    """Every runbook that loaded, by id, and every problem found while loading."""

    results: list[LoadResult] = field(default_factory=list)
    by_id: dict[str, LoadResult] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    # derived(): name -> (the runbooks it was derived from, by identity; the value)
    _derived: dict[str, tuple[Any, Any]] = field(default_factory=dict, repr=False, compare=False)

    def get(self, runbook_id: str) -> Runbook | None:
        result = self.by_id.get(runbook_id)
        return result.runbook if result else None

    def runbooks(self) -> list[Runbook]:
        return [r.runbook for r in self.by_id.values() if r.runbook is not None]

    def signatures(self) -> list[tuple[str, str, Signature]]:
        """(runbook id, file, signature) of every signature of every runbook, in library order."""
        return [(r.id, r.path, s) for r in self.runbooks() for s in r.signatures]

    def log_patterns(self) -> dict[tuple[str, str, str], str]:
        """(runbook id, step id, pattern name) -> regex of every named pattern of every `log` step."""
        return {(runbook.id, step.id, name): source
                for runbook in self.runbooks() for step in runbook.steps.values()
                for name, source in step_patterns(step).items()}

    def unloaded(self) -> list[tuple[str, list[Problem]]]:
        """(file, its problems) of each file on the search path whose runbook is not in the
        library: it did not load, or its id is a duplicate (then the problem says so)."""
        loaded = {result.path for result in self.by_id.values()}
        out = [(r.path, list(r.problems)) for r in self.results if r.path not in loaded and r.problems]
        out += [(p.file, [p]) for p in self.problems if p.path == ("id",) and p.file not in loaded]
        return out

    def failed(self) -> list[tuple[str, list[Problem]]]:
        """(file, its problems) of each file that did not load."""
        return [(r.path, list(r.problems)) for r in self.results if r.runbook is None]

    def derived(self, name: str, compute: Callable[[], T], valid: Callable[[Any], bool]) -> T:
        """What `compute` derives from the whole library (`name` names it): an indexed library
        keeps it in the load cache; this one keeps it while its runbooks stay the same objects (a
        process that triages many logs with one library derives it once)."""
        key = tuple(id(result) for result in self.by_id.values())
        known = self._derived.get(name)
        if known is not None and known[0] == key:
            return known[1]  # type: ignore[no-any-return]
        value = compute()
        self._derived[name] = (key, value)
        return value


def runbook_rows(library: Library, lang: str) -> list[dict[str, Any]]:
    """Every runbook's id, version, title, tags and file, by id: `runbook list --format json`,
    and the MCP server's list_runbooks."""
    return [{"id": r.id, "version": r.version, "title": r.title.get(lang), "tags": r.tags, "path": r.path}
            for r in sorted(library.runbooks(), key=lambda r: r.id)]


def load_library(paths: Iterable[Path] | None = None, store: Store | None = None) -> Library:
    """Every runbook on the search path (or under `paths`), each checked, with every problem,
    cross-references between runbooks included. Files come from the load cache when it has them."""
    files = runbook_files(search_path() if paths is None else paths)
    results = load_sources(read_sources(files), store or Store())
    return assemble(results)


def load_in_context(paths: Iterable[Path]) -> tuple[Library, set[str]]:
    """The runbook files under `paths` loaded with the rest of the search path, so that their
    references to other runbooks resolve as they will in the library (`runbook lint FILE`,
    `runbook test FILE`). The given files come first and keep their ids; the second value is
    the set of given files, whose problems and cases the caller reports."""
    given = runbook_files(paths)
    seen = {p.resolve() for p in given}
    rest = [f for f in runbook_files(search_path()) if f.resolve() not in seen]
    library = assemble(load_sources(read_sources(given + rest), Store()))
    return library, {str(p) for p in given}


def assemble(results: Iterable[LoadResult]) -> Library:
    """A library of loaded files, in search-path order: the first file of an id wins."""
    library = Library()
    owners: dict[str, str] = {}
    for result in results:
        library.results.append(result)
        library.problems.extend(result.problems)
        rid = result.runbook.id if result.runbook is not None else None
        duplicate = claim_id(owners, result.path, rid)
        if duplicate is not None:
            library.problems.append(duplicate)
        elif rid is not None:
            library.by_id[rid] = result
    _check_cross_references(library)
    return library


def claim_id(owners: dict[str, str], file: str, rid: str | None) -> Problem | None:
    """Give runbook id `rid` to `file` in `owners` (id -> file), files coming in search-path
    order: the first file of an id keeps it, a later one gets this problem instead."""
    if rid is None:
        return None
    if rid in owners:
        return Problem(file, 1, 1, ("id",), f"runbook id {rid!r} is also defined in {owners[rid]}")
    owners[rid] = file
    return None


def _check_cross_references(library: Library) -> None:
    """`goto: other-runbook:step` and `see_also: runbook:x` must name something that exists."""
    # One index of the ids for every "did you mean": a renamed runbook breaks many references.
    suggestions = Suggestions(library.by_id)
    for result in library.by_id.values():
        runbook = result.runbook
        assert runbook is not None
        refs: list[tuple[tuple[str | int, ...], str]] = []
        for step in runbook.steps.values():
            for i, branch in enumerate(step.branches):
                refs.append((("steps", step.id, "branches", i, "goto"), branch.goto))
            if step.default:
                refs.append((("steps", step.id, "default"), step.default))
        for i, signature in enumerate(runbook.signatures):
            if signature.goto:
                refs.append((("signatures", i, "goto"), signature.goto))
        problems: list[tuple[tuple[str | int, ...], str]] = []
        for path, target in refs:
            if ":" in target:
                problems.extend((path, m) for m in [_cross_target_problem(library, target, suggestions)] if m)
        for cid, conclusion in runbook.conclusions.items():
            for i, link in enumerate(conclusion.see_also):
                kind, _, name = link.partition(":")
                name = name.split("#")[0]
                if kind == "runbook" and name not in library.by_id:
                    problems.append((("conclusions", cid, "see_also", i),
                                     f"no runbook named {name!r}{suggestions.hint(name)}"))
        for path, message in problems:
            line, col = result.positions.of(path) if result.positions else (1, 1)
            library.problems.append(Problem(result.path, line, col, path, message))


def _cross_target_problem(library: Library, target: str, suggestions: Suggestions) -> str | None:
    rid, _, step = target.partition(":")
    other = library.get(rid)
    if other is None:
        return f"no runbook named {rid!r}{suggestions.hint(rid)}"
    if step == "start" or other.node(step) is not None:
        return None
    return f"runbook {rid!r} has no step or conclusion named {step!r}"
