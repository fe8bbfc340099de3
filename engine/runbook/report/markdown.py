"""`--format md`: the report as Markdown, for a ticket, a chat thread or a postmortem.

Nodes that ended alike are one section (problems first), like the text report; each
section shows the path with the values that decided every branch, the conclusion and
the fixes with the commands as they run on those nodes.
"""

from __future__ import annotations

from typing import Any

from runbook.report.silent import SilentReporter
from runbook.report.text import (
    SAMPLE,
    SUMMARY_PER_NODE_MAX,
    UI,
    _groups,
    _value,
    exit_line,
    incomplete_line,
    job_lines,
    sample_names,
    summary_groups,
)

SEVERITY = {"ok": "✅", "info": "ℹ️", "warning": "⚠️", "critical": "🛑"}
SEVERITY_WORD = {"en": "severity", "zh": "严重程度"}


class MarkdownReporter(SilentReporter):
    def __init__(self, lang: str = "en", **_: Any) -> None:
        self.lang, self.ui = lang, UI[lang]

    def render(self, report: dict[str, Any]) -> str:
        rb = report["runbook"]
        jobs = [f"> **{_inline(line)}**" for line in job_lines(report, self.lang)]
        lines = [*jobs, *([""] if jobs else []), f"# {_inline(rb['title'])}", "",
                 f"`runbook {rb['id']}` {rb['version']} · {len(report['nodes'])} "
                 f"{self.ui['nodes'] if self.lang == 'zh' else 'node(s)'} · {report['started_at']} · "
                 f"{report['duration_s']:.2f}s", ""]
        if report["summary"].get("incomplete"):
            lines += [f"**{_inline(incomplete_line(self.ui, report))}**", ""]
        for group in _groups(report["nodes"]):
            lines.extend(self._group(group))
        lines.extend(self._summary(report))
        return "\n".join(lines) + "\n"

    def _group(self, nodes: list[dict[str, Any]]) -> list[str]:
        first, c = nodes[0], nodes[0].get("conclusion")
        names = sample_names([n["node"] for n in nodes], self.ui)
        if c:
            head = (f"## {SEVERITY[c['severity']]} {_inline(c['title'])}: `{names}`")
            meta = f"`{c['id']}` · {c['severity']} · {', '.join(c['taxonomy']) or '-'}"
        else:
            head = f"## 🛑 {self.ui['status'].get(first['status'], first['status'])}: `{names}`"
            meta = f"{self.ui['reason']}: {_inline(first.get('reason') or '-')}"
        findings = sorted({n["finding"] for n in nodes if n.get("finding")})
        if len(findings) > SAMPLE:
            findings = [*findings[:SAMPLE], self.ui["more"].format(n=len(findings) - SAMPLE)]
        out = [head, "", *(f"**{_inline(f)}**\n" for f in findings), meta, "", f"**{self.ui['path']}**", ""]
        for i, ev in enumerate(first["evidence"], 1):
            timed = " ⏱" if ev["result"].get("timed_out") else ""
            when = self.ui["default"] if ev.get("when") is None else f"{self.ui['when']} `{ev['when']}`"
            values = ", ".join(f"`{k}={_value(v)}`" for k, v in ev.get("decided_by", {}).items())
            out.append(f"{i}. `{ev['step']}` ({ev['check']}, {ev['duration_s']:.2f}s){timed} → "
                       f"`{ev['goto'] or '·'}`: {when}" + (f" · {values}" if values else ""))
        out.append("")
        if c:
            out.extend([f"**{self.ui['conclusion']}**", "", c["explanation"].strip(), ""])
            if c["fixes"]:
                out.extend([f"**{self.ui['fixes']}**", ""])
            for i, fix in enumerate(c["fixes"], 1):
                out.append(f"{i}. {_inline(fix['title'])} (`{fix['effect']}`)")
                if fix.get("body"):
                    out.extend(["", *("   " + line if line else "" for line in
                                     fix["body"].strip().splitlines())])
                commands = sorted({n["conclusion"]["fixes"][i - 1].get("run") or "" for n in nodes})
                commands = [c for c in commands if c]
                if len(commands) > SAMPLE:
                    out.extend(["", "   " + self.ui["more_nodes"].format(n=len(commands) - SAMPLE)])
                for command in commands[:SAMPLE]:
                    out.extend(["", "   ```sh", *("   " + line for line in command.strip().splitlines()),
                                "   ```"])
                out.append("")
            if c.get("see_also"):
                out.extend([f"{self.ui['see_also']}: {', '.join(c['see_also'])}", ""])
        return out

    def _summary(self, report: dict[str, Any]) -> list[str]:
        if len(report["nodes"]) > SUMMARY_PER_NODE_MAX:
            head = f"| {self.ui['conclusion']} | {SEVERITY_WORD[self.lang]} | {self.ui['count']} | " \
                   f"{self.ui['sample']} |"
            out = [f"## {self.ui['summary']}", "", head, "|---|---|---|---|"]
            out.extend(f"| {what} | {sev} | {len(names)} | `{sample_names(names, self.ui)}` |"
                       for what, sev, names in summary_groups(report, self.ui))
            return [*out, "", exit_line(self.ui, report)]
        head = f"| {self.ui['node']} | {self.ui['conclusion']} | {SEVERITY_WORD[self.lang]} |"
        out = [f"## {self.ui['summary']}", "", head, "|---|---|---|"]
        for n in report["nodes"]:
            c = n.get("conclusion")
            what = c["id"] if c else self.ui["status"].get(n["status"], n["status"])
            out.append(f"| `{n['node']}` | {what} | {c['severity'] if c else n['status']} |")
        return [*out, "", exit_line(self.ui, report)]


def _inline(text: str) -> str:
    """One line of text for a heading or a table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")
