"""Find a runbook by id on the search path, saying clearly why when it can't.

`ID@1.2.0` pins the runbook's version and `ID@sha256:1f2e3d4c...` (8 hex digits or more)
its file digest: a runbook on the search path that differs is refused, so a script or
a postmortem runs exactly the tree it was written against.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from runbook.cli.library_warnings import warn_unloaded
from runbook.format.model import Runbook
from runbook.format.problems import did_you_mean
from runbook.library.lazy import open_library
from runbook.library.runbooks import Library
from runbook.versions.rules import parse_semver

_DIGEST = re.compile(r"sha256:[0-9a-fA-F]{8,64}")
PIN_FORM = "ID@MAJOR.MINOR.PATCH or ID@sha256:HEX with at least 8 hex digits"


class PinError(ValueError):
    """An `ID@...` whose pin is neither a version nor a digest prefix."""


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


def find_runbook(name: str, library: Library | None = None) -> Runbook | None:
    """The runbook `name` (`ID`, `ID@VERSION`, `ID@sha256:PREFIX`) names, or None after
    printing why there is none."""
    try:
        ref = parse_reference(name)
    except PinError as exc:
        print(f"runbook: {exc}", file=sys.stderr)
        return None
    library = library or open_library()
    warn_unloaded(library)
    runbook = library.get(ref.id)
    loaded = library.by_id.get(ref.id)
    if loaded is not None and not loaded.ok:  # a draft from `runbook new` still has its TODOs
        print(f"runbook: {ref.id}: the file has problems:", file=sys.stderr)
        for problem in loaded.problems:
            print(f"  {problem}", file=sys.stderr)
        return None
    if runbook is not None:
        if ref.matches(runbook):
            return runbook
        print(f"runbook: {pin_mismatch(ref, runbook)}", file=sys.stderr)
        return None
    broken = [problems for file, problems in library.failed() if ref.id in file]
    if broken:
        print(f"runbook: {ref.id}: the file has problems:", file=sys.stderr)
        for problem in broken[0]:
            print(f"  {problem}", file=sys.stderr)
        return None
    print(f"runbook: no runbook named {ref.id!r}{did_you_mean(ref.id, library.by_id)}"
          " (see `runbook list`)", file=sys.stderr)
    return None


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
