"""`runbook run` over SSH on a cluster of loopback hosts, each in its own PID namespace.

Real sshd, real scenarios inside the hosts, real failures: a dead host, a refused host
key, no python3, a check that hangs, an sshd killed mid-run, and Ctrl-C.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import cluster_fixture
from tests.polling import wait_for

pytestmark = pytest.mark.e2e
make_cluster = cluster_fixture.make_cluster

# host -> scenario started inside it (None: no training process on that host)
LAYOUT = {"node01": "loader_accumulating", "node02": "healthy", "node03": "healthy",
          "node04": "nvidia_smi_hang", "node05": "healthy", "node06": None}


def start_layout(cl: Any, tmp: Path, layout: dict[str, str | None]) -> dict[str, dict[str, Any]]:
    """Start each host's scenario; returns the inventory's per-host vars."""
    hosts: dict[str, dict[str, Any]] = {}
    for name in cl.names():
        workdir = tmp / name
        workdir.mkdir(parents=True, exist_ok=True)
        log = workdir / "train.log"
        hosts[name] = {"params": {"log": str(log)}}
        scenario = layout.get(name)
        if scenario:
            info = cl.start_scenario(name, scenario, str(workdir))
            if info.get("path_prepend"):
                hosts[name]["env"] = {"PATH": info["env"]["PATH"]}
        elif name in layout:  # a job that already died of OOM on this host
            log.write_text("step 10 | loss 2.1\ntorch.OutOfMemoryError: CUDA out of memory. "
                           "Tried to allocate 20.00 GiB\n")
    for name, scenario in layout.items():
        if scenario:
            wait_for(lambda n=name: Path(hosts[n]["params"]["log"]).stat().st_size > 0)
    return hosts


def write_inventory(tmp: Path, hosts: dict[str, dict[str, Any]]) -> Path:
    inventory = tmp / "inventory.yaml"
    inventory.write_text(json.dumps({"hosts": hosts}))  # JSON is YAML
    return inventory


def runbook(cl: Any, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**cl.env(), "RUNBOOK_LANG": "en"}
    return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True,
                          text=True, env=env, timeout=timeout)


def by_node(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["node"]: n for n in report["nodes"]}


def conclusion(node: dict[str, Any]) -> str | None:
    return (node.get("conclusion") or {}).get("id")


def test_eight_hosts_each_get_their_own_diagnosis(make_cluster, tmp_path: Path) -> None:
    cl = make_cluster(8, python_missing={"node07"}, wrong_host_key={"node08"})
    inventory = write_inventory(tmp_path, start_layout(cl, tmp_path, LAYOUT))
    time.sleep(2.5)  # node04's log goes quiet for longer than stall_after
    out = runbook(cl, "run", "training-hang", "--inventory", str(inventory), "--nodes",
                  "node[01-08]", "--set", "stall_after=2", "--format", "json")
    report = json.loads(out.stdout)
    nodes = by_node(report)
    assert conclusion(nodes["node01"]) == "dataloader-accumulating"
    assert {conclusion(nodes[n]) for n in ("node02", "node03", "node05")} == {"healthy"}
    assert conclusion(nodes["node04"]) == "gpu-driver-hang"
    assert nodes["node04"]["evidence"][-1]["result"]["timed_out"] is True
    assert conclusion(nodes["node06"]) == "crashed-cuda-oom"
    assert nodes["node07"]["status"] == "error"
    assert "python3 not found on the node's PATH" in nodes["node07"]["reason"]
    assert nodes["node08"]["status"] == "unreachable"
    assert "does not match known_hosts" in nodes["node08"]["reason"]
    assert report["summary"]["exit_code"] == out.returncode == 1
    # Each host saw only its own processes: node01's loader is not found on node02.
    assert nodes["node01"]["evidence"][0]["result"]["count"] == 1


def test_text_report_groups_nodes_by_conclusion(make_cluster, tmp_path: Path) -> None:
    cl = make_cluster(4)
    layout = {"node01": "healthy", "node02": "healthy", "node03": "healthy", "node04": None}
    inventory = write_inventory(tmp_path, start_layout(cl, tmp_path, layout))
    out = runbook(cl, "run", "training-hang", "-i", str(inventory))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "node04: ✖ The job died of CUDA out of memory" in out.stdout
    assert "node[01-03]: ✔ Training is making progress" in out.stdout


def test_unreachable_and_unknown_hosts_are_reported_not_fatal(make_cluster, tmp_path: Path) -> None:
    cl = make_cluster(2)
    cl.kill_sshd("node02")
    known = cl.known_hosts.read_text().splitlines()
    cl.known_hosts.write_text("\n".join(line for line in known if "127.0.0.2]" not in line) + "\n")
    out = runbook(cl, "run", "training-hang", "--nodes", "node01,node02,127.0.0.99",
                  "--connect-timeout", "3", "--set", "match=^nothing$", "--format", "json")
    nodes = by_node(json.loads(out.stdout))
    assert nodes["node01"]["status"] == "unreachable"
    assert "unknown host key" in nodes["node01"]["reason"]
    assert "--accept-new-host-keys" in nodes["node01"]["reason"]
    assert nodes["node02"]["status"] == "unreachable"
    assert "connection refused" in nodes["node02"]["reason"]
    assert nodes["127.0.0.99"]["status"] == "unreachable"
    assert out.returncode == 3
    accepted = runbook(cl, "run", "training-hang", "--nodes", "node01", "--accept-new-host-keys",
                       "--set", "match=^nothing$", "--format", "json")
    assert by_node(json.loads(accepted.stdout))["node01"]["status"] == "concluded"


def test_a_host_whose_sshd_dies_mid_run(make_cluster, tmp_path: Path) -> None:
    cl = make_cluster(3)
    layout = {"node01": "healthy", "node02": "nvidia_smi_hang", "node03": "healthy"}
    inventory = write_inventory(tmp_path, start_layout(cl, tmp_path, layout))
    time.sleep(2.5)
    env = {**cl.env(), "RUNBOOK_LANG": "en"}
    proc = subprocess.Popen([sys.executable, "-m", "runbook", "run", "training-hang", "-i",
                             str(inventory), "--set", "stall_after=2", "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wait_for(lambda: any("nvidia-smi" in p for p in cl.processes("node02")), timeout=20)
    cl.kill_sshd("node02")  # node02's gpu check is hanging right now
    out, _ = proc.communicate(timeout=60)
    nodes = by_node(json.loads(out))
    assert nodes["node02"]["status"] == "unreachable"
    assert "connection lost" in nodes["node02"]["reason"]
    assert {conclusion(nodes["node01"]), conclusion(nodes["node03"])} == {"healthy"}


def test_ctrl_c_leaves_no_probe_behind(make_cluster, tmp_path: Path) -> None:
    cl = make_cluster(3)
    layout = {"node01": "nvidia_smi_hang", "node02": "nvidia_smi_hang", "node03": "healthy"}
    inventory = write_inventory(tmp_path, start_layout(cl, tmp_path, layout))
    time.sleep(2.5)
    env = {**cl.env(), "RUNBOOK_LANG": "en"}
    proc = subprocess.Popen([sys.executable, "-m", "runbook", "run", "training-hang", "-i",
                             str(inventory), "--set", "stall_after=2", "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    for host in ("node01", "node02"):
        wait_for(lambda h=host: any("nvidia-smi" in p for p in cl.processes(h)), timeout=20)
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and time.monotonic() - sent < 10, err
    assert "interrupted" in err
    report = json.loads(out)  # the partial report is still written, and says it is partial
    assert (report["summary"]["incomplete"], report["summary"]["reason"]) == (True, "interrupted (Ctrl-C)")
    assert by_node(report)["node03"]["conclusion"]["id"] == "healthy"
    assert by_node(report)["node01"]["status"] == "timeout"
    assert by_node(report)["node01"]["reason"].endswith(": interrupted")
    for host in cl.names():
        wait_for(lambda h=host: not _probe_leftovers(cl, h), timeout=5,
                  what=lambda h=host: f"{h} still runs {_probe_leftovers(cl, h)}")


def _probe_leftovers(cl: Any, host: str) -> list[str]:
    return [p for p in cl.processes(host) if "runbook-probe" in p or "nvidia-smi" in p]



def test_ssh_config_aliases_proxyjump_and_a_refused_key(make_cluster, tmp_path: Path) -> None:
    cl = make_cluster(2)
    stranger = tmp_path / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    second = cl.hosts[1]
    with cl.ssh_config.open("a") as config:
        config.write(f"""
