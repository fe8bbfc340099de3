"""`--format html`: one self-contained page (no scripts, no external files) to attach or mail.

It is the Markdown report rendered by markdown-it-py with raw HTML disabled, so text
from checks and runbooks is always escaped.
"""

from __future__ import annotations

import html
from typing import Any

from runbook.report.markdown import MarkdownReporter

STYLE = """body{font:15px/1.5 system-ui,"Noto Sans CJK SC","WenQuanYi Micro Hei",sans-serif;
max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1b1f24}
code,pre{font:13px ui-monospace,monospace;background:#f3f4f6;border-radius:4px}
code{padding:.1em .3em}pre{padding:.6em .8em;overflow-x:auto}pre code{padding:0}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:.2em .6em}
h2{border-top:1px solid #d0d7de;padding-top:1rem}"""


class HtmlReporter(MarkdownReporter):
    def render(self, report: dict[str, Any]) -> str:
        from markdown_it import MarkdownIt

        body = MarkdownIt("commonmark", {"html": False}).enable("table").render(super().render(report))
        title = html.escape(f"{report['runbook']['id']}: {report['runbook']['title']}")
        return (f'<!doctype html>\n<html lang="{"zh-CN" if self.lang == "zh" else "en"}">\n<head>'
                f'<meta charset="utf-8"><title>{title}</title><style>{STYLE}</style></head>\n'
                f"<body>\n{body}</body>\n</html>\n")
