"""The gateway transport (--gateways) on the loopback cluster of real sshds: node01 and node02
are the gateways, each in front of its share of the other hosts.

The gateways reach their nodes with their own ssh and ~/.ssh/config, which also knows the
hosts as `tNN`, aliases the client's config lacks: a run over tNN can only have gone through
the gateways. A gateway that dies (before or during the run) makes its nodes unreachable,
naming it; Ctrl-C stops the whole tree, leaving no relay or probe on any host.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from runbook.cli import main
from runbook.transports import Node
from runbook.transports.gateway import GatewayTransport, assign, relay_bytes, relay_name
from runbook.transports.ssh import SshTransport
from tests import cluster_fixture
from tests.polling import wait_for

make_cluster = cluster_fixture.make_cluster
_module_cluster_factory = cluster_fixture._module_cluster_factory
needs_cluster = cluster_fixture.needs_cluster

GATEWAYS = ("node01", "node02")
NO_PROCESS = ("--set", "match=^nothing$")  # training-hang concludes no-training-process
HANG = """apiVersion: runbook/v1
id: gateway-hang
version: 1.0.0
title: {en: Hang, zh: 卡住}
summary: {en: Every node hangs in one check, zh: 每个节点卡在一个检查中}
start: look
steps:
  look:
    title: {en: Look, zh: 查看}
    check: {type: command, with: {run: "touch MARKS/{{ node.name }}; exec sleep 300"}, timeout: 200s}
    default: done
conclusions:
  done: {severity: ok, taxonomy: [], title: {en: Done, zh: 完成}, explanation: {en: D, zh: 完}}
"""


def with_gateways(cl: Any) -> Any:
    """Give each gateway an ~/.ssh/config: the client's, and `tNN` aliases of every host."""
    text = cl.ssh_config.read_text()
    for host in cl.hosts:
        text += (f"\nHost t{host.name[4:]}\n    HostName {host.address}\n    Port {host.port}\n"
                 f"    User root\n    IdentityFile {cl.identity}\n    IdentitiesOnly yes\n"
                 f"    UserKnownHostsFile {cl.known_hosts}\n    GlobalKnownHostsFile /dev/null\n")
    for name in GATEWAYS:
        ssh_dir = cl.host(name).home / ".ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        (ssh_dir / "config").write_text(text)
        (ssh_dir / "config").chmod(0o600)
    return cl


@pytest.fixture(scope="module")
def cluster6(_module_cluster_factory) -> Any:
    """node01, node02: gateways; node03..node06: the nodes behind them."""
    return with_gateways(_module_cluster_factory(6))


def runbook(cl: Any, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runbook", *args, "--format", "json",
                           "--ssh-persist", "0"], capture_output=True, text=True, timeout=180,
                          env={**cl.env(), "RUNBOOK_LANG": "en", **(env or {})}, stdin=subprocess.DEVNULL)


def verdicts(out: subprocess.CompletedProcess[str]) -> dict[str, tuple[str, str | None]]:
    report = json.loads(out.stdout)
    return {n["node"]: (n["status"], (n.get("conclusion") or {}).get("id")) for n in report["nodes"]}


def reasons(out: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {n["node"]: n.get("reason") or "" for n in json.loads(out.stdout)["nodes"]}


def leftovers(cl: Any, host: str) -> list[str]:
    return [p for p in cl.processes(host)
            if "runbook-relay" in p or "runbook-probe" in p or "sleep 300" in p]


def test_nodes_are_split_in_contiguous_blocks_unless_the_inventory_names_a_gateway() -> None:
    nodes = [Node(f"gpu{i:02d}", "ssh") for i in (5, 1, 4, 2, 3)]
    nodes += [Node("gpu09", "ssh", {"gateway": "gwX"}), Node("localhost", "local")]
    assign(nodes, ["gw1", "gw2"])
    routes = {n.name: (n.transport, n.vars.get("gateway")) for n in nodes}
    assert routes == {"gpu01": ("gateway", "gw1"), "gpu02": ("gateway", "gw1"),
                      "gpu03": ("gateway", "gw1"), "gpu04": ("gateway", "gw2"),
                      "gpu05": ("gateway", "gw2"), "gpu09": ("gateway", "gwX"),
                      "localhost": ("local", None)}


@pytest.mark.parametrize(("argv", "why"), [
    (["--nodes", "a", "--executor", "local", "--gateways", "gw1"],
     "--gateways reaches nodes over SSH: it does not go with --executor local"),
    (["--slurm-job", "42", "--gateways", "gw1"], "it does not go with --slurm-job"),
    (["--nodes", "a", "--gateways", "gw[1-"], "--gateways: bad host list 'gw[1-'"),
])
def test_gateways_that_cannot_apply_are_a_one_line_error(argv: list[str], why: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "training-hang", *argv]) == 2
    err = capsys.readouterr().err
    assert why in err and err.count("\n") == 1, err