Host via-jump
    HostName {second.address}
    Port {second.port}
    User root
    IdentityFile {cl.identity}
    UserKnownHostsFile {cl.known_hosts}
    ProxyJump node01

Host wrong-key
    HostName {second.address}
    Port {second.port}
    User root
    IdentityFile {stranger}
    IdentitiesOnly yes
    UserKnownHostsFile {cl.known_hosts}
""")
    out = runbook(cl, "run", "training-hang", "--nodes", "via-jump,wrong-key",
                  "--set", "match=^nothing$", "--format", "json")
    nodes = by_node(json.loads(out.stdout))
    assert nodes["via-jump"]["status"] == "concluded", nodes["via-jump"].get("reason")
    # The probe really ran on node02, reached through node01.
    assert nodes["via-jump"]["evidence"][0]["result"]["found"] is False
    assert nodes["wrong-key"]["status"] == "unreachable"
    assert "key refused" in nodes["wrong-key"]["reason"]


def test_hosts_by_address_with_a_slurm_hostlist(make_cluster, tmp_path: Path) -> None:
    cl = make_cluster(3)
    first, last = (int(h.address.rsplit(".", 1)[1]) for h in (cl.hosts[0], cl.hosts[-1]))
    spec = f"127.0.0.[{first}-{last}]"
    out = runbook(cl, "run", "training-hang", "--nodes", spec, "--set", "match=^nothing$")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{spec}: ℹ No training process is running here" in out.stdout


def test_cluster_addresses_go_on_past_127_0_0_254() -> None:
    from scenarios.clusters.net import host_address

    assert [host_address(p) for p in (2, 254, 255, 256, 508, 509)] == [
        "127.0.0.2", "127.0.0.254", "127.0.1.1", "127.0.1.2", "127.0.1.254", "127.0.2.1"]
