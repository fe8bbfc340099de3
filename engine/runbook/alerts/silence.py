"""An Alertmanager silence for the alert while its diagnosis runs (API v2).

    POST   /api/v2/silences            {matchers, startsAt, endsAt, createdBy, comment} -> {silenceID}
    DELETE /api/v2/silence/{id}        expires it

The matchers are the alert's own labels, each `name="value"`, so the silence covers that one
alert. Its end is the run's deadline and a margin: a receiver killed mid-run leaves a silence
that ends by itself; the next start expires it before the run begins again.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

from runbook.alerts.outbound import OutboundError, send_json
from runbook.alerts.payload import Alert

CREATED_BY = "runbook"
MARGIN_S = 60.0


class Silencer:
    def __init__(self, alertmanager_url: str) -> None:
        self.url = alertmanager_url.rstrip("/")

    def create(self, alert: Alert, runbook: str, seconds: float) -> str | None:
        """The new silence's id; None (and a line in the log) when Alertmanager said no."""
        now = datetime.now(timezone.utc)
        body = {"matchers": [{"name": name, "value": value, "isRegex": False, "isEqual": True}
                             for name, value in sorted(alert.labels.items())],
                "startsAt": _rfc3339(now), "endsAt": _rfc3339(now + timedelta(seconds=seconds + MARGIN_S)),
                "createdBy": CREATED_BY,
                "comment": f"runbook {runbook} is diagnosing this alert ({alert.fingerprint})"}
        try:
            answer = send_json("POST", f"{self.url}/api/v2/silences", body)
        except OutboundError as exc:
            print(f"runbook alerts: no silence for {alert.name} ({alert.fingerprint}): {exc}",
                  file=sys.stderr)
            return None
        return str(answer.get("silenceID")) if isinstance(answer, dict) and answer.get("silenceID") else None

    def expire(self, silence_id: str) -> None:
        try:
            send_json("DELETE", f"{self.url}/api/v2/silence/{quote(silence_id, safe='')}")
        except OutboundError as exc:
            if "HTTP 404" not in str(exc):  # expired already, or Alertmanager lost it: fine
                print(f"runbook alerts: silence {silence_id} not expired: {exc}", file=sys.stderr)


def _rfc3339(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
