"""The SSH transport's use of OpenSSH without a server: the config it hands `ssh`, the reasons
it reads in what `ssh` prints, and the probe's `--stop-at-eof` that stands in for a remote kill."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runbook.transports import _openssh as openssh
from runbook.transports.bundle import local_bundle
from tests.polling import wait_for

WHERE = ("10.0.0.7", 2222, "alice")


def test_the_config_reads_the_users_then_the_systems_then_adds_defaults(tmp_path: Path) -> None:
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host gpu*\n    User alice\n")
    text = openssh.config_text(str(tmp_path))
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0] == f"Include {tmp_path}/.ssh/config"
    if openssh.SYSTEM_CONFIG.is_file():
        assert lines[1] == f"Include {openssh.SYSTEM_CONFIG}"
    defaults = lines[lines.index("Host *") + 1:]  # after both: the user's settings win
    assert f"UserKnownHostsFile {tmp_path}/.ssh/known_hosts {tmp_path}/.ssh/known_hosts2" in defaults
    assert not any(line.startswith("IdentityFile") for line in defaults)  # IdentitiesOnly stays whole


def test_the_config_is_written_once_per_content_and_only_the_user_can_read_it(tmp_path: Path,
                                                                               monkeypatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    first = openssh.write_config(str(tmp_path))
    assert openssh.write_config(str(tmp_path)) == first
    assert Path(first).is_relative_to(tmp_path / ".cache" / "runbook" / "ssh")
    assert Path(first).stat().st_mode & 0o077 == 0  # ssh refuses a config others may write
    out = subprocess.run(["ssh", "-F", first, "-G", "somehost"], capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 0, out.stderr  # ssh accepts every line of it


@pytest.mark.parametrize(("stderr", "reason"), [
    ("ssh: connect to host 10.0.0.7 port 2222: Connection refused",
     "connection refused by 10.0.0.7:2222: nothing listens there"),
    ("@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\nHost key verification failed.",
     "host key of 10.0.0.7 changed: it does not match known_hosts"),
    ("No ED25519 host key is known for [10.0.0.7]:2222 and you have requested strict checking.\r\n"
     "Host key verification failed.", "unknown host key: 10.0.0.7 is not in known_hosts"),
    ("alice@10.0.0.7: Permission denied (publickey).", "key refused: authentication failed as alice@"),
    ("ssh: Could not resolve hostname gpu9: Name or service not known", "cannot resolve host name"),
    ("Connection timed out during banner exchange\nConnection to 10.0.0.7 port 2222 timed out",
     "connection to 10.0.0.7:2222 too slow: the SSH handshake did not finish within 5s"),
    ("ssh: connect to host 10.0.0.7 port 2222: Connection timed out",
     "connection to 10.0.0.7:2222 timed out after 5s"),
    ("kex_exchange_identification: Connection closed by remote host\r\n",
     "no SSH greeting from 10.0.0.7:2222: the other side closed"),
    ("/home/alice/.ssh/config: line 3: Bad configuration option: colour\n"
     "/home/alice/.ssh/config: terminating, 1 bad configuration options",
     "cannot use the ssh settings of 10.0.0.7: /home/alice/.ssh/config: line 3: Bad configuration"),
    ("something new", "cannot connect to alice@10.0.0.7:2222: something new"),
])
def test_each_ssh_failure_has_its_own_reason(stderr: str, reason: str) -> None:
    assert openssh.describe_failure(stderr, WHERE, 5.0, 0.1).startswith(reason)


def test_a_greeting_closed_at_the_limit_is_called_slow() -> None:
    text = openssh.describe_failure("kex_exchange_identification: read: Connection reset by peer",
                                    WHERE, 5.0, 4.9)
    assert text.startswith("connection to 10.0.0.7:2222 too slow")


def test_the_end_of_input_stops_the_check_under_way_and_its_commands(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    request = {"check": "command", "timeout": 120,
               "with": {"run": f"echo $$ > {marker}; exec sleep 300"}}
    probe = subprocess.Popen([sys.executable, str(local_bundle()), "--serve", "--stop-at-eof"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    try:
        assert probe.stdin is not None
        probe.stdin.write(json.dumps(request).encode() + b"\n")
        probe.stdin.flush()
        wait_for(lambda: marker.exists() and marker.read_text().strip())
        sleeper = int(marker.read_text())
        began = time.monotonic()
        probe.stdin.close()  # what the transport does to stop a check: no signal, no second connection
        probe.wait(timeout=10)
        assert time.monotonic() - began < 5
        wait_for(lambda: not _alive(sleeper))
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()


def test_without_the_flag_a_serving_probe_still_answers_what_it_was_sent() -> None:
    request = {"check": "command", "timeout": 10, "with": {"run": "echo hello"}}
    out = subprocess.run([sys.executable, str(local_bundle()), "--serve"], capture_output=True,
                         input=json.dumps(request).encode() + b"\n", timeout=60)
    assert json.loads(out.stdout)["result"]["stdout"].strip() == "hello"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


