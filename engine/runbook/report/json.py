"""`--format json`: the `runbook-report/v1` document (schema: schema/report.v1.json)."""

from __future__ import annotations

import json
from typing import Any


class JsonReporter:
    def __init__(self, **_: Any) -> None:
        pass

    def on_step(self, outcome: Any, evidence: Any) -> None:
        pass

    def on_node_done(self, outcome: Any) -> None:
        pass

    def render(self, report: dict[str, Any]) -> str:
        return json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n"
