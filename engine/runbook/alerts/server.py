"""The receiver's HTTP side (standard library `http.server`, a thread per request, bounded).

    POST /alerts           Alertmanager's webhook: 200 with what became of each alert, or
                           401 (credentials), 411 (no Content-Length), 413 (too large),
                           400 (not a version-4 notification), 503 (the queue is full:
                           Alertmanager retries on 5xx) -- each with a one-line reason
    GET  /                 the page of recent alerts           GET /status   the same as JSON
    GET  /reports/NAME     a report (.html or .json)           GET /healthz  "ok", no credentials

Credentials are checked before the body is read, and the body's size before it is read, so
neither a stranger nor a huge body costs more than the headers. The answer comes as soon as
the alerts are on the queue: the diagnoses run later, in the workers.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from pathlib import Path
from typing import Any, Protocol

from runbook.alerts.auth import Credentials

WEBHOOK_PATH = "/alerts"
READ_TIMEOUT_S = 10.0  # a client that stops sending midway is dropped
MAX_CONNECTIONS = 64


class Refused(Exception):
    """An answer other than 200, with its one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class App(Protocol):
    """What the server serves (receiver.py's Receiver)."""

    credentials: Credentials
    max_body: int
    open_page: bool
    lang: str

    def take(self, body: bytes) -> dict[str, Any]: ...  # raises Refused

    def status(self) -> dict[str, Any]: ...

    def page(self) -> bytes: ...

    def report_file(self, name: str) -> Path | None: ...


class Handler(http.server.BaseHTTPRequestHandler):
    server: AlertServer
    timeout = READ_TIMEOUT_S
    server_version = "runbook-alerts"

    def do_POST(self) -> None:
        app = self.server.app
        try:
            if self.path.split("?", 1)[0] != WEBHOOK_PATH:
                raise Refused(404, f"no such path; Alertmanager posts to {WEBHOOK_PATH}")
            self._authorize()
            answer = app.take(self._body(app.max_body))
        except Refused as refused:
            self._fail(refused.status, str(refused))
            return
        self._send(200, "application/json", json.dumps(answer).encode("utf-8"))

    def do_GET(self) -> None:
        app, path = self.server.app, self.path.split("?", 1)[0]
        try:
            if path == "/healthz":
                self._send(200, "text/plain; charset=utf-8", b"ok\n")
                return
            if not app.open_page or path == "/status":
                self._authorize()
            self._serve_page(app, path)
        except Refused as refused:
            self._fail(refused.status, str(refused))

    def _serve_page(self, app: App, path: str) -> None:
        if path == "/":
            self._send(200, "text/html; charset=utf-8", app.page())
        elif path == "/status":
            self._send(200, "application/json", json.dumps(app.status()).encode("utf-8"))
        elif path.startswith("/reports/") and (report := app.report_file(path.removeprefix("/reports/"))):
            kind = "text/html; charset=utf-8" if report.suffix == ".html" else "application/json"
            self._send(200, kind, report.read_bytes())
        else:
            raise Refused(404, "no such page")

    def _authorize(self) -> None:
        if not self.server.app.credentials.allow(self.headers.get("Authorization")):
            self.close_connection = True  # the body, if any, is never read
            raise Refused(401, "missing or wrong credentials (the bearer token or basic auth of "
                               "webhook_config's http_config)")

    def _body(self, limit: int) -> bytes:
        raw = self.headers.get("Content-Length")
        if raw is None:
            self.close_connection = True
            raise Refused(411, "Content-Length required")
        try:
            length = int(raw)
        except ValueError:
            self.close_connection = True
            raise Refused(400, f"Content-Length {raw[:20]!r} is not a number") from None
        if length > limit or length < 0:
            self.close_connection = True
            raise Refused(413, f"body of {length} bytes, at most {limit} (--max-body; or lower "
                               "max_alerts in webhook_config)")
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            self.close_connection = True
            raise Refused(400, "the body did not arrive in time") from None
        if len(body) != length:
            self.close_connection = True
            raise Refused(400, f"the body ended after {len(body)} of {length} bytes")
        return body

    def _fail(self, status: int, reason: str) -> None:
        headers = {}
        if status == 401:
            creds = self.server.app.credentials
            headers["WWW-Authenticate"] = ('Basic realm="runbook alerts"' if creds.basic is not None
                                           else 'Bearer realm="runbook alerts"')
        self._send(status, "text/plain; charset=utf-8", (reason.splitlines()[0] + "\n").encode("utf-8"),
                   headers)

    def _send(self, status: int, kind: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        if self.path != "/healthz":
            super().log_message(format, *args)


class AlertServer(http.server.ThreadingHTTPServer):
    """A thread per request, at most MAX_CONNECTIONS at once (more are closed at once)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], app: App) -> None:
        self.app = app
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()
