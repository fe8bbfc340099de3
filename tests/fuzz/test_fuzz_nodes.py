"""Node specs and inventories: random input gives nodes or one NodeSpecError in one line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runbook.run.nodes import NodeSpecError, build_nodes, expand
from runbook.transports import Node

# Ranges of a few thousand hosts keep an example fast; `make fuzz` goes further.
_MAX_RANGE = 3_000 if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else 500


def _host_range() -> st.SearchStrategy[str]:
    number = st.integers(0, _MAX_RANGE)
    span = st.tuples(number, number, st.booleans()).map(
        lambda t: f"{t[0]:0{len(str(t[1])) if t[2] else 1}d}-{t[1]}")
    return st.lists(st.one_of(span, number.map(str)), min_size=1, max_size=3).map(
        lambda parts: "[" + ",".join(parts) + "]")


def _spec_part() -> st.SearchStrategy[str]:
    name = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._", min_size=1, max_size=10)
    return st.one_of(
        name, st.sampled_from(["localhost", "@/nonexistent/hosts", "@", "[", "]", "[]", "a[", "a]b",
                               "a[1-", "a[-1]", "a[9-1]", "a[1-2,,3]", "a[x-y]", "a[1-2][3-4]", "::1",
                               "user@host", "host:22", " ", "\t", "\x00", "中文", "a" * 300]),
        st.tuples(name, _host_range(), st.text(alphabet="abc-", max_size=3)).map("".join),
        st.text(max_size=20))


SPECS = st.lists(_spec_part(), min_size=1, max_size=5).map(",".join) | st.text(max_size=60)


def _build(spec: str | None, inventory: str | None = None, group: str | None = None) -> list[Node]:
    return build_nodes(spec, inventory, group)


def _check_nodes(nodes: list[Node]) -> None:
    assert nodes
    assert len({n.name for n in nodes}) == len(nodes), "a host named twice"
    for node in nodes:
        assert isinstance(node, Node) and node.name
        assert node.transport in ("local", "ssh")


@settings(max_examples=settings.default.max_examples * 8)
@given(spec=SPECS)
def test_random_node_specs(spec: str, time_limit: Any) -> None:
    with time_limit(20, f"--nodes {spec[:200]!r}"):
        try:
            nodes = _build(spec)
        except NodeSpecError as exc:
            assert str(exc) and "\n" not in str(exc), repr(str(exc))
            return
    if spec == "":  # no spec names nothing: the CLI then runs on this machine
        assert nodes == []
        return
    _check_nodes(nodes)


_INVENTORY_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 70000) | st.text(max_size=12)
    | st.sampled_from(["gpu[01:04]", "gpu[a:f]", "gpu[1:3:0]", "gpu[9:1]", "h[1-4]", "[", "all", "hosts"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["hosts", "groups", "vars", "all", "children", "ansible_host", "port", "gpu[1-2]",
                         "trainers", "x"]) | st.text(max_size=6), inner, max_size=4),
    max_leaves=15)


def _ini_inventory() -> st.SearchStrategy[str]:
    line = st.one_of(st.sampled_from(["[trainers]", "[trainers:vars]", "[all:children]", "[bad", "[]",
                                      "gpu[01:04] ansible_user=x", "gpu[1:2:0]", "h ansible_port=22",
                                      "h novalue", "trainers", "; comment", "# comment", "x=1", "[a:b:c]"]),
                     st.text(max_size=30))
    return st.lists(line, max_size=12).map("\n".join)


@settings(max_examples=settings.default.max_examples * 4)
@given(doc=st.one_of(_INVENTORY_VALUES.map(repr), _ini_inventory(), st.text(max_size=200)),
       suffix=st.sampled_from([".yaml", ".ini", ""]),
       group=st.none() | st.sampled_from(["trainers", "all", "x"]))
def test_random_inventories(doc: str, suffix: str, group: str | None, tmp_path: Path,
                            time_limit: Any) -> None:
    """Our YAML, Ansible YAML and INI: nodes or one NodeSpecError naming the file."""
    path = tmp_path / f"inventory{suffix}"
    path.write_text(doc, encoding="utf-8")
    with time_limit(20, f"inventory {doc[:200]!r}"):
        try:
            nodes = _build(None, str(path), group)
        except NodeSpecError as exc:
            assert str(exc) and "\n" not in str(exc), repr(str(exc))
            return
    _check_nodes(nodes)


@settings(max_examples=settings.default.max_examples * 2)
@given(lines=st.lists(st.one_of(st.sampled_from(["gpu001 slots=8", "gpu002", "# c", "", "h slots", "h 8",
                                                  "h slots=8 max=2", "\x00"]), st.text(max_size=20)),
                      max_size=10))
def test_random_hostfiles(lines: list[str], tmp_path: Path, time_limit: Any) -> None:
    path = tmp_path / "hosts.txt"
    path.write_text("\n".join(lines), encoding="utf-8")
    with time_limit(20, "a hostfile"):
        try:
            nodes = _build(f"@{path}")
        except NodeSpecError as exc:
            assert str(exc) and "\n" not in str(exc), repr(str(exc))
            return
    _check_nodes(nodes)


def test_a_cluster_sized_hostlist_expands_quickly(time_limit: Any) -> None:
    with time_limit(1, "--nodes gpu[1-20000]"):  # linear, it takes milliseconds
        assert len(expand("gpu[1-20000]")) == 20_000


@pytest.mark.parametrize("doc", [
    "hosts: x", "vars: 1", "vars: [a]", "hosts: {a: x}", 'hosts: {"a[": null}', "all: [1]",
    "all: {hosts: x}", 'all: {hosts: {"gpu[1:3:0]": null}}', 'all: {hosts: {"gpu[ab:cd]": null}}',
    "all: {vars: x}",
])
def test_inventories_of_the_wrong_shape_get_one_line_errors(doc: str, tmp_path: Path) -> None:
    """Each was a traceback once: a string where a mapping belongs, a step of 0, letters."""
    path = tmp_path / "inventory.yaml"
    path.write_text(doc + "\n", encoding="utf-8")
    with pytest.raises(NodeSpecError) as caught:
        build_nodes(None, str(path), None)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_a_hostfile_path_with_a_nul_byte() -> None:
    with pytest.raises(NodeSpecError):
        build_nodes("@hosts\x00.txt")


def test_a_file_name_with_a_newline_is_one_line() -> None:
    with pytest.raises(NodeSpecError) as caught:
        build_nodes("@no\nsuch-file")
    assert "\n" not in str(caught.value)
