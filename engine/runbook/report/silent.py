"""The base of reporters that print nothing while the walk runs, only the final report."""

from __future__ import annotations

from typing import Any


class SilentReporter:
    def __init__(self, **_: Any) -> None:
        pass

    def on_step(self, outcome: Any, evidence: Any) -> None:
        pass

    def on_node_done(self, outcome: Any) -> None:
        pass
