"""Every way a host can fail, in one `runbook run` over SSH: the healthy hosts conclude as
usual and each broken one gets its own precise reason, in the JSON and the text report.

Real faults on the loopback cluster of scenarios/clusters/ssh.py: a host that is down, one whose
host key changed, one without python3, one whose sshd dies mid-run, one whose disk is full,
one where a check hangs, one behind a slow link and one behind a link too slow to connect.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from runbook.report import get_reporter
from tests import cluster_fixture
from tests.e2e.test_ssh_cluster import by_node, conclusion, start_layout, write_inventory
from tests.polling import wait_for

pytestmark = pytest.mark.e2e
make_cluster = cluster_fixture.make_cluster
delay_proxy = cluster_fixture.delay_proxy

LAYOUT = {"node01": "healthy", "node02": "loader_accumulating", "node06": "nvidia_smi_hang",
          "node08": "nvidia_smi_hang", "node09": "healthy"}
CONNECT_TIMEOUT = 6


def test_every_host_fault_gets_its_own_reason_in_one_run(make_cluster, delay_proxy,
                                                         tmp_path: Path) -> None:
    cl = make_cluster(9, python_missing={"node05"}, wrong_host_key={"node04"})
    hosts = start_layout(cl, tmp_path, LAYOUT)
    nine = cl.host("node09")
    slow, stuck = delay_proxy(nine.address, nine.port, 2.0), delay_proxy(nine.address, nine.port, 300)
    cl.add_alias("slow09", "node09", slow.address, slow.port)
    cl.add_alias("stuck09", "node09", stuck.address, stuck.port)
    hosts["slow09"] = hosts["stuck09"] = hosts.pop("node09")
    cl.kill_sshd("node03")  # down: nothing listens there any more
    cl.fill_disk("node07")
    inventory = write_inventory(tmp_path, hosts)
    time.sleep(2.5)  # the hanging jobs' logs go quiet for longer than stall_after
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "runbook", "run", "training-hang", "-i", str(inventory),
                             "--set", "stall_after=2", "--connect-timeout", str(CONNECT_TIMEOUT),
                             "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**cl.env(), "RUNBOOK_LANG": "en"})
    try:
        wait_for(lambda: any("nvidia-smi" in p for p in cl.processes("node06")), timeout=60)
        cl.kill_sshd("node06")  # its gpu check is hanging right now
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    elapsed = time.monotonic() - began
    report = json.loads(out)
    nodes = by_node(report)
    assert_each_reason(cl, nodes, stuck)
    assert "Traceback" not in err and "Exception" not in err, err
    assert report["summary"]["exit_code"] == proc.returncode == 1
    assert report["summary"]["incomplete"] is False
    assert elapsed < 150, elapsed
    text = get_reporter("text", lang="en").render(report)
    for name in ("node03", "node04", "node05", "node06", "node07", "stuck09"):
        assert f"{name}: ✖" in text and f"Reason: {nodes[name]['reason']}" in text, (name, text)
    for name in ("node01", "node02", "node08", "node09"):
        wait_for(lambda n=name: not _leftovers(cl, n), timeout=10,
                  what=lambda n=name: f"{n} still runs {_leftovers(cl, n)}")


def assert_each_reason(cl: Any, nodes: dict[str, dict[str, Any]], stuck: Any) -> None:
    assert conclusion(nodes["node01"]) == "healthy"
    assert conclusion(nodes["node02"]) == "dataloader-accumulating"
    assert conclusion(nodes["slow09"]) == "healthy"  # 2 s to connect, well within the timeout
    hang = nodes["node08"]  # a check that hangs is a finding, not a transport failure
    assert conclusion(hang) == "gpu-driver-hang" and hang["evidence"][-1]["result"]["timed_out"] is True
    expected = {
        "node03": ("unreachable", f"connection refused by {cl.host('node03').address}:{cl.port}: "
                                  "nothing listens there"),
        "node04": ("unreachable", f"host key of {cl.host('node04').address} changed: it does not "
                                  "match known_hosts (refused"),
        "node05": ("error", "python3 not found on the node's PATH: point --python at a Python 3"),
        "node06": ("unreachable", "connection lost while the check ran"),
        "node07": ("unreachable", "cannot copy the probe to ~/.cache/runbook on the node: "
                                  "No space left on device"),
        "stuck09": ("unreachable", f"connection to {stuck.address}:{stuck.port} too slow: the SSH "
                                   f"handshake did not finish within {CONNECT_TIMEOUT}s"),
    }
    for name, (status, reason) in expected.items():
        node = nodes[name]
        assert node["status"] == status and reason in node["reason"], (name, node)
        assert node["reason"].count("\n") == 0, node["reason"]
    assert "ssh-keygen -R" in nodes["node04"]["reason"]


def _leftovers(cl: Any, host: str) -> list[str]:
    return [p for p in cl.processes(host) if "runbook-probe" in p or "nvidia-smi" in p]
