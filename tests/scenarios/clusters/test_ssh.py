"""The fake multi-host cluster (scenarios/clusters/ssh.py): real sshds in their own namespaces."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests import cluster_fixture, daemon_fixture

# after tests.cluster_fixture, which makes sure `scenarios` is the repository's package
from scenarios.clusters.net import free_port  # isort: skip
from scenarios.clusters.ssh import Cluster  # isort: skip

make_cluster = cluster_fixture.make_cluster
cluster = cluster_fixture.cluster
cluster8 = cluster_fixture.cluster8
_module_cluster_factory = cluster_fixture._module_cluster_factory
pytestmark = cluster_fixture.needs_cluster
MakeCluster = cluster_fixture.MakeCluster

ROOT = Path(__file__).resolve().parents[3]
_wait_for = daemon_fixture.wait_for


def _our_processes(marker: str) -> list[int]:
    """Pids (of this machine) whose command line mentions `marker`."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in raw:
                pids.append(int(entry))
    return pids


def test_ssh_hostname(cluster: Cluster) -> None:
    res = cluster.ssh("node01", "hostname")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "node01"  # own UTS namespace
    # addresses work directly too, through the `Host 127.0.0.*` block
    res = cluster.ssh(cluster.hosts[1].address, "hostname")
    assert (res.returncode, res.stdout.strip()) == (0, "node02"), res.stderr
    assert cluster.names() == ["node01", "node02", "node03"]
    assert [h.address for h in cluster.hosts] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


def test_own_pid_namespace(cluster: Cluster) -> None:
    res = cluster.ssh("node02", "ps -e -o pid=,args=")
    assert res.returncode == 0, res.stderr
    rows = [line.split(None, 1) for line in res.stdout.strip().splitlines()]
    assert 2 <= len(rows) <= 8, res.stdout  # sshd, the session, its shell/ps: nothing else
    pid1 = next(args for pid, args in rows if pid == "1")
    assert "sshd" in pid1 and str(cluster.host("node02").sshd_config) in pid1
    kinds = {args.split()[0] for _, args in rows}
    assert kinds <= {"sshd:", "ps", "bash", "-bash"}, res.stdout  # not the pytest process
    assert sys.argv[0] not in res.stdout
    # the same, read from outside, without ssh
    assert cluster.processes("node02")[0].startswith("sshd: ")
    run = cluster.run_in("node02", ["ps", "-e", "-o", "pid=,args="])
    assert run.returncode == 0 and sys.argv[0] not in run.stdout, run.stderr
    assert len(run.stdout.splitlines()) <= 8, run.stdout
    assert cluster.run_in("node02", ["hostname"]).stdout.strip() == "node02"


def test_process_on_one_host_is_invisible_on_another(cluster: Cluster) -> None:
    res = cluster.ssh("node02", "nohup setsid sleep 300 >/dev/null 2>&1 </dev/null &", timeout=15)
    assert res.returncode == 0, res.stderr
    assert _wait_for(lambda: "sleep 300" in cluster.processes("node02"), 5), cluster.processes("node02")
    assert "sleep 300" not in cluster.processes("node03")
    assert "sleep 300" not in cluster.ssh("node03", "ps -e -o args=").stdout
    assert "sleep 300" in cluster.ssh("node02", "ps -e -o args=").stdout


def test_python_missing(make_cluster: MakeCluster) -> None:
    cl = make_cluster(3, python_missing={"node03"})
    res = cl.ssh("node03", "command -v python3 || echo missing")
    assert (res.returncode, res.stdout.strip()) == (0, "missing"), res.stderr
    assert cl.ssh("node03", "python3 -V").returncode == 127
    assert cl.ssh("node03", "ps -e -o pid= | wc -l").returncode == 0  # other tools are there
    ok = cl.ssh("node01", "python3 -c 'import sys; print(sys.version_info >= (3, 10))'")
    assert ok.stdout.strip() == "True", ok.stderr
    assert cl.run_in("node03", ["python3", "-V"]).returncode != 0


def test_wrong_host_key(make_cluster: MakeCluster) -> None:
    cl = make_cluster(3, wrong_host_key={"node02"})
    res = cl.ssh("node02", "true", timeout=15)
    assert res.returncode == 255
    assert ("REMOTE HOST IDENTIFICATION HAS CHANGED" in res.stderr
            or "Host key verification failed" in res.stderr), res.stderr
    assert cl.ssh("node01", "true").returncode == 0


