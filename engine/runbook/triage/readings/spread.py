"""What differs across the hosts and ranks of one paste or directory: versions and NCCL settings.

A job whose hosts run different NCCL, torch or CUDA builds, or different `NCCL_*` settings, hangs
or fails in ways no single line names: in NVIDIA/nccl#1634 one host loads the SHARP net plugin and
the other does not, and the test hangs with no error. Each line that states a version or a
setting is read with who wrote it (the host of NCCL's `host:pid:tid [dev]` prefix, else the
file's host, else the rank), and a fact with more than one value is reported with who has which.

The rules are data (FACTS, IDENTITY): the site's triage page applies the same ones
(site/static/triage.js, exported by site/triage_export.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from runbook.triage.sources import Source, line_rank

# fact: the name a person reads; pattern: its value is group 1 (with two groups, group 1 names
# the fact and group 2 is the value); value: the value of a pattern without a group; needle: text
# (lowercase) a line must contain before the pattern runs; conclusion: what a difference in it
# means, as `runbook:conclusion` (the live drift analysis concludes the same on the nodes).
_VERSIONS = "nccl-errors:nccl-version-differs-from-peers"
_SETTINGS = "nccl-errors:nccl-settings-differ"
FACTS: list[dict[str, str]] = [
    {"fact": "NCCL", "pattern": r"NCCL version (\d+\.\d+\.\d+)", "needle": "nccl version",
     "conclusion": _VERSIONS},
    {"fact": "CUDA of NCCL's build", "pattern": r"NCCL version \d+\.\d+\.\d+\+cuda(\d+\.\d+)",
     "needle": "nccl version", "conclusion": _VERSIONS},
    {"fact": "torch", "pattern": r"(?:PyTorch version: |\btorch==|^torch\s+)(\d+\.\d+\.\d+[^\s,;)'\"]*)",
     "needle": "torch", "conclusion": _VERSIONS},
    {"fact": "CUDA driver (nvidia-smi)", "pattern": r"CUDA Version: (\d+\.\d+)", "needle": "cuda version",
     "conclusion": _VERSIONS},
    {"fact": "CUDA driver (NCCL)", "pattern": r"cudaDriverVersion (\d+)", "needle": "cudadriverversion",
     "conclusion": _VERSIONS},
    {"fact": "NCCL setting", "pattern": r"\b(NCCL_[A-Z0-9_]+) set by environment to (\S+)",
     "needle": "set by environment", "conclusion": _SETTINGS},
    {"fact": "NCCL net plugin",
     "pattern": r"NET/Plugin ?: (?:Could not find: libnccl-net\.so|.*No plugin found)",
     "value": "none (NCCL's internal network)", "needle": "plugin", "conclusion": _SETTINGS},
    {"fact": "NCCL net plugin", "pattern": r"Plugin Path : (\S+)", "needle": "plugin path",
     "conclusion": _SETTINGS},
]
# NCCL's line prefix `gpu001:4242:4300 [3]` names the host (after a launcher's own prefix).
IDENTITY = r"(?:^|[\s:>\]])([A-Za-z][\w.-]*):\d+:\d+ \[\d+\]"
MAX_SHOWN = 8  # who holds a value: the first ones, then how many more
READING = "differs"  # a difference as a reading, for the ranking (as_readings)
TEXT_MAX = 240  # characters of the line that first states a value

_FACTS = [(spec, re.compile(spec["pattern"])) for spec in FACTS]
IDENTITY_RE = re.compile(IDENTITY)
_NEEDLES = tuple(sorted({spec["needle"] for spec in FACTS}))


def may_state_facts(lowered: str) -> bool:
    """Whether lowercased text may hold a line FACTS reads (a cheap test before each line)."""
    return any(needle in lowered for needle in _NEEDLES)


def who_wrote(raw: str, source: Source, many_sources: bool) -> str | None:
    """Who wrote a line: NCCL's host prefix, else the file's host, else the rank a launcher's
    prefix or the file names, else (with several files) the file; None for one anonymous file."""
    host = IDENTITY_RE.search(raw[:240])
    if host is not None:
        return host.group(1)
    if source.host:
        return source.host
    rank = line_rank(raw)
    rank = rank if rank is not None else source.rank
    if rank is not None:
        return f"rank {rank}"
    return source.path if many_sources else None


@dataclass
class _Seen:
    who: list[str] = field(default_factory=list)
    first: str = ""  # file:line where it was first stated
    line: str = ""  # that line, normalised


@dataclass
class Spread:
    """Every fact's values and who states each, in the order they were met."""

    values: dict[str, dict[str, _Seen]] = field(default_factory=dict)
    conclusions: dict[str, str] = field(default_factory=dict)  # fact -> runbook:conclusion
    sources: int = 0

    def see(self, raw: str, text: str, source: Source, line_no: int) -> None:
        """Read one line: `raw` as written (its prefix names the host), `text` normalised."""
        lowered = text.lower()
        if not may_state_facts(lowered):
            return
        for spec, regex in _FACTS:
            if spec["needle"] not in lowered:
                continue
            found = regex.search(text)
            if found is None:
                continue
            who = who_wrote(raw, source, self.sources > 1)
            if who is None:
                return
            groups = found.groups()
            fact, value = ((groups[0], groups[1]) if len(groups) == 2
                           else (spec["fact"], groups[0] if groups else spec["value"]))
            seen = self.values.setdefault(fact, {}).setdefault(
                value, _Seen(first=f"{source.path}:{line_no}", line=text[:TEXT_MAX]))
            self.conclusions[fact] = spec["conclusion"]
            if who not in seen.who:
                seen.who.append(who)

    def differences(self) -> list[dict[str, Any]]:
        """The facts stated with more than one value, each value with who states it."""
        out = []
        for fact, values in self.values.items():
            if len(values) < 2:
                continue
            out.append({"fact": fact, "conclusion": self.conclusions[fact], "values": [
                {"value": value, "who": seen.who[:MAX_SHOWN], "more": max(0, len(seen.who) - MAX_SHOWN),
                 "first": seen.first, "line": seen.line} for value, seen in values.items()]})
        return out


def describe(differences: list[dict[str, Any]], lang: str = "en") -> str:
    """One sentence: which facts differ, and who has which value."""
    zh = lang == "zh"
    parts = []
    for diff in differences:
        held = []
        for item in diff["values"]:
            who = ", ".join(item["who"]) + (f" (+{item['more']})" if item["more"] else "")
            held.append(f"{item['value']}（{who}）" if zh else f"{item['value']} on {who}")
        parts.append(f"{diff['fact']}：{'；'.join(held)}" if zh else f"{diff['fact']}: {'; '.join(held)}")
    if zh:
        return "各主机/rank 之间不一致——" + "；".join(parts)
    return "differs across hosts/ranks: " + " | ".join(parts)


def as_readings(differences: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each difference as a reading of the conclusion it points to, for the ranking when no line
    names a failure: a guess (a setting that differs can be harmless), but the most specific
    conclusion such a paste supports (verdict.from_readings keeps the first per conclusion)."""
    return [{"reading": READING, "conclusion": diff["conclusion"], "facts": {"difference": diff},
             "guess": True} for diff in differences]


def describe_reading(reading: dict[str, Any], lang: str = "en") -> str:
    return describe([reading["facts"]["difference"]], lang)
