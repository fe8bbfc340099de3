"""The receiver's page: the latest alerts, each with its conclusion and its report.

Everything on it comes from alerts (labels anyone who can post to Alertmanager writes) or from
nodes, so every value is HTML-escaped; the page has no script.
"""

from __future__ import annotations

import html
from typing import Any

from runbook.alerts.notify import SIGN

UI = {
    "en": {"title": "runbook: alerts diagnosed", "when": "finished", "alert": "alert", "nodes": "nodes",
           "conclusion": "conclusion", "runbook": "runbook", "report": "report", "none": "No alert yet.",
           "waiting": "waiting", "running": "running", "failed": "could not run"},
    "zh": {"title": "runbook：已诊断的告警", "when": "完成时间", "alert": "告警", "nodes": "节点",
           "conclusion": "结论", "runbook": "runbook", "report": "报告", "none": "还没有告警。",
           "waiting": "等待中", "running": "运行中", "failed": "无法运行"},
}
STYLE = ("body{font:14px/1.5 system-ui,'Noto Sans CJK SC',sans-serif;margin:2rem}"
         "table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:.3em .6em;"
         "vertical-align:top;text-align:left}small{color:#57606a}")


def render(entries: list[dict[str, Any]], waiting: int, running: int, lang: str = "en") -> bytes:
    ui = UI.get(lang, UI["en"])
    head = "".join(f"<th>{ui[k]}</th>" for k in ("when", "alert", "nodes", "conclusion", "runbook", "report"))
    rows = "\n".join(_row(e, ui) for e in entries) or f'<tr><td colspan="6">{ui["none"]}</td></tr>'
    return (f'<!doctype html>\n<html lang="{"zh-CN" if lang == "zh" else "en"}"><head><meta charset="utf-8">'
            f'<meta http-equiv="refresh" content="30"><title>{ui["title"]}</title><style>{STYLE}</style>'
            f'</head>\n<body><h1>{ui["title"]}</h1>\n<p>{ui["waiting"]}: {waiting} · {ui["running"]}: '
            f'{running}</p>\n<table><tr>{head}</tr>\n{rows}\n</table></body></html>\n').encode()


def _row(entry: dict[str, Any], ui: dict[str, str]) -> str:
    alert = entry.get("alert") or {}
    labels = ", ".join(f"{k}={v}" for k, v in sorted((alert.get("labels") or {}).items()))
    cells = [_e(entry.get("time")),
             f"<b>{_e(alert.get('name'))}</b><br><small>{_e(labels)}</small>",
             _e(", ".join(entry.get("nodes") or [])),
             _conclusion(entry, ui),
             _e(entry.get("runbook")),
             _links(entry.get("report"))]
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def _conclusion(entry: dict[str, Any], ui: dict[str, str]) -> str:
    if entry.get("error"):
        return f"{ui['failed']}: {_e(entry['error'])}"
    return "<br>".join(f"{SIGN.get(c.get('severity'), '')} {_e(c.get('node'))}: {_e(c.get('title'))} "
                       f"<small>({_e(c.get('severity'))})</small>" for c in entry.get("conclusions") or [])


def _links(name: Any) -> str:
    if not name:
        return ""
    quoted = html.escape(str(name), quote=True)
    return f'<a href="reports/{quoted}.html">HTML</a> · <a href="reports/{quoted}.json">JSON</a>'


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)