def test_kill_sshd(cluster: Cluster) -> None:
    assert cluster.ssh("node02", "nohup setsid sleep 300 >/dev/null 2>&1 </dev/null &").returncode == 0
    assert _wait_for(lambda: "sleep 300" in cluster.processes("node02"), 5)
    host = cluster.host("node02")
    sleep_pid = next(outer for outer, _, args in cluster.process_table("node02") if args == "sleep 300")
    assert cluster.kill_sshd("node02")
    assert _wait_for(lambda: not os.path.exists(f"/proc/{host.ns_init_pid}"), 5)
    assert not os.path.exists(f"/proc/{host.unshare_pid}")
    assert _wait_for(lambda: not os.path.exists(f"/proc/{sleep_pid}"), 5)  # died with the host
    assert cluster.processes("node02") == []
    t0 = time.monotonic()
    res = cluster.ssh("node02", "true", timeout=10)
    assert res.returncode == 255 and "Connection refused" in res.stderr, res.stderr
    assert time.monotonic() - t0 < 3
    assert cluster.ssh("node01", "true").returncode == 0  # the others live on


def test_stop_leaves_nothing(make_cluster: MakeCluster) -> None:
    cl = make_cluster(3)
    assert cl.ssh("node01", "nohup setsid sleep 300 >/dev/null 2>&1 </dev/null &").returncode == 0
    pids = [p for h in cl.hosts for p in (h.unshare_pid, h.ns_init_pid)]
    assert len(_our_processes(str(cl.base))) >= 6
    assert cl.stop()
    assert _wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in pids), 5)
    assert _our_processes(str(cl.base)) == []
    assert subprocess.run(["pgrep", "-f", str(cl.base)], capture_output=True).returncode == 1
    assert cl.stop()  # idempotent
    assert (cl.base / "node01" / "sshd.log").exists()  # files stay


def test_two_clusters_side_by_side(make_cluster: MakeCluster) -> None:
    a, b = make_cluster(2), make_cluster(2)
    assert a.port != b.port
    assert a.ssh("node02", "hostname").stdout.strip() == "node02"
    assert b.ssh("node02", "hostname").stdout.strip() == "node02"
    port = free_port(["127.0.0.2", "127.0.0.3"])
    assert 1024 < port < 65536


def test_cluster8(cluster8: Cluster) -> None:
    assert cluster8.names() == [f"node{i:02d}" for i in range(1, 9)]
    assert cluster8.hosts[-1].address == "127.0.0.9"
    assert [h.name for h in cluster8.hosts if h.python_missing] == ["node07"]
    res = cluster8.ssh("node08", "hostname; command -v python3 >/dev/null && echo py")
    assert res.stdout.split() == ["node08", "py"], res.stderr
    assert cluster8.ssh("node07", "command -v python3").returncode != 0
    # OpenSSH takes ~/.ssh from the passwd entry, not $HOME: it needs -F (Cluster.ssh does)
    res = cluster8.ssh("node05", "hostname")
    assert res.stdout.strip() == "node05", res.stderr


def test_start_scenario_on_a_host(cluster: Cluster, tmp_path: Path) -> None:
    workdir = tmp_path / "job"
    info = cluster.start_scenario("node02", "healthy", str(workdir), speed=4)
    try:
        assert info["name"] == "healthy"
        assert _wait_for(lambda: any("healthy/train.py" in a for a in cluster.processes("node02")), 10)
        assert not any("healthy/train.py" in a for a in cluster.processes("node01"))
        # the pid it reports is a pid inside node02
        ns_pids = {ns for _, ns, _ in cluster.process_table("node02")}
        assert info["pid"] in ns_pids
    finally:
        res = cluster.stop_scenario("node02", str(workdir))
    assert res.returncode == 0, res.stderr
    assert _wait_for(lambda: not any("train.py" in a for a in cluster.processes("node02")), 5)


def test_cli_up_and_sigterm(tmp_path: Path) -> None:
    base = tmp_path / "c"
    proc = subprocess.Popen([sys.executable, "-m", "scenarios.clusters.ssh", "up", "2", "--dir", str(base),
                             "--port", "auto"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()),  # type: ignore[union-attr]
                                  daemon=True)
        reader.start()
        reader.join(timeout=15)
        assert got and got[0], "no JSON line from `up` within 15 s"
        info = json.loads(got[0])
        assert info["names"] == ["node01", "node02"]
        res = subprocess.run(["ssh", "-F", info["ssh_config"], "-o", "BatchMode=yes", "node02", "hostname"],
                             capture_output=True, text=True, timeout=15)
        assert res.stdout.strip() == "node02", res.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert _our_processes(str(base)) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            subprocess.run([sys.executable, "-m", "scenarios.clusters.ssh", "down", "--dir", str(base)],
                           cwd=ROOT, timeout=20)


@pytest.mark.parametrize("bad", [{"python_missing": {"node09"}}, {"wrong_host_key": {99}}])
def test_bad_host_selection(tmp_path: Path, bad: dict[str, set[object]]) -> None:
    with pytest.raises(ValueError):
        Cluster.start(2, tmp_path, port=None, **bad)  # type: ignore[arg-type]
