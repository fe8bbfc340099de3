"""`network` against this machine's /sys, real sockets and processes, and fake /sys trees."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runbook.checks.host import network

KEYS = {"name", "operstate", "admin_up", "carrier", "speed_mbps", "mtu", "physical"}


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP socket listening on 127.0.0.1 (an ephemeral port), held by this test process."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield sock
    finally:
        sock.close()


def closed_port() -> int:
    """A port nothing listens on: bound once to get it, then released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def no_master_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}


# -- this machine ---------------------------------------------------------------------------------


def test_this_machines_interfaces(make_ctx) -> None:
    result = network.run({}, make_ctx(env=no_master_env()))
    names = [i["name"] for i in result["interfaces"]]
    assert names == sorted(set(os.listdir("/sys/class/net")) - {"lo"})
    for iface in result["interfaces"]:
        assert set(iface) == KEYS
        assert iface["physical"] == os.path.exists(f"/sys/class/net/{iface['name']}/device")
        assert isinstance(iface["mtu"], int) and iface["mtu"] > 0
    # Virtual interfaces (bridges, ifb, veth) never count as down links.
    virtual = {i["name"] for i in result["interfaces"] if not i["physical"]}
    assert not virtual & set(result["down"])
    assert result["missing_ifaces"] == []
    assert result["port_bound"] is None
    assert result["master"]["reachable"] is None
    if not os.path.isdir("/sys/class/infiniband"):
        assert result["infiniband"] == [] and result["ib_down"] == []


def test_named_interfaces(make_ctx) -> None:
    result = network.run({"ifaces": ["lo", "ib9"]}, make_ctx())
    [lo] = result["interfaces"]
    assert lo["name"] == "lo" and lo["mtu"] == 65536 and lo["physical"] is False
    assert lo["speed_mbps"] is None  # reading speed fails on lo: not reported
    assert result["missing_ifaces"] == ["ib9"]
    assert result["down"] == []


# -- a fake /sys: an 8-rail InfiniBand node with one port down ---------------------------------


def put(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def fake_sys(root: Path) -> Path:
    net = "class/net"
    for name, flags, oper, carrier, speed in (
        ("eth0", "0x1003", "up", "1", "25000"),        # the front-end NIC
        ("ibp26s0", "0x1003", "up", "1", "400000"),    # IPoIB on a healthy rail
        ("ibp60s0", "0x1003", "down", None, None),     # configured up, no link: a fault
        ("eno2", "0x1002", "down", None, None),        # an unused port, configured down
        ("docker0", "0x1003", "down", "0", None),      # a bridge without containers
    ):
        put(root, f"{net}/{name}/flags", flags)
        put(root, f"{net}/{name}/operstate", oper)
        put(root, f"{net}/{name}/mtu", "1500" if name != "ibp26s0" else "4092")
        if carrier is not None:
            put(root, f"{net}/{name}/carrier", carrier)
        if speed is not None:
            put(root, f"{net}/{name}/speed", speed)
        if name != "docker0":
            (root / net / name / "device").mkdir()
    ib = "class/infiniband"
    for device, state, phys, downed in (
        ("mlx5_0", "4: ACTIVE", "5: LinkUp", "0"),
        ("mlx5_1", "1: DOWN", "2: Polling", "3"),
        ("mlx5_10", "4: ACTIVE", "5: LinkUp", "0"),
    ):
        put(root, f"{ib}/{device}/ports/1/state", state)
        put(root, f"{ib}/{device}/ports/1/phys_state", phys)
        put(root, f"{ib}/{device}/ports/1/rate", "400 Gb/sec (4X NDR)")
        put(root, f"{ib}/{device}/ports/1/link_layer", "InfiniBand")
        put(root, f"{ib}/{device}/ports/1/counters/link_downed", downed)
    return root


def test_fake_sys_links_and_ib_ports(tmp_path: Path, make_ctx) -> None:
    root = fake_sys(tmp_path)
    result = network.run({"sys_root": str(root)}, make_ctx(env=no_master_env()))
    by_name = {i["name"]: i for i in result["interfaces"]}
    assert by_name["ibp26s0"] == {"name": "ibp26s0", "operstate": "up", "admin_up": True,
                                  "carrier": True, "speed_mbps": 400000, "mtu": 4092,
                                  "physical": True}
    assert by_name["ibp60s0"]["carrier"] is None and by_name["ibp60s0"]["speed_mbps"] is None
    assert result["down"] == ["ibp60s0"]  # not the unused eno2, not the bridge
    assert result["infiniband"][1] == {"device": "mlx5_1", "port": 1, "state": "1: DOWN",
                                       "phys_state": "2: Polling", "rate": "400 Gb/sec (4X NDR)",
                                       "link_layer": "InfiniBand", "link_downed": 3}
    assert [p["device"] for p in result["infiniband"]] == ["mlx5_0", "mlx5_1", "mlx5_10"]
    assert result["ib_down"] == ["mlx5_1/1"]
    # Asked for by name, a port configured down counts as down too.
    asked = network.run({"sys_root": str(root), "ifaces": ["eno2", "eth0"]}, make_ctx())
    assert [i["name"] for i in asked["interfaces"]] == ["eno2", "eth0"]
    assert asked["down"] == ["eno2"]


def test_no_sys_at_all(tmp_path: Path, make_ctx) -> None:
    result = network.run({"sys_root": str(tmp_path / "none")}, make_ctx(env=no_master_env()))
    assert result["interfaces"] == [] and result["infiniband"] == [] and result["down"] == []


# -- the master and a port -------------------------------------------------------------------------


def test_master_reachable(listener: socket.socket, make_ctx) -> None:
    port = listener.getsockname()[1]
    result = network.run({"master_addr": "127.0.0.1", "master_port": port}, make_ctx())
    master = result["master"]
    assert master["reachable"] is True and master["error"] is None
    assert master["addr"] == "127.0.0.1" and master["port"] == port and master["ip"] == "127.0.0.1"
    assert master["source"] == "params"
    assert 0 <= master["latency_ms"] < 1000


def test_master_refused(make_ctx) -> None:
    port = closed_port()
    master = network.run({"master_addr": "127.0.0.1", "master_port": str(port)},
                         make_ctx())["master"]
    assert master["reachable"] is False and master["latency_ms"] is None
    assert "refused" in master["error"].lower()


def test_master_from_the_training_process(listener: socket.socket, make_ctx) -> None:
    port = listener.getsockname()[1]
    env = {**no_master_env(), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    child = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); "
                              "time.sleep(30)"], env=env, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        result = network.run({"pid": child.pid}, make_ctx(env=no_master_env()))
    finally:
        child.kill()
        child.wait(timeout=5)
    assert result["master"]["source"] == "process"
    assert result["master"]["port"] == port and result["master"]["reachable"] is True


