"""Secrets never reach what runbook writes: reports (every format), recordings, bundles, the site,
the audit log of fixes.

A training-like process (a sleeping python) holds tokens in its environment and on its command
line, its log holds a bearer token and a PEM private key, its config a GCP service-account key;
a runbook on RUNBOOK_PATH reads all of them, its fixes print them, and its own text holds a
secret-looking value for the site. Everything runs through the real CLI and the local transport.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

HF_TOKEN = "hf_PlantedHfToken0123456789abcdefGHIJ"
AWS_KEY_ID = "AKIAPLANTED23456789Q"
AWS_SECRET = "plantedAwsSecretKey/0123456789+abcdefghij"
WANDB_KEY = "planted0wandb1api2key3456789abcdef012345"
DB_PASSWORD = "plantedDbPassw0rd"
BEARER = "plantedBearerToken.0123456789abcdef"
PEM_LINES = ["MIIEplantedPemLine1AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
             "plantedPemLine2BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB=="]
GCP_KEY_ID = "plantedGcpKeyId0123456789abcdef"
GCP_PEM = "MIIplantedGcpPrivateKeyBodyCCCCCCCCCCCCCCCCCCCCCCCCCCCC"
CLI_TOKEN = "plantedCliToken0123456789"
SITE_TOKEN = "hf_PlantedSiteToken0123456789abcdefGH"
SITE_BEARER = "plantedSiteBearer0123456789abcdef"
SECRETS = [HF_TOKEN, AWS_KEY_ID, AWS_SECRET, WANDB_KEY, DB_PASSWORD, BEARER, *PEM_LINES, GCP_KEY_ID,
           GCP_PEM, CLI_TOKEN, SITE_TOKEN, SITE_BEARER]
# What the outputs must still show, so a test cannot pass by showing nothing.
LOG_MARKER = "step 42 | loss 1.234 | planted-visible-marker"

RUNBOOK = """\
apiVersion: runbook/v1
id: secret-probe
version: 1.0.0
title: {en: Secret probe, zh: 密钥探测}
summary: {en: "Reads a process, its environment, its log and its config", zh: 读取进程、环境、日志和配置}
params:
  match: {type: string, required: true, help: {en: The process, zh: 进程}}
  log: {type: path, required: true, help: {en: The log, zh: 日志}}
  config: {type: path, required: true, help: {en: The config, zh: 配置}}
  hf_token: {type: string, help: {en: "A token, e.g. HF_TOKEN=SITE_TOKEN", zh: 令牌}}
start: find
steps:
  find:
    title: {en: Find the process, zh: 找到进程}
    check: {type: process, with: {match: "{{ params.match }}"}, timeout: 10s}
    branches:
      - when: not result.found
        goto: missing
    default: environment
  environment:
    title: {en: Its environment, zh: 它的环境}
    check: {type: env, with: {pid: "{{ steps['find'].result.pid }}"}, timeout: 10s}
    default: read-log
  read-log:
    title: {en: Its log, zh: 它的日志}
    check: {type: log, with: {path: "{{ params.log }}", tail: 50}, timeout: 10s}
    default: read-config
  read-config:
    title: {en: Its config, zh: 它的配置}
    check: {type: command, with: {run: "echo {{ params.hf_token }} >/dev/null; cat {{ params.config }}"},
            timeout: 10s}
    default: leaky
conclusions:
  leaky:
    severity: warning
    taxonomy: [launch.environment]
    title: {en: Everything was read, zh: 全部已读取}
    explanation:
      en: "Log in with `curl -H 'Authorization: Bearer SITE_BEARER'` or export HF_TOKEN=SITE_TOKEN"
      zh: 全部已读取
    fixes:
      - title: {en: Show the config, zh: 显示配置}
        run: "cat {{ params.config }}; tail -n 20 {{ params.log }}"
        effect: read-only
      - title: {en: Log in, zh: 登录}
        run: "echo logging in --token {{ params.hf_token }}"
        effect: read-only
  missing:
    severity: info
    taxonomy: []
    title: {en: No process, zh: 没有进程}
    explanation: {en: Nothing found, zh: 没有找到}
