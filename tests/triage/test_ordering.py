"""triage/ordering.py: matches put in the order the ranking's data says, and only that."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from runbook.triage.hits import LineHit
from runbook.triage.ordering import order, role_rank
from runbook.triage.ranking import RANKING
from runbook.triage.sources import Source


@dataclass
class Fake:
    """What ordering reads of a match."""

    name: str
    role: str
    line: int
    score: float = 1.0
    generic: bool = False
    time: str | None = None
    catch_all: bool = False
    path: str = "a.log"

    @property
    def first(self) -> LineHit:
        return LineHit(self.line, self.name, Source(self.path), None, self.time)


def names(matches: list[Fake]) -> list[str]:
    return [m.name for m in matches]


def changed(**data: Any) -> dict[str, Any]:
    ranking = copy.deepcopy(RANKING)
    ranking.update(data)
    return ranking


MATCHES = [Fake("late-knock-on", "knock-on", 1), Fake("generic", "cause", 2, generic=True),
           Fake("cause-10", "cause", 10), Fake("cause-3", "cause", 3),
           Fake("cause-3-strong", "cause", 3, 2.0)]


def test_causes_then_specific_then_earliest_then_strongest() -> None:
    assert names(order(MATCHES)) == ["cause-3-strong", "cause-3", "cause-10", "generic", "late-knock-on"]


def test_the_keys_are_data() -> None:
    swapped = changed(roles=[RANKING["roles"][1], RANKING["roles"][0], *RANKING["roles"][2:]])
    assert names(order(MATCHES, swapped)) == [
        "late-knock-on", "cause-3-strong", "cause-3", "cause-10", "generic"]
    by_score = changed(order=[{"key": "score", "descending": True}, {"key": "position"}])
    assert names(order(MATCHES, by_score)) == [
        "cause-3-strong", "late-knock-on", "generic", "cause-3", "cause-10"]


def test_a_last_resort_conclusion_follows_the_causes_that_name_one() -> None:
    """`unhandled system error` (system-error-unexplained) on line 1 and NCCL's last error naming
    the failed connection on line 14, both causes: the one that names the cause comes first."""
    wrapper = Fake("system-error-unexplained", "cause", 1, catch_all=True)
    named = Fake("network-errors-in-log", "cause", 14)
    assert names(order([wrapper, named])) == ["network-errors-in-log", "system-error-unexplained"]
    knock_on = Fake("watchdog", "knock-on", 0)
    assert names(order([knock_on, wrapper])) == ["system-error-unexplained", "watchdog"]


def test_times_order_a_run_when_every_match_has_one() -> None:
    timed = [Fake("b", "cause", 1, time="10:00:05", path="b.log"),
             Fake("a", "cause", 1, time="10:00:01", path="c.log")]
    assert names(order(timed)) == ["a", "b"]
    assert names(order(timed, changed(by_time=None))) == ["b", "a"]  # by file, then line
    dated = [Fake("b", "cause", 1, time="2024-01-02 10:00:05"), Fake("a", "cause", 2, time="10:00:01")]
    assert names(order(dated)) == ["a", "b"]  # one without a date: the times of day compared
    untimed = [Fake("b", "cause", 1, time="10:00:05"), Fake("a", "cause", 2)]
    assert names(order(untimed)) == ["b", "a"]  # not every match has a time: by line


def test_a_role_not_in_the_table_comes_last() -> None:
    roles = ("cause", "knock-on", "similar", "healthy", "hunch")
    assert [role_rank(role) for role in roles] == [0, 1, 2, 3, 4]
