"""`runbook alerts serve` behind a real Alertmanager, diagnosing real hosts over SSH.

One Alertmanager (Debian's prometheus-alertmanager on loopback, group_wait and group_interval
1 s, a webhook with a bearer token from a file), one two-host SSH cluster (real sshd per host)
and one receiver process (`python -m runbook alerts serve`), for the whole module: the tests
run in order and each looks only at its own alerts. Alerts are posted to Alertmanager's API,
which groups them and calls the receiver; what the receiver did is read from its state
directory, its audit log, its /status and its page, Alertmanager's silences, and a local
webhook standing in for a chat. The last test kills the receiver mid-run.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests import alertmanager_fixture, cluster_fixture
from tests.daemon_fixture import wait_for

from scenarios.clusters.net import free_port  # isort: skip  (after tests.daemon_fixture)

pytestmark = pytest.mark.e2e
make_alertmanager = alertmanager_fixture.make_alertmanager
_module_cluster_factory = cluster_fixture._module_cluster_factory

TOKEN = "s3cret-alert-token"
MAX_BODY = 65536
SLOW_S = 2.5  # how long the proxies in front of slow01 and slow02 hold each connection
ROUTES = """\
routes:
  - match: {{alertname: TrainingLossNaN}}
    runbook: nan-loss
    params:
      log: {{label: log_path}}
    fixes: read-only
  - match: {{alertname: [LossNaNSlow, LossNaNOther]}}
    runbook: nan-loss
    params:
      log: {{annotation: log, default: {default_log}}}
"""


class Receiver:
    """The receiver as a process of its own (its own session: a kill takes its ssh clients too)."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.argv, self.env, self.log = argv, env, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=err, env=self.env,
                                         start_new_session=True)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline().decode().strip() if ready else ""
        assert line.startswith("http://"), f"no address from the receiver: {self.log.read_text()[-2000:]}"
        self.url = line

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        host, port = self.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()

    def get(self, path: str) -> tuple[int, bytes]:
        return self.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})

    def status(self) -> dict[str, Any]:
        code, body = self.get("/status")
        assert code == 200, body
        return json.loads(body)

    def counts(self) -> dict[str, int]:
        return self.status()["counts"]


