"""The marker `runbook new` writes into every text it scaffolds.

Lint refuses a runbook or an article that still holds it, so a scaffold cannot be
merged (or run) before a person has written the real texts.
"""

from __future__ import annotations

MARKER = "TODO(runbook new)"
MESSAGE = "TODO left by runbook new: write the real text"


def holds_marker(value: object) -> bool:
    return isinstance(value, str) and MARKER in value
