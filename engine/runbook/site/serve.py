"""`runbook site serve`: a local preview server for the built site (standard library only).

With a `Live` state (a served build that is watched), every HTML page is served with a small
script that long-polls `/__reload`: when the site's version changes the page reloads itself,
and when the last save did not load, it shows why in a banner. `site build` output never
carries the script; only what this server sends does.
"""

from __future__ import annotations

import functools
import http.server
import json
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

LONG_POLL_S = 20.0  # one /__reload request waits at most this long for a change
RELOAD_PATH = "/__reload"

# Reloads when the version differs from the one the page was served at; stops after 30
# failed polls in a row (the server is gone).
_SCRIPT = """<script>/* runbook site serve: live reload */(function(){
var v=%(version)d,s=%(state)d,fails=0;
function banner(e){var b=document.getElementById("runbook-serve-error");
if(!e){if(b)b.remove();return}
if(!b){b=document.createElement("pre");b.id="runbook-serve-error";
b.style.cssText="position:fixed;left:0;right:0;bottom:0;margin:0;padding:8px 12px;background:#b91c1c;"
+"color:#fff;font:13px/1.4 monospace;white-space:pre-wrap;z-index:99999";document.body.appendChild(b)}
b.textContent="runbook site serve: "+e}
function poll(){fetch("%(path)s?state="+s,{cache:"no-store"}).then(function(r){return r.json()}).then(
function(d){fails=0;if(d.version!==v){location.reload();return}s=d.state;banner(d.error);poll()},
function(){if(++fails<30)setTimeout(poll,1000)})}
banner(%(error)s);poll()})();</script>
"""


class Live:
    """The served site's version (one more per rebuild) and the error of the last save."""

    def __init__(self) -> None:
        self.version = 1
        self.state = 1  # changes on every rebuild and every error: what long polls wait for
        self.error = ""
        self._cond = threading.Condition()

    def rebuilt(self) -> None:
        with self._cond:
            self.version += 1
            self.state += 1
            self.error = ""
            self._cond.notify_all()

    def failed(self, error: str) -> None:
        with self._cond:
            self.state += 1
            self.error = error
            self._cond.notify_all()

    def snapshot(self) -> dict[str, Any]:
        return {"version": self.version, "state": self.state, "error": self.error}

    def wait(self, state: int, timeout: float = LONG_POLL_S) -> dict[str, Any]:
        """The state once it differs from `state`, or after `timeout` seconds."""
        with self._cond:
            self._cond.wait_for(lambda: self.state != state, timeout=timeout)
            return self.snapshot()

    def script(self) -> bytes:
        now = self.snapshot()
        error = json.dumps(now["error"]).replace("<", "\\u003c")  # nothing can close the <script>
        return (_SCRIPT % {**now, "error": error, "path": RELOAD_PATH}).encode("utf-8")


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Static files, the site's 404 page for anything missing, and the types Pagefind needs."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".js": "text/javascript", ".mjs": "text/javascript",
                      ".json": "application/json", ".svg": "image/svg+xml"}

    def __init__(self, *args: Any, live: Live | None = None, **kwargs: Any) -> None:
        self.live = live  # before super().__init__, which handles the request
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:
        if self.live is not None:
            url = urlsplit(self.path)
            if url.path == RELOAD_PATH:
                self._reload(url.query)
                return
            page = Path(self.translate_path(self.path))
            if page.is_dir() and url.path.endswith("/"):
                page = page / "index.html"
            if page.suffix == ".html" and page.is_file():
                self._send_html(page, 200)
                return
        super().do_GET()

    def _reload(self, query: str) -> None:
        try:
            state = int(parse_qs(query).get("state", ["0"])[0])
        except ValueError:
            state = 0
        assert self.live is not None
        self._send(200, "application/json", json.dumps(self.live.wait(state)).encode("utf-8"))

    def _send_html(self, page: Path, code: int) -> None:
        body = page.read_bytes()
        if self.live is not None:
            at = body.rfind(b"</body>")
            at = at if at >= 0 else len(body)
            body = body[:at] + self.live.script() + body[at:]
        self._send(code, "text/html; charset=utf-8", body)

    def _send(self, code: int, kind: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        if self.live is not None:
            self.send_header("Cache-Control", "no-store")  # a preview: always the latest build
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        page = Path(self.directory) / "404.html"
        if code != 404 or not page.exists():
            super().send_error(code, message, explain)
            return
        self._send_html(page, 404)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        if getattr(self, "path", "").startswith(RELOAD_PATH):
            return  # one line per long poll would drown the rebuild messages
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def make_server(directory: Path, host: str, port: int,
                live: Live | None = None) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(SiteHandler, directory=str(directory), live=live)
    server = http.server.ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True  # a long poll in progress never holds the exit
    return server


def serve(directory: Path, host: str = "127.0.0.1", port: int = 8000, live: Live | None = None) -> int:
    try:
        server = make_server(directory, host, port, live)
    except OSError as exc:
        print(f"runbook site serve: cannot listen on {host}:{port}: {exc.strerror} "
              "(pick another --port)", file=sys.stderr)
        return 2
    bound_host, bound_port = server.server_address[:2]
    # The first stdout line is the address: scripts and tests read it (port 0 picks a free one).
    print(f"http://{bound_host}:{bound_port}/", flush=True)
    print("runbook site serve: Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
