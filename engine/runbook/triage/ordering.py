"""The order of matches, as the ranking's data says (ranking.py `order` and `by_time`).

Each sort key names a field of a match; what a field means is written here once (and once in
site/static/triage.js, for the page's matches), the order of the keys and their direction is
data. The sort is stable: matches equal on every key keep the order they came in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import groupby
from typing import Any, Protocol, TypeVar

from runbook.triage.hits import LineHit
from runbook.triage.ranking import RANKING
from runbook.triage.sources import time_of_day


class Ranked(Protocol):
    """What ordering reads of a match (verdict.Match)."""

    role: str
    score: float

    catch_all: bool

    @property
    def generic(self) -> bool: ...

    @property
    def first(self) -> LineHit | None: ...


M = TypeVar("M", bound=Ranked)


def role_rank(role: str, ranking: Mapping[str, Any] = RANKING) -> int:
    """The role's place in the roles table, most telling first; a role not in it after all
    that are. `min(roles, key=role_rank)` is the role a match or a verdict takes."""
    ids = [entry["id"] for entry in ranking["roles"]]
    return ids.index(role) if role in ids else len(ids)


def position(line: LineHit | None) -> tuple[int, str, int]:
    """Where a line is, to put earlier lines first: file, line number; no line after all."""
    if line is None:
        return (1, "", 0)
    return (0, line.source.path, line.line_no)


FIELDS: dict[str, Callable[[Ranked, Mapping[str, Any]], Any]] = {
    "role": lambda match, ranking: role_rank(match.role, ranking),
    "generic": lambda match, ranking: match.generic,
    "catch_all": lambda match, ranking: match.catch_all,
    "position": lambda match, ranking: position(match.first),
    "score": lambda match, ranking: match.score,
}


def order(matches: list[M], ranking: Mapping[str, Any] = RANKING) -> list[M]:
    """`matches` sorted by the ranking's keys, then by time within runs (`by_time`)."""
    ordered = list(matches)
    for key in reversed(ranking["order"]):  # stable sorts, last key first: one sort by all keys
        field = FIELDS[key["key"]]
        ordered.sort(key=lambda match: field(match, ranking), reverse=bool(key.get("descending")))
    rule = ranking.get("by_time")
    return ordered if rule is None else by_time(ordered, rule["within"], ranking)


def by_time(matches: list[M], within: list[str], ranking: Mapping[str, Any] = RANKING) -> list[M]:
    """Within each run of matches equal on the `within` fields, earlier timestamps first when
    every match of the run has one; the date too when all have one, else the time of day."""
    def tier(match: M) -> tuple[Any, ...]:
        return tuple(FIELDS[name](match, ranking) for name in within)

    out: list[M] = []
    for _, group in groupby(matches, key=tier):
        run = list(group)
        times = [m.first.time if m.first else None for m in run]
        if len(run) > 1 and all(times):
            dated = all(" " in t for t in times if t)
            run.sort(key=lambda m: _clock(m, dated))  # stable: lines of one clock keep their order
        out.extend(run)
    return out


def _clock(match: Ranked, dated: bool) -> str:
    time = match.first.time if match.first and match.first.time else ""
    return time if dated else time_of_day(time)
