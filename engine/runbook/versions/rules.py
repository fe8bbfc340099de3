"""Versions that mean something: a runbook's behaviour compared with the same file at a git revision.

Behaviour is what decides where a walk goes and what it does: `start`, `params`
(type, required, default), steps (check type, `with`, timeout, branches' `when`
and `goto` in order, `default`), conclusions (severity, taxonomy, fixes' `run`,
`effect`, `verify`), `signatures` and `requires`. Texts are not behaviour.
Rules, checked by `runbook lint --base REV`: changed behaviour needs a higher
version, a removed step or conclusion a higher MAJOR version, a version never
goes down, and a new version has a changelog entry in both languages.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runbook.format.problems import DocPath, format_path

_SEMVER = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-([0-9A-Za-z.-]+))?")
MAX_SHOWN = 4  # changed paths named in one message


@dataclass(frozen=True)
class SemVer:
    """MAJOR.MINOR.PATCH with an optional pre-release, ordered by semver precedence."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()

    def _key(self) -> tuple[Any, ...]:
        # A pre-release sorts before its release; numeric identifiers before alphanumeric ones.
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, (0, *pre) if self.pre else (1,))

    def __lt__(self, other: SemVer) -> bool:
        return self._key() < other._key()

    def __le__(self, other: SemVer) -> bool:
        return self._key() <= other._key()

    def __str__(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return f"{core}-{'.'.join(self.pre)}" if self.pre else core

    def next_major(self) -> SemVer:
        return SemVer(self.major + 1, 0, 0)

    def next_minor(self) -> SemVer:
        return SemVer(self.major, self.minor + 1, 0)

    def next_patch(self) -> SemVer:
        # The release of a pre-release is its next patch-level version.
        return SemVer(self.major, self.minor, self.patch if self.pre else self.patch + 1)


def parse_semver(value: Any) -> SemVer | None:
    match = _SEMVER.fullmatch(str(value)) if isinstance(value, str) else None
    if match is None:
        return None
    major, minor, patch, pre = match.groups()
    return SemVer(int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else ())


# ---- behaviour: the parts of a document that change what a walk does ----


def behaviour(data: dict[str, Any]) -> dict[str, Any]:
    """The behaviour of a runbook document, normalised so equal behaviour compares equal."""
    return {
        "start": data.get("start"),
        "requires": data.get("requires"),
        "params": {name: _param(p) for name, p in _mapping(data.get("params")).items()},
        "steps": {sid: _step(s) for sid, s in _mapping(data.get("steps")).items()},
        "conclusions": {cid: _conclusion(c) for cid, c in _mapping(data.get("conclusions")).items()},
        "signatures": [_pick(s, "pattern", "goto", "conclusion", "role")
                       for s in _list(data.get("signatures"))],
    }


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _pick(value: Any, *keys: str) -> Any:
    """The given keys of a mapping; anything else (which the schema reports) as it is."""
    return {k: value[k] for k in keys if k in value} if isinstance(value, dict) else value


def _param(p: Any) -> Any:
    if not isinstance(p, dict):
        return p
    return {**_pick(p, "type", "default"), "required": bool(p.get("required", False))}


def _check(check: Any) -> dict[str, Any]:
    check = _mapping(check)
    return {"type": check.get("type"), "with": _mapping(check.get("with")),
            "timeout": _seconds(check.get("timeout"))}


def _seconds(value: Any) -> Any:
    from runbook.format.loader import parse_duration

    try:  # `5s` and `5` are the same timeout
        return None if value is None else parse_duration(value)
    except ValueError:
        return value


def _step(s: Any) -> dict[str, Any]:
    s = _mapping(s)
    return {"check": _check(s.get("check")), "default": s.get("default"),
            "branches": [_pick(b, "when", "goto") for b in _list(s.get("branches"))]}


def _conclusion(c: Any) -> dict[str, Any]:
    c = _mapping(c)
    fixes = [{**_pick(f, "run", "effect"), "verify": _verify(_mapping(f).get("verify"))}
             for f in _list(c.get("fixes"))]
    return {"severity": c.get("severity"), "taxonomy": _list(c.get("taxonomy")), "fixes": fixes}


def _verify(v: Any) -> dict[str, Any] | None:
    v = _mapping(v)
    return {"check": _check(v.get("check")), "passes": v.get("passes")} if v else None


def differences(old: Any, new: Any, path: DocPath = ()) -> list[str]:
    """Doc paths where two behaviours differ: `steps.x.branches[1].when`, `steps.y (added)`."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in [*old, *(k for k in new if k not in old)]:
            if key not in new:
                out.append(f"{format_path((*path, key))} (removed)")
            elif key not in old:
                out.append(f"{format_path((*path, key))} (added)")
            else:
                out.extend(differences(old[key], new[key], (*path, key)))
        return out
    if isinstance(old, list) and isinstance(new, list):
        pairs = enumerate(zip(old, new, strict=False))  # the longer list's rest is added/removed below
        out = [d for i, (a, b) in pairs for d in differences(a, b, (*path, i))]
        out += [f"{format_path((*path, i))} (removed)" for i in range(len(new), len(old))]
        out += [f"{format_path((*path, i))} (added)" for i in range(len(old), len(new))]
        return out
    # `1` and `true`, or `1` and `1.0`, are different values in a document.
    same = type(old) is type(new) and old == new
    return [] if same else [format_path(path)]


def removed_nodes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Steps and conclusions of the old document that the new one no longer has."""
    return [f"{section}.{name}" for section in ("steps", "conclusions")
            for name in _mapping(old.get(section)) if name not in _mapping(new.get(section))]


# ---- the rules ----

Report = Callable[[DocPath, str], None]


def check_version(old: dict[str, Any] | None, new: dict[str, Any], base: str, report: Report) -> None:
    """Report (doc path, message) for each versioning rule `new` breaks against `old` (None: new file)."""
    new_version = parse_semver(new.get("version"))
    if new_version is None:
        return  # the schema reports a malformed version
    old_version = parse_semver(old.get("version")) if old is not None else None
    if old is not None and old_version is not None:
        _check_bump(old, new, old_version, new_version, base, report)
    if old_version is None or old_version != new_version:
        _check_changelog(new, new_version, report)


def _check_bump(old: dict[str, Any], new: dict[str, Any], old_version: SemVer, new_version: SemVer,
                base: str, report: Report) -> None:
    if new_version < old_version:
        report(("version",), f"version went down from {old_version} at {base} to {new_version} "
               f"(a version only goes up: use {old_version.next_patch()} or higher)")
        return
    removed = removed_nodes(old, new)
    if removed and new_version.major <= old_version.major:
        report(("version",), f"{_some(removed)} removed since {base}: a runbook that loses a step "
               f"or conclusion needs a new major version (bump {old_version} to "
               f"{old_version.next_major()} and add a changelog entry)")
        return
    changed = differences(behaviour(old), behaviour(new))
    if changed and new_version <= old_version:
        report(("version",), f"behaviour changed since {base} ({_some(changed)}) but version is "
               f"still {new_version} (bump it to {old_version.next_minor()} for new behaviour or "
               f"{old_version.next_patch()} for a fix, and add a changelog entry)")


def _check_changelog(new: dict[str, Any], version: SemVer, report: Report) -> None:
    entries = _list(new.get("changelog"))
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and parse_semver(entry.get("version")) == version:
            for lang, name in (("en", "English"), ("zh", "Chinese")):
                text = entry.get(lang)
                if not isinstance(text, str) or not text.strip():
                    report(("changelog", i, lang), f"the changelog entry for {version} has no "
                           f"{name} text ({lang}: say what changed)")
            return
    where: DocPath = ("changelog",) if "changelog" in new else ("version",)
    report(where, f"no changelog entry for version {version} (add `- {{version: {version}, "
           "en: what changed, zh: 改动说明}` under changelog:)")


def _some(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_SHOWN])
    more = len(items) - MAX_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown
