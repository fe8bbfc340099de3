"""A real Alertmanager on loopback, started and stopped by the alert receiver's tests.

Standard library only. Needs Prometheus' Alertmanager: Debian's `prometheus-alertmanager`
(installed by scripts/system-packages.sh; tested with 0.25) or upstream's `alertmanager`.

Everything lives under one base directory BASE::

    BASE/alertmanager.yml    one route to one webhook receiver, grouped by alertname, with
                             short group_wait and group_interval (a notification within ~1 s)
    BASE/data/               its storage (silences, notification log)
    BASE/alertmanager.out    its log
    BASE/alertmanager.json   its pid: what `down` kills

It listens on 127.0.0.1 only: its web port is a free one, and its cluster (gossip) listener
is turned off. The webhook carries a bearer token read from a file, as
`http_config.authorization.credentials_file` does in production.

From Python::

    from scenarios.clusters.alertmanager import Alertmanager
    with Alertmanager.start(tmp_path, "http://127.0.0.1:9095/alerts", token_file) as am:
        am.post_alerts([{"labels": {"alertname": "X", "instance": "node01:9100"}}])
        am.api("GET", "/api/v2/silences")
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path
from typing import Any, ClassVar

from scenarios.clusters.daemon import Daemon, DaemonError, wait_ready
from scenarios.clusters.group import DaemonGroup
from scenarios.clusters.net import free_port

BINARIES = ("prometheus-alertmanager", "alertmanager")  # Debian's name, upstream's
READY_S = 20.0

CONFIG = """\
route:
  receiver: runbook
  group_by: [alertname]
  group_wait: {group_wait}
  group_interval: {group_wait}
  repeat_interval: 1h
receivers:
  - name: runbook
    webhook_configs:
      - url: {url}
        send_resolved: true
        http_config:
          authorization:
            type: Bearer
            credentials_file: {token_file}
"""


def binary() -> str | None:
    return next((found for name in BINARIES if (found := shutil.which(name))), None)


def requirements_missing() -> list[str]:
    if binary() is None:
        return ["no prometheus-alertmanager on PATH (scripts/system-packages.sh installs Debian's)"]
    return []


class AlertmanagerError(DaemonError):
    pass


class Alertmanager(DaemonGroup):
    state_file: ClassVar[str | None] = "alertmanager.json"
    error: ClassVar[type[DaemonError]] = AlertmanagerError
    what: ClassVar[str] = "Alertmanager"

    def __init__(self, base: Path, port: int, webhook_url: str, token_file: Path,
                 group_wait: str) -> None:
        super().__init__(base)
        self.port, self.webhook_url, self.group_wait = port, webhook_url, group_wait
        self.token_file = token_file
        self.daemon = Daemon("alertmanager", out=base / "alertmanager.out")

    @classmethod
    def start(cls, base: Path, webhook_url: str, token_file: Path, *, port: int | None = None,
              group_wait: str = "1s") -> Alertmanager:
        """A started Alertmanager that posts every group to `webhook_url` (retried on a taken port)."""
        base.mkdir(parents=True, exist_ok=True)
        return cls._start(lambda: cls(base, port or free_port(), webhook_url, token_file, group_wait),
                          attempts=1 if port else 3)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def daemons(self) -> list[Daemon]:
        return [self.daemon]

    def _boot(self) -> None:
        assert self.base is not None
        config = self.base / "alertmanager.yml"
        config.write_text(CONFIG.format(group_wait=self.group_wait, url=self.webhook_url,
                                        token_file=self.token_file))
        self.daemon.spawn([binary() or BINARIES[0], f"--config.file={config}",
                           f"--storage.path={self.base / 'data'}",
                           f"--web.listen-address=127.0.0.1:{self.port}",
                           "--cluster.listen-address=", "--log.level=info"])
        wait_ready([self.daemon], self._ready, READY_S, lambda: self.daemon.log_tail())

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def to_json(self) -> dict[str, Any]:
        return {"port": self.port, "url": self.url, **self.lifecycle_json()}

    # -- its API (v2) -------------------------------------------------------------------

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """One request to the API; its JSON answer. Raises urllib.error.HTTPError."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            raw = answer.read()
        return json.loads(raw) if raw.strip() else None

    def post_alerts(self, alerts: list[dict[str, Any]]) -> None:
        """POST /api/v2/alerts: each {labels, annotations?, startsAt?, endsAt?} (endsAt in the
        past resolves an alert it has)."""
        self.api("POST", "/api/v2/alerts", alerts)

    def silences(self) -> list[dict[str, Any]]:
        return list(self.api("GET", "/api/v2/silences") or [])