def test_the_relay_ships_as_one_zipapp_that_runs_on_the_standard_library_alone(tmp_path: Path) -> None:
    assert relay_bytes() == relay_bytes() and relay_name().startswith("runbook-relay-")
    relay = tmp_path / relay_name()
    relay.write_bytes(relay_bytes())
    # -I -S: no PYTHONPATH, no site-packages; the end of input stops it
    done = subprocess.run([sys.executable, "-I", "-S", str(relay)], input=b'{"config": {}}\n',
                          capture_output=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, b'{"ready": true}\n'), done.stderr


@needs_cluster
def test_a_gateway_run_concludes_every_node_as_the_flat_run_does(cluster6: Any) -> None:
    flat = runbook(cluster6, "run", "training-hang", "--nodes", "node[03-06]", *NO_PROCESS)
    tree = runbook(cluster6, "run", "training-hang", "--nodes", "node[03-06]", *NO_PROCESS,
                   "--gateways", "node[01-02]")
    assert verdicts(tree) == verdicts(flat), tree.stderr
    assert set(verdicts(tree).values()) == {("concluded", "no-training-process")}
    assert tree.returncode == flat.returncode


@needs_cluster
def test_the_nodes_are_reached_from_the_gateways_not_from_the_client(cluster6: Any) -> None:
    # tNN are names only the gateways' ssh config knows
    flat = runbook(cluster6, "run", "training-hang", "--nodes", "t[03-06]", *NO_PROCESS)
    assert {status for status, _ in verdicts(flat).values()} == {"unreachable"}
    assert all("cannot resolve host name" in why for why in reasons(flat).values())
    tree = runbook(cluster6, "run", "training-hang", "--nodes", "t[03-06],zz-nowhere", *NO_PROCESS,
                   "--gateways", "node[01-02]")
    found = verdicts(tree)
    assert found.pop("zz-nowhere") == ("unreachable", None), tree.stderr
    assert set(found.values()) == {("concluded", "no-training-process")}, tree.stderr
    # a node its gateway cannot reach: the SSH transport's reason, from the gateway's ssh
    assert reasons(tree)["zz-nowhere"].endswith("cannot resolve host name 'zz-nowhere' (check the "
                                                "name, or its HostName in ~/.ssh/config) (through "
                                                "gateway node02)")
    for host in cluster6.names():  # the relays ended with the run
        assert leftovers(cluster6, host) == []


