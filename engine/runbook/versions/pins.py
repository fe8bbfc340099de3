"""A runbook by name, found in a library, or the reason it cannot be: one line a person can act on.

`ID@1.2.0` pins the runbook's version and `ID@sha256:1f2e3d4c...` (8 hex digits or more)
its file digest: a runbook on the search path that differs is refused, so a script or
a postmortem runs exactly the tree it was written against. `runbook run` and `show` print
the reason (cli/resolve.py); the MCP server's tools answer with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from runbook.format.model import Runbook
from runbook.format.problems import did_you_mean
from runbook.library.runbooks import Library
from runbook.versions.rules import parse_semver

_DIGEST = re.compile(r"sha256:[0-9a-fA-F]{8,64}")
PIN_FORM = "ID@MAJOR.MINOR.PATCH or ID@sha256:HEX with at least 8 hex digits"


class PinError(ValueError):
    """An `ID@...` whose pin is neither a version nor a digest prefix."""


@dataclass
class RunbookNotFound(LookupError):
    """No runbook to walk: `reason` says why in one line; `problems` are its file's, if it has one."""

    reason: str
    problems: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.reason

    def one_line(self) -> str:
        """The reason with the file's first problem, for a caller that shows one line only."""
        if not self.problems:
            return self.reason
        others = len(self.problems) - 1
        more = f" (and {others} more; `runbook lint` shows them)" if others else ""
        return f"{self.reason} {self.problems[0]}{more}"


@dataclass(frozen=True)
class Reference:
    """A runbook as named on the command line: its id and what it is pinned to, if anything."""

    id: str
    pin: str | None = None

    @property
    def is_digest(self) -> bool:
        return bool(self.pin and self.pin.startswith("sha256:"))

    def matches(self, runbook: Runbook) -> bool:
        if self.pin is None:
            return True
        if self.is_digest:
            return runbook.digest.lower().startswith(self.pin.lower())
        return runbook.version == self.pin


def parse_reference(text: str) -> Reference:
    """`ID`, `ID@VERSION` or `ID@sha256:PREFIX`."""
    runbook_id, at, pin = text.partition("@")
    if not at:
        return Reference(runbook_id)
    if not (parse_semver(pin) or _DIGEST.fullmatch(pin)):
        raise PinError(f"{text!r}: {pin!r} is not a version or digest pin (expected {PIN_FORM})")
    return Reference(runbook_id, pin)


def resolve_runbook(name: str, library: Library) -> Runbook:
    """The runbook `name` (`ID`, `ID@VERSION`, `ID@sha256:PREFIX`) names; raises RunbookNotFound."""
    try:
        ref = parse_reference(name)
    except PinError as exc:
        raise RunbookNotFound(str(exc)) from None
    loaded = library.by_id.get(ref.id)
    if loaded is not None and not loaded.ok:  # a draft from `runbook new` still has its TODOs
        raise RunbookNotFound(f"{ref.id}: the file has problems:", [str(p) for p in loaded.problems])
    runbook = library.get(ref.id)
    if runbook is not None:
        if ref.matches(runbook):
            return runbook
        raise RunbookNotFound(pin_mismatch(ref, runbook))
    broken = [problems for file, problems in library.failed() if ref.id in file]
    if broken:
        raise RunbookNotFound(f"{ref.id}: the file has problems:", [str(p) for p in broken[0]])
    raise RunbookNotFound(f"no runbook named {ref.id!r}{did_you_mean(ref.id, library.by_id)}"
                          " (see `runbook list`)")


def pin_mismatch(ref: Reference, runbook: Runbook) -> str:
    """One line: which file, what it has, what was asked for, and the two ways out."""
    if ref.is_digest:
        has, wanted = f"digest {runbook.digest[:len('sha256:') + 12]}...", f"digest {ref.pin}"
        where = f"the runbook repository at the commit whose {ref.id} file has that digest"
    else:
        has, wanted = f"version {runbook.version}", f"version {ref.pin}"
        where = f"the runbook repository at the commit that has {ref.id} {ref.pin}"
    return (f"{runbook.path}: {ref.id} is {has}, not the pinned {wanted} "
            f"(check out {where} and put it on RUNBOOK_PATH, or drop the pin '@{ref.pin}')")