class Hook(http.server.ThreadingHTTPServer):
    """A local webhook standing in for a chat: keeps every JSON body posted to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                hook.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, make_alertmanager: Any,
          _module_cluster_factory: Any) -> Iterator[dict[str, Any]]:
    """Cluster (node01, node02; slow01 and slow02 behind delaying proxies), logs, Alertmanager,
    the notify hook, and the receiver."""
    tmp = tmp_path_factory.mktemp("alerts")
    cl = _module_cluster_factory(2)
    proxies = [cluster_fixture.DelayProxy((cl.host(n).address, cl.port), SLOW_S)
               for n in ("node01", "node02")]
    for alias, node, proxy in zip(("slow01", "slow02"), ("node01", "node02"), proxies, strict=True):
        cl.add_alias(alias, node, proxy.address, proxy.port)
    logs = {}
    for name, bad in (("node01", "loss nan"), ("node02", "loss: inf")):
        logs[name] = tmp / f"{name}.log"
        logs[name].write_text(f"step 1 | loss 2.31\nstep 2 | loss 2.30\nstep 3 | {bad}\n")
    (tmp / "token").write_text(TOKEN + "\n")
    (tmp / "routes.yaml").write_text(ROUTES.format(default_log=logs["node02"]))
    port = free_port()
    am = make_alertmanager(webhook_url=f"http://127.0.0.1:{port}/alerts", token_file=tmp / "token")
    hook = Hook()
    threading.Thread(target=hook.serve_forever, args=(0.05,), daemon=True).start()
    receiver = Receiver([sys.executable, "-m", "runbook", "alerts", "serve", "--port", str(port),
                         "--state-dir", str(tmp / "state"), "--routes", str(tmp / "routes.yaml"),
                         "--token-file", str(tmp / "token"), "--audit-log", str(tmp / "audit.jsonl"),
                         "--workers", "1", "--max-body", str(MAX_BODY), "--silence-url", am.url,
                         "--notify-url", f"http://127.0.0.1:{hook.server_address[1]}/hook",
                         "--notify-format", "json", "--connect-timeout", "10", "--lang", "en"],
                        {**cl.env(), "RUNBOOK_LANG": "en"}, tmp / "receiver.log")
    receiver.start()
    yield {"tmp": tmp, "cl": cl, "am": am, "hook": hook, "receiver": receiver, "logs": logs,
           "proxies": proxies}
    if receiver.proc is not None and receiver.proc.poll() is None:
        receiver.kill()
    hook.shutdown()
    for proxy in proxies:
        proxy.stop()


def history(tmp: Path, alertname: str) -> list[dict[str, Any]]:
    path = tmp / "state" / "history.jsonl"
    lines = path.read_text().splitlines(keepends=True) if path.exists() else []
    entries = [json.loads(line) for line in lines if line.endswith("\n")]  # not one being written
    return [e for e in entries if e["alert"]["name"] == alertname]


def report(tmp: Path, entry: dict[str, Any]) -> dict[str, Any]:
    return json.loads((tmp / "state" / "reports" / f"{entry['report']}.json").read_text())


def audit(tmp: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp / "audit.jsonl").read_text().splitlines()]


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def until(predicate: Any, timeout: float, what: str, receiver: Receiver) -> None:
    assert wait_for(predicate, timeout, step=0.2), f"{what}; receiver log: {receiver.log.read_text()[-3000:]}"


def test_two_alerts_in_one_group_run_each_on_its_own_node(setup: dict[str, Any]) -> None:
    tmp, am, receiver, logs = setup["tmp"], setup["am"], setup["receiver"], setup["logs"]
    am.post_alerts([
        {"labels": {"alertname": "TrainingLossNaN", "instance": "node01:9100",
                    "log_path": str(logs["node01"])}},
        # node02 as Prometheus often names it, by address: ~/.ssh/config's HostName gives the name
        {"labels": {"alertname": "TrainingLossNaN", "instance": "127.0.0.3:9100",
                    "log_path": str(logs["node02"]), "team": "<img src=x onerror=alert(1)>"}}])
    until(lambda: len(history(tmp, "TrainingLossNaN")) >= 2, 60, "two runs", receiver)
    assert receiver.counts()["notifications"] == 1  # one group, one call, both alerts in it
    entries = sorted(history(tmp, "TrainingLossNaN"), key=lambda e: e["nodes"])
    assert [e["nodes"] for e in entries] == [["node01"], ["node02"]]
    assert len({e["alert"]["fingerprint"] for e in entries}) == 2
    for entry, node in zip(entries, ("node01", "node02"), strict=True):
        doc = report(tmp, entry)
        assert [n["node"] for n in doc["nodes"]] == [node]
        assert doc["params"]["log"] == str(logs[node])  # from the alert's log_path label
        fixes = {f["effect"]: f["result"]["status"] for f in doc["nodes"][0]["conclusion"]["fixes"]
                 if f.get("result") and f["result"]["status"] in ("ok", "held-back")}
        assert fixes == {"read-only": "ok", "changes-state": "held-back"}  # the route allows read-only
        assert (tmp / "state" / "reports" / f"{entry['report']}.html").read_text().count(node) >= 1
    runs = {e["alert"]: e for e in audit(tmp) if e.get("event") == "alert-run"}
    assert set(runs) == {e["alert"]["fingerprint"] for e in entries}
    fix_entries = [e for e in audit(tmp) if e.get("fix")]
    assert fix_entries and {e["effect"] for e in fix_entries} == {"read-only"}
    assert {e["alert"] for e in fix_entries} == set(runs)
    _check_notifications(setup, entries)
    code, page = receiver.get("/")
    assert code == 200 and b"TrainingLossNaN" in page
    assert b"<img src=x" not in page and b"&lt;img src=x onerror=alert(1)&gt;" in page


def _check_notifications(setup: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    hook, receiver = setup["hook"], setup["receiver"]
    assert wait_for(lambda: len(hook.bodies) >= 2, 10)
    by_node = {body["nodes"][0]: body for body in hook.bodies}
    for entry in entries:
        body = by_node[entry["nodes"][0]]
        assert next(iter(body)) == "conclusion"  # conclusion first
        assert body["conclusion"]["title"] == entry["conclusions"][0]["title"]
        assert body["alert"]["labels"]["alertname"] == "TrainingLossNaN"
        path = body["report"].split(receiver.url, 1)[1]
        code, page = receiver.get(path)
        assert code == 200 and entry["nodes"][0].encode() in page


def test_a_resolved_alert_and_a_repeat_start_no_run(setup: dict[str, Any]) -> None:
    tmp, am, receiver, logs = setup["tmp"], setup["am"], setup["receiver"], setup["logs"]
    before = history(tmp, "TrainingLossNaN")
    first = next(e for e in before if e["nodes"] == ["node01"])
    counts = receiver.counts()
    am.post_alerts([
        {"labels": first["alert"]["labels"], "startsAt": first["alert"]["startsAt"], "endsAt": now()},
        {"labels": {"alertname": "TrainingLossNaN", "instance": "node01:9100", "rank": "1",
                    "log_path": str(logs["node01"])}}])
    # Alertmanager sends the group again: node01's alert resolved, node02's still firing
    # (a repeat), the new one firing.
    until(lambda: receiver.counts().get("resolved", 0) > counts.get("resolved", 0)
          and len(history(tmp, "TrainingLossNaN")) >= 3, 60, "the resolved alert and the new run", receiver)
    after = history(tmp, "TrainingLossNaN")
    assert len(after) == 3
    assert sorted(e["alert"]["fingerprint"] for e in after).count(first["alert"]["fingerprint"]) == 1
    assert receiver.counts()["duplicate"] > counts.get("duplicate", 0)
    new = next(e for e in after if e["alert"]["labels"].get("rank") == "1")
    repeat = {"version": "4", "status": "firing", "receiver": "runbook", "groupKey": "x",
              "alerts": [{"status": "firing", "labels": new["alert"]["labels"], "annotations": {},
                          "startsAt": new["alert"]["startsAt"], "endsAt": "0001-01-01T00:00:00Z",
                          "fingerprint": new["alert"]["fingerprint"]}]}
    code, body = receiver.request("POST", "/alerts", json.dumps(repeat).encode(),
                                  {"Authorization": f"Bearer {TOKEN}"})
    assert code == 200 and json.loads(body)["queued"] == 0 and json.loads(body)["duplicate"] == 1


def test_bad_requests_are_refused_with_a_reason(setup: dict[str, Any]) -> None:
    receiver = setup["receiver"]
    good = json.dumps({"version": "4", "alerts": []}).encode()
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    basic = "Basic " + base64.b64encode(f"runbook:{TOKEN}".encode()).decode()
    cases = [
        (good, {"Authorization": "Bearer wrong"}, 401, b"credentials"),
        (good, {}, 401, b"credentials"),
        (good, {"Authorization": basic}, 401, b"credentials"),  # only a token was configured
        (b'{"version": "4", "alerts": [', bearer, 400, b"not JSON"),
        (json.dumps({"version": "3", "alerts": []}).encode(), bearer, 400, b"version '3'"),
        (json.dumps({"version": "4", "alerts": [{"status": "firing", "labels": {"a": 1}}]}).encode(),
         bearer, 400, b"alerts[0].labels"),
        (b"x" * (MAX_BODY + 1), bearer, 413, b"at most 65536"),
    ]
    for body, headers, status, reason in cases:
        code, answer = receiver.request("POST", "/alerts", body, headers)
        assert (code, answer.count(b"\n")) == (status, 1), (status, answer)
        assert reason in answer, answer
    assert receiver.request("POST", "/alerts", good, bearer)[0] == 200
    assert receiver.get("/reports/..%2Fseen.json")[0] == 404


def test_a_killed_receiver_loses_no_queued_alert_and_silences_while_it_runs(setup: dict[str, Any]) -> None:
    tmp, am, receiver, logs = setup["tmp"], setup["am"], setup["receiver"], setup["logs"]
    am.post_alerts([
        {"labels": {"alertname": "LossNaNSlow", "instance": "slow01:9100"},
         "annotations": {"log": str(logs["node01"])}},
        {"labels": {"alertname": "LossNaNSlow", "instance": "slow02:9100"}}])  # the route's default log
    proxies = setup["proxies"]
    until(lambda: sum(p.accepted for p in proxies) >= 1, 30, "a run connecting", receiver)
    running = [s for s in am.silences() if s["createdBy"] == "runbook" and s["status"]["state"] == "active"]
    assert len(running) == 1  # one worker: one run, one silence, on that alert's own labels
    assert {m["name"]: m["value"] for m in running[0]["matchers"]}["alertname"] == "LossNaNSlow"
    receiver.kill()  # mid-run: its proxy still holds the connection
    assert len(list((tmp / "state" / "queue").glob("*.json"))) == 2  # the running one and the waiting one
    receiver.start()
    until(lambda: len(history(tmp, "LossNaNSlow")) >= 2, 60, "both runs after the restart", receiver)
    entries = history(tmp, "LossNaNSlow")
    assert sorted(e["nodes"][0] for e in entries) == ["slow01", "slow02"]
    assert all(e["error"] is None and e["conclusions"][0]["id"] == "loss-diverged" for e in entries)
    for entry in entries:  # no route allowed fixes here: shown, none applied
        statuses = {f["result"]["status"] for f in report(tmp, entry)["nodes"][0]["conclusion"]["fixes"]
                    if f.get("result")}
        assert statuses == {"dry-run"}
    # a job leaves the queue last (history, audit log, notification, then off the queue)
    until(lambda: not list((tmp / "state" / "queue").glob("*.json")), 30, "the queue emptied", receiver)
    ours = [s for s in am.silences() if s["createdBy"] == "runbook"]
    assert len(ours) >= 3  # the killed run's, and one per finished run
    assert wait_for(lambda: all(s["status"]["state"] == "expired" for s in am.silences()
                                if s["createdBy"] == "runbook"), 5)


def test_the_documented_receiver_config_is_one_alertmanager_accepts(tmp_path: Path) -> None:
    alertmanager_fixture.ALERTMANAGER.require()
    config = Path(__file__).resolve().parents[2] / "docs" / "alerts" / "alertmanager.yml"
    checked = subprocess.run(["amtool", "check-config", str(config)], capture_output=True, text=True,
                             timeout=30)
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked.stdout + checked.stderr