@needs_cluster
def test_ctrl_c_stops_the_whole_tree(cluster6: Any, tmp_path: Path) -> None:
    marks, library = tmp_path / "marks", tmp_path / "library"
    marks.mkdir()
    library.mkdir()
    (library / "gateway-hang.yaml").write_text(HANG.replace("MARKS", str(marks)))
    env = {**cluster6.env(), "RUNBOOK_LANG": "en", "RUNBOOK_PATH": str(library)}
    proc = subprocess.Popen([sys.executable, "-m", "runbook", "run", "gateway-hang", "--nodes",
                             "node[03-06]", "--gateways", "node[01-02]", "--ssh-persist", "0",
                             "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: len(list(marks.iterdir())) == 4 or proc.poll() is not None, 60)
        assert proc.poll() is None, proc.communicate()
        assert any("runbook-relay" in p for p in cluster6.processes("node01"))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == 130, err
    report = json.loads(out)
    assert report["summary"]["incomplete"] is True
    for host in cluster6.names():
        wait_for(lambda h=host: not leftovers(cluster6, h), 10, lambda h=host: (h, leftovers(cluster6, h)))


@needs_cluster
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_relay_told_to_stop_stops_its_nodes_probes(cluster6: Any, tmp_path: Path, signum: int) -> None:
    relay = tmp_path / relay_name()
    relay.write_bytes(relay_bytes())
    proc = subprocess.Popen([sys.executable, str(relay)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    hang = {"check": "command", "with": {"run": f"touch {tmp_path}/mark; exec sleep 300"}}
    config = {"ssh": ["-F", str(cluster6.ssh_config), "-o", "BatchMode=yes"], "connect_timeout": 10}
    request = {"id": 1, "node": "node03", "script": SshTransport._script(Node("node03", "ssh"), "python3"),
               "request": hang, "timeout": 120}
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps({"config": config}) + "\n" + json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline()) == {"ready": True}
        wait_for(lambda: (tmp_path / "mark").exists() or proc.poll() is not None, 60)
        assert leftovers(cluster6, "node03"), "the check does not run"
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == 128 + signum
    finally:
        proc.kill()
        proc.wait(timeout=10)
    wait_for(lambda: not leftovers(cluster6, "node03"), 10, lambda: leftovers(cluster6, "node03"))


@needs_cluster
def test_a_dead_gateway_makes_its_nodes_unreachable_and_the_others_go_on(make_cluster,
                                                                       tmp_path: Path) -> None:
    cl = with_gateways(make_cluster(4))  # node03 behind node01, node04 behind node02
    transport = GatewayTransport(connect_timeout=10, persist=0, gateways={g: {} for g in GATEWAYS})
    nodes = [Node("node03", "gateway", {"gateway": "node01"}),
             Node("node04", "gateway", {"gateway": "node02"})]
    hang = {"check": "command", "with": {"run": f"touch {tmp_path}/$(hostname); exec sleep 300"}}
    answers: dict[str, Any] = {}
    threads = [threading.Thread(target=lambda n=node: answers.__setitem__(
        n.name, transport.run_check(n, hang, 120))) for node in nodes]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(cl.home))
        try:
            for thread in threads:
                thread.start()
            wait_for(lambda: all((tmp_path / n.name).exists() for n in nodes), 60)
            cl.kill_sshd("node02")  # the gateway dies mid-check, with its relay and its ssh
            threads[1].join(timeout=30)
            assert answers["node04"].status == "unreachable"
            assert answers["node04"].error.startswith("through gateway node02: connection lost")
            assert threads[0].is_alive()  # node01's node goes on
        finally:
            transport.close()
            for thread in threads:
                thread.join(timeout=30)
    assert answers["node03"].error == "interrupted: the run is stopping"
    for host in ("node01", "node03", "node04"):  # node04's probe saw its connection end
        wait_for(lambda h=host: not leftovers(cl, h), 10, lambda h=host: (h, leftovers(cl, h)))

    # a gateway down before the run: its nodes are unreachable, named, the others conclude
    out = runbook(cl, "run", "training-hang", "--nodes", "node[03-04]", *NO_PROCESS,
                  "--gateways", "node[01-02]", "--connect-timeout", "5")
    assert verdicts(out) == {"node03": ("concluded", "no-training-process"),
                             "node04": ("unreachable", None)}, out.stderr
    assert "through gateway node02: connection refused by 127.0.0.3" in reasons(out)["node04"]
    assert out.returncode == 3


@needs_cluster
def test_a_batch_through_two_gateways_goes_on_when_one_dies(make_cluster, tmp_path: Path) -> None:
    """The walk's batch API (`run_many`, what `runbook run` uses): one write per gateway, each
    answer as it lands. A gateway that dies answers its nodes `unreachable` at once while the
    other's node still runs; close() (Ctrl-C) ends that one as interrupted."""
    cl = with_gateways(make_cluster(4))  # node03 behind node01, node04 behind node02
    transport = GatewayTransport(connect_timeout=10, persist=0, gateways={g: {} for g in GATEWAYS})
    nodes = [Node("node03", "gateway", {"gateway": "node01"}),
             Node("node04", "gateway", {"gateway": "node02"}),
             Node("node05", "gateway", {})]  # no gateway: an error of its own, the batch goes on
    hang = {"check": "command", "with": {"run": f"touch {tmp_path}/$(hostname); exec sleep 300"}}
    answers: list[tuple[int, Any]] = []
    thread = threading.Thread(target=lambda: answers.extend(transport.run_many(nodes, hang, 120)))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(cl.home))
        try:
            thread.start()
            wait_for(lambda: all((tmp_path / n.name).exists() for n in nodes[:2]), 60)
            cl.kill_sshd("node02")  # the gateway dies mid-check, with its relay and its ssh
            wait_for(lambda: len(answers) == 2, 30, lambda: answers)
            got = dict(answers)
            assert got[2].error == "no gateway for this node (--gateways)"
            assert got[1].status == "unreachable"
            assert got[1].error.startswith("through gateway node02: connection lost")
            assert thread.is_alive()  # node01's node goes on
        finally:
            transport.close()
            thread.join(timeout=30)
    assert not thread.is_alive()
    assert dict(answers)[0].error == "interrupted: the run is stopping"
    for host in ("node01", "node03", "node04"):
        wait_for(lambda h=host: not leftovers(cl, h), 10, lambda h=host: (h, leftovers(cl, h)))
