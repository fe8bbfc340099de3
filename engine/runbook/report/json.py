"""`--format json`: the `runbook-report/v1` document (schema: schema/report.v1.json)."""

from __future__ import annotations

from typing import Any

from runbook.report.prettyjson import dumps
from runbook.report.silent import SilentReporter


class JsonReporter(SilentReporter):
    def render(self, report: dict[str, Any]) -> str:
        return dumps(report) + "\n"
