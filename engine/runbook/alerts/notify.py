"""The answer to an alert, posted where people are: conclusion first, then the nodes, the
report's link and the alert's labels.

    slack   {"text": "..."}: Slack's incoming webhooks, and the chats that take the same body
            (Mattermost, Rocket.Chat, Zulip's Slack-compatible endpoint)
    json    the fields as they are, for any other webhook
"""

from __future__ import annotations

import sys
from typing import Any

from runbook.alerts.outbound import OutboundError, send_json

FORMATS = ("slack", "json")
SIGN = {"critical": "🛑", "warning": "⚠️", "unknown": "❔", "info": "ℹ️", "ok": "✅"}
NODES_SHOWN = 8


def message(entry: dict[str, Any], report_url: str | None, fmt: str) -> dict[str, Any]:
    """The body to post for one finished run (a history entry)."""
    worst = (entry.get("conclusions") or [None])[0]
    alert = entry["alert"]
    if fmt == "json":
        return {"conclusion": worst, "error": entry.get("error"), "nodes": entry.get("nodes", []),
                "report": report_url, "runbook": entry.get("runbook"), "alert": alert,
                "conclusions": entry.get("conclusions", []), "exit_code": entry.get("exit_code")}
    return {"text": _slack_text(entry, worst, report_url)}


def _slack_text(entry: dict[str, Any], worst: dict[str, Any] | None, report_url: str | None) -> str:
    alert = entry["alert"]
    if entry.get("error") or worst is None:
        why = entry.get("error") or "no node answered"
        head = f"❔ runbook {entry.get('runbook')} could not diagnose: {why}"
    else:
        head = f"{SIGN.get(worst['severity'], '')} {worst['title']} ({worst['severity']})"
    nodes = entry.get("nodes") or []
    more = len(nodes) - NODES_SHOWN
    shown = ", ".join(nodes[:NODES_SHOWN]) + (f" (+{more})" if more > 0 else "")
    link = f" · <{report_url}|report>" if report_url else ""
    labels = ", ".join(f"{k}={v}" for k, v in sorted(alert.get("labels", {}).items()))
    return "\n".join([_escape(f"{head} on {shown or 'no node'}"),
                      _escape(f"runbook {entry.get('runbook')} · alert {alert.get('name')}") + link,
                      _escape(f"labels: {labels}")])


def _escape(text: str) -> str:
    """Slack's control characters in message text (its mrkdwn reads <...> as a link)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class Notifier:
    def __init__(self, url: str, fmt: str = "slack") -> None:
        self.url, self.fmt = url, fmt

    def send(self, entry: dict[str, Any], report_url: str | None) -> bool:
        try:
            send_json("POST", self.url, message(entry, report_url, self.fmt))
        except OutboundError as exc:  # the URL may hold a secret (Slack's does): not in the log
            reason = str(exc).replace(self.url, "the notify URL")
            print(f"runbook alerts: notification not sent: {reason}", file=sys.stderr)
            return False
        return True
