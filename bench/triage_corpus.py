"""The real-world triage corpus (tests/data/triage-corpus/, see its README): its entries and
their split into `dev` (signatures and the known cases are written from it) and `holdout`
(never looked at while tuning). Read by bench/triage.py, bench/diagnosis.py and
scripts/known_cases.py: one copy of the loader and of the split rule.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "triage-corpus"
DEV_SHARE = 70  # percent


@dataclass
class Entry:
    path: Path
    source: str
    kind: str
    taxonomy: list[str]
    runbook: str | None
    conclusion: str | None
    also_accepted: tuple[str, ...] = ()  # other `runbook:conclusion` ids a person would accept

    @property
    def accepted_conclusions(self) -> list[str]:
        wanted = [f"{self.runbook}:{self.conclusion}"] if self.conclusion else []
        return wanted + list(self.also_accepted)

    @property
    def split(self) -> str:
        return split_of(self.source)


def split_of(url: str) -> str:
    """`dev` or `holdout`, by a hash of the source URL (every excerpt of a thread together)."""
    bucket = int(hashlib.sha256(url.strip().encode("utf-8")).hexdigest(), 16) % 100
    return "dev" if bucket < DEV_SHARE else "holdout"


def load_corpus() -> list[Entry]:
    entries = []
    for meta in sorted(CORPUS.glob("*/*.yaml")):
        data = yaml.safe_load(meta.read_text(encoding="utf-8"))
        entries.append(Entry(meta.with_suffix(".log"), data["source"], data["kind"],
                             list(data.get("taxonomy") or []), data.get("runbook"), data.get("conclusion"),
                             tuple(data.get("also_accepted") or ())))
    return entries