""".replace("SITE_TOKEN", SITE_TOKEN).replace("SITE_BEARER", SITE_BEARER)


def _log_text() -> str:
    return "\n".join([
        "2026-01-01 00:00:00 starting", LOG_MARKER,
        f"requests: GET /v1/models Authorization: Bearer {BEARER}",
        "loaded key:", "-----BEGIN RSA PRIVATE KEY-----", *PEM_LINES, "-----END RSA PRIVATE KEY-----",
        f"wandb: logging in with WANDB_API_KEY={WANDB_KEY}", LOG_MARKER, ""])


def _config_text() -> str:
    account = {"type": "service_account", "project_id": "demo", "private_key_id": GCP_KEY_ID,
               "private_key": f"-----BEGIN PRIVATE KEY-----\n{GCP_PEM}\n-----END PRIVATE KEY-----\n",
               "client_email": "trainer@demo.iam.gserviceaccount.com"}
    return (f"# training config\nlr: 3e-4\ndatabase: postgres://trainer:{DB_PASSWORD}@db.internal:5432/runs\n"
            f"aws_secret_access_key = {AWS_SECRET}\ngcp: {json.dumps(account)}\n")


class Incident:
    """The planted files and process, and the CLI pointed at them."""

    def __init__(self, root: Path, pid: int) -> None:
        self.root, self.pid = root, pid
        self.log, self.config = root / "train.log", root / "config.yaml"
        self.library = root / "runbooks"

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "RUNBOOK_PATH": str(self.library), "RUNBOOK_LANG": "en",
               "XDG_STATE_HOME": str(self.root / "state")}
        return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True, text=True,
                              env=env, cwd=self.root, stdin=subprocess.DEVNULL, timeout=timeout)

    def run_args(self) -> list[str]:
        return ["run", "secret-probe", "--nodes", "localhost", "--set", "match=secret-probe-trainer",
                "--set", f"log={self.log}", "--set", f"config={self.config}",
                "--set", f"hf_token={CLI_TOKEN}"]


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Incident]:
    root = tmp_path_factory.mktemp("secrets")
    env = {**os.environ, "HF_TOKEN": HF_TOKEN, "AWS_ACCESS_KEY_ID": AWS_KEY_ID,
           "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "WANDB_API_KEY": WANDB_KEY,
           "DATABASE_URL": f"postgres://trainer:{DB_PASSWORD}@db.internal:5432/runs"}
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "secret-probe-trainer",
                                "--hf_token", HF_TOKEN, f"--db=postgres://trainer:{DB_PASSWORD}@db/x"],
                               env=env, stdin=subprocess.DEVNULL)
    try:
        probe = Incident(root, trainer.pid)
        probe.log.write_text(_log_text(), encoding="utf-8")
        probe.config.write_text(_config_text(), encoding="utf-8")
        probe.library.mkdir()
        (probe.library / "secret-probe.yaml").write_text(RUNBOOK, encoding="utf-8")
        time.sleep(0.2)  # the process is in /proc with its environment
        yield probe
    finally:
        trainer.kill()
        trainer.wait()


def _assert_clean(text: str, where: str) -> None:
    leaked = [secret for secret in SECRETS if secret in text]
    assert not leaked, f"{where} holds {leaked}"


def _files(directory: Path) -> Iterator[tuple[str, str]]:
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            yield str(path.relative_to(directory)), path.read_bytes().decode("utf-8", errors="replace")


def test_the_planted_secrets_are_really_there(incident: Incident) -> None:
    """The baseline: without redaction, each secret would be read (so the other tests mean something)."""
    environ = Path(f"/proc/{incident.pid}/environ").read_bytes().decode()
    assert HF_TOKEN in environ and AWS_SECRET in environ and DB_PASSWORD in environ
    assert BEARER in incident.log.read_text() and GCP_PEM in incident.config.read_text()
    assert SITE_TOKEN in (incident.library / "secret-probe.yaml").read_text()


@pytest.mark.parametrize("fmt", ["text", "json", "md", "html", "junit"])
def test_reports_hold_no_secret(incident: Incident, fmt: str) -> None:
    out_file = incident.root / f"report.{fmt}"
    done = incident.cli(*incident.run_args(), "--format", fmt, "-o", str(out_file))
    assert done.returncode in (0, 1), done.stderr[-3000:]
    report = out_file.read_text(encoding="utf-8")
    assert "secret-probe" in report and "leaky" in report, report[:2000]
    _assert_clean(report, f"the {fmt} report")
    _assert_clean(done.stdout + done.stderr, f"the output of run --format {fmt}")


def test_the_json_report_still_shows_what_was_read(incident: Incident) -> None:
    done = incident.cli(*incident.run_args(), "--format", "json")
    report = json.loads(done.stdout)
    dumped = json.dumps(report)
    assert LOG_MARKER in dumped, "the log was read"
    assert "trainer@demo.iam.gserviceaccount.com" in dumped, "the config was read"
    assert "***redacted***" in dumped, "the env check hid secrets on the node"


def test_a_recording_holds_no_secret(incident: Incident) -> None:
    record = incident.root / "recording"
    done = incident.cli(*incident.run_args(), "--format", "json", "--record", str(record))
    assert done.returncode in (0, 1), done.stderr[-3000:]
    files = dict(_files(record))
    assert files and LOG_MARKER in "".join(files.values())
    for name, text in files.items():
        _assert_clean(text, f"recording file {name}")


def test_applied_fixes_leave_no_secret_in_the_audit_log_or_the_report(incident: Incident) -> None:
    audit = incident.root / "audit.jsonl"
    done = incident.cli(*incident.run_args(), "--format", "json", "--apply", "--audit-log", str(audit))
    assert done.returncode in (0, 1), done.stderr[-3000:]
    fixes = json.loads(done.stdout)["nodes"][0]["conclusion"]["fixes"]
    assert [f["result"]["status"] for f in fixes] == ["ok", "ok"], fixes
    assert LOG_MARKER in fixes[0]["result"]["stdout"], "the fix printed the log"
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [e["fix"] for e in entries] == ["Show the config", "Log in"]
    _assert_clean(audit.read_text(), "the audit log")


def test_the_report_of_applied_fixes_holds_no_secret(incident: Incident) -> None:
    """A fix's output (it printed the log and the config) is in the report."""
    done = incident.cli(*incident.run_args(), "--format", "json", "--apply",
                        "--audit-log", str(incident.root / "audit-2.jsonl"))
    assert LOG_MARKER in done.stdout
    _assert_clean(done.stdout, "the report of applied fixes")


