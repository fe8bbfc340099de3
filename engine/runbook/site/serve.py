"""`runbook site serve`: a local preview server for the built site (standard library only)."""

from __future__ import annotations

import functools
import http.server
import sys
from pathlib import Path


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Static files, the site's 404 page for anything missing, and the types Pagefind needs."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".js": "text/javascript", ".mjs": "text/javascript",
                      ".json": "application/json", ".svg": "image/svg+xml"}

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        page = Path(self.directory) / "404.html"
        if code != 404 or not page.exists():
            super().send_error(code, message, explain)
            return
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def make_server(directory: Path, host: str, port: int) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(SiteHandler, directory=str(directory))
    return http.server.ThreadingHTTPServer((host, port), handler)


def serve(directory: Path, host: str = "127.0.0.1", port: int = 8000) -> int:
    try:
        server = make_server(directory, host, port)
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
