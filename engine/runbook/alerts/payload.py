"""Alertmanager's webhook body, version "4", parsed and checked.

    {"version": "4", "groupKey": ..., "truncatedAlerts": 0, "status": "firing",
     "receiver": ..., "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
     "externalURL": ...,
     "alerts": [{"status": "firing" | "resolved", "labels": {}, "annotations": {},
                 "startsAt": RFC 3339, "endsAt": RFC 3339, "generatorURL": ..., "fingerprint": ...}]}

Everything a later stage relies on is checked here, once: every refusal is a PayloadError
whose message is the one line the receiver answers with (a 400). Values are bounded, so a
body under the size limit cannot make an alert expensive to keep or to show.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

VERSION = "4"
STATUSES = ("firing", "resolved")
MAX_ALERTS = 1000
MAX_PAIRS = 128  # labels or annotations of one alert
MAX_NAME = 256
MAX_VALUE = 16384  # an annotation's description may be long
_FINGERPRINT = re.compile(r"[0-9A-Za-z]{1,64}")  # it names files in the state directory
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)")


class PayloadError(ValueError):
    """The body is not a webhook notification we can act on; the message says why, in one line."""


@dataclass(frozen=True)
class Alert:
    status: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: str
    ends_at: str
    fingerprint: str
    generator_url: str = ""

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def key(self) -> str:
        """What makes a firing alert new: the same alert firing again later has another startsAt."""
        return f"{self.fingerprint}@{self.starts_at}"

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "labels": self.labels, "annotations": self.annotations,
                "startsAt": self.starts_at, "endsAt": self.ends_at,
                "fingerprint": self.fingerprint, "generatorURL": self.generator_url}


@dataclass(frozen=True)
class Notification:
    status: str
    receiver: str
    group_key: str
    external_url: str
    truncated: int
    alerts: list[Alert]


def parse_notification(body: bytes) -> Notification:
    """The notification in `body`; raises PayloadError."""
    data = _json(body)
    if not isinstance(data, dict):
        raise PayloadError("the body is not a JSON object")
    if data.get("version") != VERSION:
        raise PayloadError(f"payload version {data.get('version')!r}, expected {VERSION!r} "
                           "(Alertmanager's webhook_config)")
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError("no `alerts` list")
    if len(alerts) > MAX_ALERTS:
        raise PayloadError(f"{len(alerts)} alerts in one notification, at most {MAX_ALERTS} "
                           "(set max_alerts in webhook_config)")
    truncated = data.get("truncatedAlerts", 0)
    return Notification(status=_text(data, "status", "notification"),
                        receiver=_text(data, "receiver", "notification"),
                        group_key=_text(data, "groupKey", "notification"),
                        external_url=_text(data, "externalURL", "notification"),
                        truncated=truncated if isinstance(truncated, int) else 0,
                        alerts=[parse_alert(a, f"alerts[{i}]") for i, a in enumerate(alerts)])


def parse_alert(data: Any, where: str = "alert") -> Alert:
    """One alert of `alerts[]` (also how a queued job's alert is read back); raises PayloadError."""
    if not isinstance(data, dict):
        raise PayloadError(f"{where} is not an object")
    status = data.get("status")
    if status not in STATUSES:
        raise PayloadError(f"{where}.status is {status!r}, expected firing or resolved")
    labels = _pairs(data.get("labels"), f"{where}.labels")
    if not labels:
        raise PayloadError(f"{where}.labels is empty")
    return Alert(status=status, labels=labels,
                 annotations=_pairs(data.get("annotations") or {}, f"{where}.annotations"),
                 starts_at=_time(data, "startsAt", where), ends_at=_time(data, "endsAt", where),
                 fingerprint=_fingerprint(data.get("fingerprint"), labels, where),
                 generator_url=_text(data, "generatorURL", where))


def _json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PayloadError(f"the body is not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise PayloadError(f"the body is not JSON: {exc.msg} ({where})") from None
    except RecursionError:  # [[[[...: nested deeper than the parser's stack
        raise PayloadError("the body nests too deep") from None


def _pairs(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise PayloadError(f"{where} is not an object of strings")
    if len(value) > MAX_PAIRS:
        raise PayloadError(f"{where} has {len(value)} entries, at most {MAX_PAIRS}")
    for name, text in value.items():
        if not isinstance(text, str) or len(name) > MAX_NAME or len(text) > MAX_VALUE:
            raise PayloadError(f"{where}.{name[:40]}: expected a string of at most {MAX_VALUE} characters")
    return dict(value)


def _text(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str) or len(value) > MAX_VALUE:
        raise PayloadError(f"{where}.{key} is not a string of at most {MAX_VALUE} characters")
    return value


def _time(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str) or not _TIME.fullmatch(value):
        raise PayloadError(f"{where}.{key} is {str(value)[:40]!r}, expected an RFC 3339 time")
    return value


def _fingerprint(value: Any, labels: dict[str, str], where: str) -> str:
    if value is None or value == "":  # older senders: the labels identify the alert
        canonical = json.dumps(sorted(labels.items()), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]
    if not isinstance(value, str) or not _FINGERPRINT.fullmatch(value):
        raise PayloadError(f"{where}.fingerprint is {str(value)[:40]!r}, expected letters and digits")
    return value
