"""What triage makes of a message, for the message-family tests (test_families_*.py): the
(conclusion, role) of each match in order, and the checks those files make of it."""

from __future__ import annotations

from functools import cache

from runbook.library.runbooks import Library, load_library
from runbook.triage.result import triage_text


@cache
def library() -> Library:
    return load_library()


def found(text: str, source: str = "family") -> list[tuple[str, str]]:
    """(runbook:conclusion, role) of each match of `text`, pasted as one excerpt, first first."""
    result = triage_text(library(), None, text + "\n", source)
    return [(f"{m.runbook}:{m.conclusion}", m.role) for m in result.matches]


def assert_first(text: str, source: str, conclusion: str, role: str = "cause") -> None:
    """The first match is `conclusion` in `role`."""
    matches = found(text, source)
    assert matches and matches[0] == (conclusion, role), matches


def assert_near_miss(text: str, source: str, not_first: str, first: str | None = None) -> None:
    """The first match that is not a mere resemblance is not `not_first` (and is `first`, given)."""
    matches = found(text, source)
    causes = [(c, r) for c, r in matches if r != "similar"]
    assert not causes or causes[0][0] != not_first, matches
    if first is not None:
        assert causes and causes[0][0] == first, matches


def assert_never_cause(text: str, source: str, conclusion: str) -> None:
    """No match names `conclusion` as a cause."""
    matches = found(text, source)
    assert (conclusion, "cause") not in matches, matches


# Ray's node_manager.cc exit detail for a worker whose connection closed without an exit message
# (it names SIGKILL, `ray stop` and SIGSEGV as guesses)
RAY_EXIT_DETAIL = (
    "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error "
    "code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by "
    "OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed "
    "unexpectedly due to SIGSEGV or other unexpected errors.")
