"""The receiver's own requests: JSON to Alertmanager's API and to the notify webhook.

Standard library only, a timeout on each, and one exception with a one-line reason, so that a
chat or an Alertmanager that is down costs a line in the log and never a diagnosis.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 1 << 20


class OutboundError(Exception):
    """A request that failed; the message says which and why, in one line."""


def send_json(method: str, url: str, body: Any = None, timeout: float = TIMEOUT_S) -> Any:
    """Send `body` as JSON; the answer's JSON (None when it has none). Raises OutboundError."""
    data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "User-Agent": "runbook-alerts"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 (http(s) only: checked)
            raw = answer.read(MAX_ANSWER_BYTES)
    except urllib.error.HTTPError as exc:
        detail = exc.read(200).decode("utf-8", "replace").strip().splitlines()
        raise OutboundError(f"{method} {url}: HTTP {exc.code}{': ' + detail[0] if detail else ''}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise OutboundError(f"{method} {url}: {getattr(exc, 'reason', None) or exc}") from None
    try:
        return json.loads(raw) if raw.strip() else None
    except ValueError:
        return None


def check_url(url: str, flag: str) -> str:
    """`url` without a trailing slash; raises ValueError unless it is http(s)."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{flag}: expected an http:// or https:// URL")
    return url.rstrip("/")
