"""Reports: the JSON document every format is made from, and the reporters that print it.

Reporters are listeners fed the walk's events (live progress) and the final
report; they never run checks. Each is named by import string and loaded only
for the format asked.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

REPORTERS: dict[str, str] = {
    "text": "runbook.report.text:TextReporter",
    "json": "runbook.report.json:JsonReporter",
    "jsonl": "runbook.report.stream:JsonLinesReporter",
    "md": "runbook.report.markdown:MarkdownReporter",
    "html": "runbook.report.html:HtmlReporter",
    "junit": "runbook.report.junit:JunitReporter",
}


class Reporter(Protocol):
    def on_step(self, outcome: Any, evidence: Any) -> None: ...

    def on_node_done(self, outcome: Any) -> None: ...

    def render(self, report: dict[str, Any]) -> str: ...


def get_reporter(fmt: str, **options: Any) -> Reporter:
    module_name, _, attr = REPORTERS[fmt].partition(":")
    return getattr(importlib.import_module(module_name), attr)(**options)  # type: ignore[no-any-return]
