"""`--format json`: the `runbook-report/v1` document (schema: schema/report.v1.json)."""

from __future__ import annotations

import json
from typing import Any

from runbook.report.silent import SilentReporter


class JsonReporter(SilentReporter):
    def render(self, report: dict[str, Any]) -> str:
        return json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n"