def test_master_from_the_probe_env(make_ctx) -> None:
    port = closed_port()
    env = {**no_master_env(), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    master = network.run({"pid": ""}, make_ctx(env=env))["master"]
    assert master["source"] == "probe_env" and master["port"] == port
    assert master["reachable"] is False


def test_no_master(make_ctx) -> None:
    master = network.run({}, make_ctx(env=no_master_env()))["master"]
    assert master == {"addr": None, "port": None, "source": None, "ip": None, "reachable": None,
                      "error": "no master address: give master_addr/master_port, pid, or set "
                               "MASTER_ADDR/PORT", "latency_ms": None}


def test_unknown_master_host(make_ctx) -> None:
    master = network.run({"master_addr": "no-such-host.invalid", "master_port": 29500},
                         make_ctx())["master"]
    assert master["reachable"] is False and master["error"]


def test_port_bound_by_this_process(listener: socket.socket, make_ctx) -> None:
    port = listener.getsockname()[1]
    bound = network.run({"port": port}, make_ctx())["port_bound"]
    assert bound["port"] == port and bound["bound"] is True
    assert bound["addresses"] == [f"127.0.0.1:{port}"]
    assert os.getpid() in bound["pids"]
    argv0 = Path("/proc/self/cmdline").read_bytes().split(b"\0")[0].decode()
    assert bound["cmdlines"][bound["pids"].index(os.getpid())].startswith(argv0)  # this test's own


def test_port_not_bound(make_ctx) -> None:
    port = closed_port()
    bound = network.run({"port": port}, make_ctx())["port_bound"]
    assert bound == {"port": port, "bound": False, "addresses": [], "pids": [], "cmdlines": []}


def test_hanging_dns_is_bounded(monkeypatch: pytest.MonkeyPatch, make_ctx) -> None:
    release = threading.Event()

    def slow_getaddrinfo(*args: object, **kwargs: object) -> list:
        release.wait(30)  # a resolver that never answers
        return []

    monkeypatch.setattr(socket, "getaddrinfo", slow_getaddrinfo)
    start = time.monotonic()
    try:
        master = network.run({"master_addr": "master-0.job.svc", "master_port": 29500,
                              "connect_timeout": 0.5}, make_ctx(5.0))["master"]
    finally:
        release.set()
    assert time.monotonic() - start < 2.0
    assert master["reachable"] is False
    assert master["error"] == "resolving master-0.job.svc did not answer within 0.5s (DNS)"