def test_a_bundle_holds_no_secret(incident: Incident) -> None:
    report = incident.root / "for-bundle.json"
    incident.cli(*incident.run_args(), "--format", "json", "-o", str(report))
    bundle = incident.root / "bundle.tar.gz"
    done = incident.cli("collect", "--nodes", "localhost", "--set", f"log={incident.log}",
                        "--set", f"config={incident.config}", "--set", f"pid={incident.pid}",
                        "--report", str(report), "-o", str(bundle), timeout=300)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    with tarfile.open(bundle) as archive:
        members = {m.name: archive.extractfile(m).read().decode("utf-8", errors="replace")  # type: ignore[union-attr]
                   for m in archive.getmembers() if m.isfile()}
    joined = "\n".join(members.values())
    assert LOG_MARKER in joined and "report.json" in " ".join(members)
    for name, text in members.items():
        _assert_clean(text, f"bundle member {name}")
    _assert_clean(done.stdout + done.stderr, "the output of collect")


def test_the_site_holds_no_secret(incident: Incident) -> None:
    site = incident.root / "site"
    done = incident.cli("site", "build", "-o", str(site), "--no-search", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    pages = dict(_files(site))
    assert any("secret-probe" in name for name in pages), "the runbook has its pages"
    for name, text in pages.items():
        _assert_clean(text, f"site file {name}")
