"""What this engine can read: its own version against a runbook's `requires`, and apiVersions.

Stdlib only: the loader calls it for every file, and `runbook --help` must stay light.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import runbook

UPGRADE = "pip install -U runbook"

# The runbook format's apiVersions, oldest first; the last is the one this engine reads.
# Each older one has a migration in runbook.versions.migrate (a test holds the two in step),
# so the loader can tell "older: run `runbook migrate`" from "unknown" without importing it.
API_VERSIONS = ("runbook/v1beta1", "runbook/v1")
API_VERSION = API_VERSIONS[-1]
REQUIRES_FORM = "expected e.g. '>=0.3', '>=0.3.1' or '>=0.3, <2'"
_CLAUSE = re.compile(r"\s*(>=|<)\s*([0-9]+(?:\.[0-9]+){0,2})\s*")
_RELEASE = re.compile(r"[0-9]+(?:\.[0-9]+)*")

Release = tuple[int, ...]


class RequiresError(ValueError):
    """A `requires` value that is not a version requirement."""


@dataclass(frozen=True)
class Requirement:
    """`>=LOW` and any number of `<HIGH` bounds, as written in a runbook's `requires`."""

    text: str
    minimum: Release
    below: tuple[Release, ...]

    def allows(self, version: str) -> bool:
        release = release_of(version)
        return (_cmp(release, self.minimum) >= 0
                and all(_cmp(release, high) < 0 for high in self.below))


def parse_requires(text: str) -> Requirement:
    """`>=X[.Y[.Z]]`, optionally followed by `, <X[.Y[.Z]]` upper bounds."""
    minimum: Release | None = None
    below: list[Release] = []
    for clause in text.split(","):
        match = _CLAUSE.fullmatch(clause)
        if not match:
            raise RequiresError(f"{text!r} is not a version requirement ({REQUIRES_FORM})")
        op, release = match.group(1), tuple(int(n) for n in match.group(2).split("."))
        if op == "<":
            below.append(release)
        elif minimum is None:
            minimum = release
        else:
            raise RequiresError(f"{text!r} gives two lower bounds ({REQUIRES_FORM})")
    if minimum is None:
        raise RequiresError(f"{text!r} has no lower bound '>=' ({REQUIRES_FORM})")
    return Requirement(text.strip(), minimum, tuple(below))


def release_of(version: str) -> Release:
    """The numeric release of a version string: `0.3.0rc1` -> (0, 3, 0)."""
    match = _RELEASE.match(version.strip())
    return tuple(int(n) for n in match.group(0).split(".")) if match else (0,)


def _cmp(a: Release, b: Release) -> int:
    """Compare releases with missing parts as zeros (0.3 == 0.3.0)."""
    width = max(len(a), len(b))
    left, right = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return (left > right) - (left < right)


def engine_version() -> str:
    return runbook.__version__  # read at call time, so tests can stand in another version


def unmet_requires(text: str) -> str | None:
    """Why this engine cannot read a runbook that `requires: text`, or None when it can.

    Raises RequiresError when `text` is not a requirement."""
    requirement, engine = parse_requires(text), engine_version()
    return None if requirement.allows(engine) else unmet_message(requirement, engine)


def unmet_message(requirement: Requirement, engine: str) -> str:
    """Why this engine cannot read the runbook, and what to install instead."""
    if _cmp(release_of(engine), requirement.minimum) < 0:
        action = f"upgrade: {UPGRADE}"
    else:  # too new for a runbook that caps the engine
        action = f"install a matching engine: pip install 'runbook{requirement.text.replace(' ', '')}'"
    return f"this runbook needs runbook engine {requirement.text} but this is {engine} ({action})"


def unsupported_api_version(version: object, current: str) -> str:
    """The message for an apiVersion that is neither current nor a known older one."""
    return (f"unsupported apiVersion {version!r}: this engine reads {current} "
            f"(a newer format needs a newer engine: {UPGRADE})")


def older_api_version(version: str, file: str) -> str:
    return f"apiVersion {version!r} is an older format: run `runbook migrate {file}`"
