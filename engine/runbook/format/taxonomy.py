"""The failure taxonomy: category ids that conclusions and triage results are labelled with."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml


@dataclass(frozen=True)
class Category:
    id: str
    group: str
    en: str
    zh: str
    seeds: tuple[str, ...]
    llama3: dict[str, Any] | None


@lru_cache(maxsize=1)
def load() -> dict[str, Category]:
    """Every category by id, from the copy of taxonomy.yaml shipped in the package."""
    text = resources.files("runbook").joinpath("data/taxonomy.yaml").read_text("utf-8")
    out: dict[str, Category] = {}
    for group, entries in (yaml.safe_load(text) or {}).items():
        for cid, body in entries.items():
            out[cid] = Category(cid, group, body["en"], body["zh"],
                                tuple(body.get("seeds", ())), body.get("llama3"))
    return out
