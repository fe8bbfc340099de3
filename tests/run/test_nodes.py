"""Node specs and inventories: what people paste from Slurm, MPI, DeepSpeed and Ansible."""

from __future__ import annotations

from pathlib import Path

import pytest

from runbook.run.nodes import NodeSpecError, build_nodes, expand, load_inventory


def test_slurm_hostlists_and_comma_lists() -> None:
    assert expand("gpu[001-003,070]") == ["gpu001", "gpu002", "gpu003", "gpu070"]
    assert expand("a[1-2]b[3-4]") == ["a1b3", "a1b4", "a2b3", "a2b4"]
    assert expand("x,y,gpu[1-2],x") == ["x", "y", "gpu1", "gpu2"]
    assert expand("127.0.0.[2-4]") == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


def test_hostfiles_with_slots_and_comments(tmp_path: Path) -> None:
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("# DeepSpeed hostfile\nworker-1 slots=8\n\nworker-2 slots=8  # spare\n")
    assert expand(f"@{hostfile},extra") == ["worker-1", "worker-2", "extra"]
    hostfile.write_text("worker-1 slots=8\nworker-2 eight gpus\n")
    with pytest.raises(NodeSpecError, match=r"hostfile:2: expected 'host \[slots=N\]'"):
        expand(f"@{hostfile}")


def test_bad_specs_point_at_the_bad_part() -> None:
    with pytest.raises(NodeSpecError, match=r"bad host list 'gpu\[01-'"):
        expand("ok1,gpu[01-")
    with pytest.raises(NodeSpecError, match="names no host"):
        expand(" , ")


def test_localhost_is_local_and_others_are_ssh() -> None:
    nodes = build_nodes("localhost,gpu01")
    assert [(n.name, n.transport) for n in nodes] == [("localhost", "local"), ("gpu01", "ssh")]
    assert build_nodes("gpu01", executor="ray")[0].transport == "ray"


def test_our_inventory_with_groups_and_vars(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("""
vars: {user: train}
hosts:
  gpu[01-02]: {python: /opt/conda/bin/python, params: {log: /data/train.log}}
  login1: {host: 10.0.0.9}
groups:
  trainers: {hosts: ["gpu[01-02]"], vars: {port: 2222}}
""")
    everything = load_inventory(inv, None)
    assert sorted(everything) == ["gpu01", "gpu02", "login1"]
    assert everything["login1"] == {"user": "train", "host": "10.0.0.9"}
    trainers = build_nodes(None, str(inv), "trainers")
    assert [n.name for n in trainers] == ["gpu01", "gpu02"]
    assert trainers[0].vars == {"user": "train", "python": "/opt/conda/bin/python",
                                "params": {"log": "/data/train.log"}, "port": 2222}
    with pytest.raises(NodeSpecError, match="no group 'nope' \\(groups: trainers\\)"):
        load_inventory(inv, "nope")


def test_ansible_ini_inventory(tmp_path: Path) -> None:
    inv = tmp_path / "hosts.ini"
    inv.write_text("""
[trainers]
gpu[01:03] ansible_user=root
gpu09 ansible_host=10.1.0.9 ansible_port=2200 ansible_python_interpreter=/usr/bin/python3

[trainers:vars]
log=/data/train.log

[infra]
login1

[cluster:children]
trainers
""")
    trainers = load_inventory(inv, "trainers")
    assert list(trainers) == ["gpu01", "gpu02", "gpu03", "gpu09"]
    assert trainers["gpu09"] == {"host": "10.1.0.9", "port": 2200, "python": "/usr/bin/python3",
                                 "log": "/data/train.log"}
    assert sorted(load_inventory(inv, "cluster")) == ["gpu01", "gpu02", "gpu03", "gpu09"]
    assert "login1" in load_inventory(inv, None)


def test_ansible_yaml_inventory(tmp_path: Path) -> None:
    inv = tmp_path / "hosts.yaml"
    inv.write_text("""
all:
  vars: {ansible_user: ops}
  children:
    gpus:
      hosts:
        node[1:2]: {ansible_host: 10.2.0.1}
      vars: {ansible_python_interpreter: /venv/bin/python}
""")
    gpus = load_inventory(inv, "gpus")
    assert gpus == {"node1": {"user": "ops", "python": "/venv/bin/python", "host": "10.2.0.1"},
                    "node2": {"user": "ops", "python": "/venv/bin/python", "host": "10.2.0.1"}}
    assert load_inventory(inv, None) == gpus


def test_unreadable_inventories(tmp_path: Path) -> None:
    with pytest.raises(NodeSpecError, match="No such file"):
        load_inventory(tmp_path / "missing.yaml", None)
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: [unclosed\n")
    with pytest.raises(NodeSpecError, match=r"bad.yaml:2:1: YAML syntax error"):
        load_inventory(bad, None)


def test_a_hostile_inventory_is_one_line_not_gigabytes(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    bomb = tmp_path / "inventory.yaml"
    bomb.write_text("hosts:\n  node01: {}\n" + "\n".join(lines) + "\n")
    with pytest.raises(NodeSpecError, match=r"inventory.yaml:\d+:\d+: more than 100,000 values"):
        build_nodes(None, str(bomb))
    hostfile = tmp_path / "hosts"
    hostfile.write_bytes(b"node01\nnode02\x00\n")
    with pytest.raises(NodeSpecError, match=r"hosts:2: binary content"):
        build_nodes(f"@{hostfile}")
