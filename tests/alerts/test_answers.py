"""What the receiver answers with and whom it lets in: alerts/notify.py against a local
webhook, alerts/page.py, alerts/auth.py, and `runbook alerts serve`'s refusals to start."""

from __future__ import annotations

import argparse
import base64
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runbook.alerts import page
from runbook.alerts.auth import CredentialsError, load_credentials
from runbook.alerts.notify import Notifier
from runbook.alerts.routing import RunRequest
from runbook.cli import main
from runbook.cli.alerts.diagnose import run_args

ENTRY = {"time": "2026-03-01T10:15:09Z", "job": "j1", "runbook": "nan-loss", "nodes": ["gpu01", "gpu02"],
         "alert": {"name": "TrainingLossNaN", "fingerprint": "f1", "startsAt": "2026-03-01T10:15:00Z",
                   "labels": {"alertname": "TrainingLossNaN", "team": "<script>alert(1)</script>"}},
         "conclusions": [{"node": "gpu02", "status": "concluded", "id": "loss-diverged",
                          "title": "The loss exploded", "severity": "critical"},
                         {"node": "gpu01", "status": "concluded", "id": "healthy", "title": "Fine",
                          "severity": "ok"}],
         "exit_code": 1, "fixes": "none", "report": "20260301T101500Z-TrainingLossNaN-f1", "error": None}


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[Any]]]:
    """A local webhook that keeps what is posted to it."""
    got: list[Any] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(500 if self.path.startswith("/down") else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", got
    server.shutdown()


def test_a_slack_message_says_the_conclusion_first_then_nodes_report_and_labels(webhook) -> None:  # type: ignore[no-untyped-def]
    url, got = webhook
    assert Notifier(f"{url}/hook", "slack").send(ENTRY, "http://r/reports/x.html")
    lines = got[0]["text"].splitlines()
    assert lines[0] == "🛑 The loss exploded (critical) on gpu01, gpu02"
    assert lines[1] == "runbook nan-loss · alert TrainingLossNaN · <http://r/reports/x.html|report>"
    assert lines[2] == "labels: alertname=TrainingLossNaN, team=&lt;script&gt;alert(1)&lt;/script&gt;"


def test_a_json_message_carries_every_field_conclusion_first(webhook, capsys) -> None:  # type: ignore[no-untyped-def]
    url, got = webhook
    Notifier(f"{url}/hook", "json").send(ENTRY, "http://r/reports/x.html")
    body = got[0]
    assert list(body)[:3] == ["conclusion", "error", "nodes"]
    assert body["conclusion"]["id"] == "loss-diverged" and body["nodes"] == ["gpu01", "gpu02"]
    assert body["report"] == "http://r/reports/x.html"
    assert body["alert"]["labels"]["team"].startswith("<script>")
    failed = {**ENTRY, "error": "no runbook", "conclusions": []}
    assert not Notifier(f"{url}/down?token=SECRET", "slack").send(failed, None)
    assert got[1]["text"].startswith("❔ runbook nan-loss could not diagnose: no runbook")
    logged = capsys.readouterr().err
    assert "HTTP 500" in logged and "SECRET" not in logged  # a chat URL is a secret


def test_the_page_escapes_everything_an_alert_brings() -> None:
    hostile = {**ENTRY, "nodes": ['"><b>x'], "report": 'a"onclick="x'}
    html = page.render([hostile, {**ENTRY, "error": "<i>no</i>", "conclusions": []}], 2, 1, "zh").decode()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '"><b>x' not in html and 'a"onclick' not in html and "&lt;i&gt;no&lt;/i&gt;" in html
    assert "等待中: 2" in html and "运行中: 1" in html


def test_credentials_from_a_file_or_the_environment_checked_in_constant_time(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    creds = load_credentials(str(token), None, {})
    assert creds.allow("Bearer t0ken") and not creds.allow("Bearer t0ke") and not creds.allow(None)
    basic = load_credentials(None, None, {"RUNBOOK_ALERTS_BASIC_AUTH": "am:pw"})
    assert basic.allow("Basic " + base64.b64encode(b"am:pw").decode())
    assert not basic.allow("Basic " + base64.b64encode(b"am:px").decode())
    assert not basic.allow("Basic !!!") and not basic.allow("Bearer am:pw")
    assert not load_credentials(None, None, {}).required
    for bad in ({"RUNBOOK_ALERTS_BASIC_AUTH": "no-colon"}, {"RUNBOOK_ALERTS_TOKEN": "two\nlines"}):
        with pytest.raises(CredentialsError):
            load_credentials(None, None, bad)
    with pytest.raises(CredentialsError, match="--token-file"):
        load_credentials(str(tmp_path / "missing"), None, {})


@pytest.mark.parametrize(("argv", "why"), [
    ([], "give Alertmanager's credentials"),
    (["--no-auth", "--host", "0.0.0.0"], "--no-auth only on a loopback address"),
    (["--no-auth", "--silence-url", "am:9093"], "--silence-url: expected an http:// or https:// URL"),
    (["--no-auth", "--routes", "ROUTES"], "fixes: 'disruptive'"),
])
def test_serve_refuses_to_start_with_one_line(tmp_path: Path, capsys, monkeypatch, argv, why) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("RUNBOOK_ALERTS_TOKEN", raising=False)
    monkeypatch.delenv("RUNBOOK_ALERTS_BASIC_AUTH", raising=False)
    routes = tmp_path / "routes.yaml"
    routes.write_text("routes:\n  - match: {alertname: A}\n    runbook: nan-loss\n    fixes: disruptive\n")
    argv = [str(routes) if a == "ROUTES" else a for a in argv]
    assert main(["alerts", "serve", "--port", "0", "--state-dir", str(tmp_path / "s"), *argv]) == 2
    err = capsys.readouterr().err
    assert why in err and err.count("\n") == 1


def test_an_alerts_run_is_runbook_run_with_its_nodes_or_its_slurm_job() -> None:
    serve = argparse.Namespace(inventory="inv.yaml", group=None, executor=None, ray_address=None, python=None,
                               connect_timeout=5.0, accept_new_host_keys=False, forks=8, lang="zh",
                               timeout=60.0, audit_log=None, gateways="gw[1-2]", gateway_fanout=64)
    args = run_args(serve, RunRequest("nan-loss", ["gpu01"], None, {"log": "-x=1 y"}, "read-only"))
    assert (args.id, args.nodes, args.slurm_job, args.sets) == ("nan-loss", "gpu01", None, ["log=-x=1 y"])
    assert (args.inventory, args.format, args.lang, args.timeout) == ("inv.yaml", "json", "zh", 60.0)
    assert args.gateways == "gw[1-2]"  # the receiver's gateways carry its runs
    assert not args.apply  # what fixes run is the receiver's policy, never an option
    on_job = run_args(serve, RunRequest("training-hang", [], "4242", {}, "none"))
    assert (on_job.nodes, on_job.slurm_job) == (None, "4242")
