"""A library's index: what commands need to know of every runbook without loading each one.

Per file: its runbook id (None when it did not load), its problems (for the warnings about
files left out), its signatures and the named patterns of its `log` steps (what triage scans
for). `runbook run ID` finds ID's file here and loads only the runbooks the walk reaches;
`runbook triage` compiles every signature from here and loads only the runbooks that matched.

One index per set of search-path folders is kept in the load cache (library/cache.py), as a
map file -> (digest, summary): a file whose digest changed is summarised again, so it is
never stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runbook.format.loader import LoadResult, plain_problems, restore_problems
from runbook.format.model import Signature, Step
from runbook.format.problems import Problem
from runbook.library.cache import Store, key_of

# (runbook id or None, problems, signatures, log patterns) of one file, as plain data.
Summary = tuple[str | None, list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[str, str, str]]]
SUMMARY_VERSION = "1"


def step_patterns(step: Step) -> dict[str, str]:
    """The literal named regexes of a `log` check step (templated ones left out)."""
    patterns = step.check.with_.get("patterns") if step.check.type == "log" else None
    if not isinstance(patterns, dict):
        return {}
    return {name: source for name, source in patterns.items()
            if isinstance(name, str) and isinstance(source, str) and "{{" not in source
            and "{%" not in source}


def summarize(result: LoadResult) -> Summary:
    runbook = result.runbook
    problems = plain_problems(result.problems)
    if runbook is None:
        return None, problems, [], []
    signatures = [(s.pattern, s.goto, s.conclusion, s.role) for s in runbook.signatures]
    logs = [(step.id, name, source) for step in runbook.steps.values()
            for name, source in step_patterns(step).items()]
    return runbook.id, problems, signatures, logs


def summary_problems(file: str, summary: Summary) -> list[Problem]:
    return restore_problems(file, summary[1])


def summary_signatures(summary: Summary) -> list[Signature]:
    return [Signature(pattern, goto, conclusion, role) for pattern, goto, conclusion, role in summary[2]]


def _valid(entry: Any) -> bool:
    """An index entry as `write_index` wrote it: (digest, summary)."""
    try:
        digest, (rid, problems, signatures, logs) = entry
        return (isinstance(digest, str) and (rid is None or isinstance(rid, str))
                and all(len(p) == 5 and isinstance(p[2], tuple) for p in problems)
                and all(len(s) == 4 and isinstance(s[0], str) for s in signatures)
                and all(len(x) == 3 and all(isinstance(v, str) for v in x) for x in logs))
    except (TypeError, ValueError):
        return False


def _key(roots: Sequence[str]) -> str:
    return key_of("index", SUMMARY_VERSION, *roots)


def read_index(store: Store, roots: Sequence[str]) -> dict[str, tuple[str, Summary]]:
    """file -> (digest, summary) as last written for these search-path folders; {} if none."""
    stored = store.read("index", _key(roots))
    if not isinstance(stored, dict):
        return {}
    return {file: entry for file, entry in stored.items() if isinstance(file, str) and _valid(entry)}


def write_index(store: Store, roots: Sequence[str], entries: dict[str, tuple[str, Summary]]) -> None:
    store.write("index", _key(roots), entries)
