"""PyTorch's `load_state_dict` key errors: the keys missing and unexpected, and whether a
wrapper's prefix explains them.

torch (nn/modules/module.py) raises, each list on its own line under `Error(s) in loading
state_dict for Net:`:

    Missing key(s) in state_dict: "fc.weight", "fc.bias".
    Unexpected key(s) in state_dict: "module.fc.weight", "module.fc.bias".

A model saved while wrapped (DistributedDataParallel and DataParallel add `module.`,
torch.compile `_orig_mod.`) and loaded unwrapped, or the other way round, misses every key under
one name and finds it under the other.

Facts:

- missing_count, unexpected_count: the keys the lines quote (as far as a line goes: a line is cut
  at `_text.MAX_LINE` characters)
- prefix: what put before one list's keys gives the other's (`module.`), or None
- prefix_on: "checkpoint" when the checkpoint's keys carry the prefix (the unexpected ones),
  "model" when the model's do (the missing ones), or None
- explained_by_prefix: the prefix explains at least `EXPLAINED_SHARE` of the shorter list's keys
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runbook.checks.facts._text import clipped

MISSING = re.compile(r"Missing key\(s\) in state_dict: (.*)")
UNEXPECTED = re.compile(r"Unexpected key\(s\) in state_dict: (.*)")
KEY = re.compile(r'"([^"\s]{1,300})"')
EXPLAINED_SHARE = 0.8  # of the shorter list: a few keys truly missing beside the prefix still count


def parse(lines: Sequence[str]) -> dict[str, Any] | None:
    """Facts of the last key lists in `lines`, or None when there are none."""
    missing: list[str] | None = None
    unexpected: list[str] | None = None
    for line in clipped(lines):
        if "key(s) in state_dict" not in line:
            continue
        if m := MISSING.search(line):
            missing = KEY.findall(m.group(1))
        if m := UNEXPECTED.search(line):
            unexpected = KEY.findall(m.group(1))
    if missing is None and unexpected is None:
        return None
    facts: dict[str, Any] = {"missing_count": len(missing or []), "unexpected_count": len(unexpected or []),
                             "prefix": None, "prefix_on": None, "explained_by_prefix": False}
    if missing and unexpected:
        for longer, shorter, side in ((unexpected, missing, "checkpoint"), (missing, unexpected, "model")):
            names = set(shorter)
            prefix = _prefix(longer[0], names)
            if prefix is None:
                continue
            explained = sum(1 for key in longer if key.startswith(prefix) and key[len(prefix):] in names)
            facts.update(prefix=prefix, prefix_on=side,
                         explained_by_prefix=explained >= EXPLAINED_SHARE * min(len(longer), len(shorter)))
            break
    return facts


def _prefix(key: str, names: set[str]) -> str | None:
    """The dotted prefix that, taken from `key`, leaves one of `names` (the shortest such prefix)."""
    at = key.find(".")
    while at != -1:
        if key[at + 1:] in names:
            return key[:at + 1]
        at = key.find(".", at + 1)
    return None
