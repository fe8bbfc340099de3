"""Checks sent in batches: the transports' batch API (`run_many`), the walk's check pool, and
decisions shared only between nodes that see the same values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from queue import SimpleQueue
from typing import Any

import pytest

from runbook.run.dispatch import CheckPool
from runbook.run.walk import CONCLUDED, ERROR, Walk, WalkOptions
from runbook.testing.runner import ReplayTransport
from runbook.transports import Node, ProbeAnswer, run_many
from tests.run.test_walk import TREE, library_with


class Echo:
    """Answers each node with its own name; `broken` nodes make run_check raise."""

    def __init__(self, broken: frozenset[str] = frozenset()) -> None:
        self.broken = broken
        self.requests: list[dict[str, Any]] = []

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        self.requests.append(request)
        if node.name in self.broken:
            raise RuntimeError("the transport broke")
        request["with"]["changed"] = True  # a check may change its own copy of the parameters
        return ProbeAnswer("ok", {"name": node.name})

    def close(self) -> None:
        pass


def test_run_many_answers_every_node_once_from_run_check() -> None:
    nodes = [Node(f"n{i}") for i in range(50)]
    transport = Echo(frozenset({"n7"}))
    request = {"check": "log", "with": {"path": "/x"}}
    answers = dict(run_many(transport, nodes, request, 5.0, threads=4))
    assert sorted(answers) == list(range(50))
    assert answers[3].result == {"name": "n3"}
    assert answers[7].status == "error" and "the transport broke" in (answers[7].error or "")
    assert request == {"check": "log", "with": {"path": "/x"}}, "each check gets its own copy"


class Batching:
    """A transport that answers a whole group itself, leaving out the nodes named in `silent`."""

    def __init__(self, results: dict[str, Any], silent: frozenset[str] = frozenset()) -> None:
        self.replay = ReplayTransport(results)
        self.silent = silent
        self.batches: list[int] = []

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        raise AssertionError("a batching transport is asked in batches")

    def run_many(self, nodes: list[Node], request: dict[str, Any],
                 timeout: float) -> Iterator[tuple[int, ProbeAnswer]]:
        self.batches.append(len(nodes))
        for i, node in reversed(list(enumerate(nodes))):  # in any order
            if node.name not in self.silent:
                yield i, self.replay.run_check(node, request, timeout)

    def close(self) -> None:
        pass


def test_the_pool_sends_a_batching_transport_one_call_per_group() -> None:
    pool = CheckPool(4)
    landed: SimpleQueue[tuple[int, ProbeAnswer]] = SimpleQueue()
    results = {f"n{i}": {"age": {"age_s": i}} for i in range(6)}
    transport = Batching(results, silent=frozenset({"n2"}))
    nodes = [Node(name) for name in results]
    pool.send(transport, nodes, {"check": "log", "with": {}, "step": "age"}, 5.0, [10 + i for i in range(6)],
              landed)
    answers = dict(landed.get(timeout=10) for _ in range(6))
    pool.close()
    assert transport.batches == [6]
    assert (answers[13].result or {})["age_s"] == 3
    assert answers[12].status == "error" and "no answer" in (answers[12].error or "")


def test_a_walk_over_a_batching_transport_decides_as_node_by_node(tmp_path: Path) -> None:
    library = library_with(tmp_path)
    results = {f"n{i:02d}": {"age": {"age_s": 1}} for i in range(20)}
    results["n05"] = {"age": {"age_s": 900}}
    batching = Batching(results)
    outcomes = {o.node.name: o for o in Walk(library, library.get("t"), [Node(n) for n in results], batching,
                                             {}, WalkOptions(deadline_s=30)).run()}
    alone = {o.node.name: o for o in Walk(library, library.get("t"), [Node(n) for n in results],
                                          ReplayTransport(results), {}, WalkOptions(forks=2)).run()}
    assert batching.batches == [20], "one request for the nodes at the same step"
    assert {n: (o.status, o.conclusion.id) for n, o in outcomes.items()} == {
        n: (o.status, o.conclusion.id) for n, o in alone.items()}
    assert outcomes["n05"].conclusion.id == "straggler"


def test_a_transport_that_raises_fails_only_its_node(tmp_path: Path) -> None:
    library = library_with(tmp_path)

    class Raising(ReplayTransport):
        def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
            if node.name == "bad":
                raise OSError("socket closed")
            return super().run_check(node, request, timeout)

    results = {"good": {"age": {"age_s": 1}}, "bad": {"age": {"age_s": 1}}}
    outcomes = {o.node.name: o for o in Walk(library, library.get("t"), [Node(n) for n in results],
                                             Raising(results), {}).run()}
    assert outcomes["good"].status == CONCLUDED
    assert outcomes["bad"].status == ERROR and "socket closed" in (outcomes["bad"].reason or "")


def test_nodes_with_their_own_parameters_never_share_a_decision(tmp_path: Path) -> None:
    """Same answers, same history: a node whose own `params.limit` differs decides for itself."""
    condition = (">-\n          result.age_s > params.limit\n"
                 "          and result.age_s > 10 * (cluster | field('age_s') | median)")
    assert condition in TREE
    library = library_with(tmp_path, TREE.replace(condition, "result.age_s > params.limit"))
    results = {f"n{i}": {"age": {"age_s": 100}} for i in range(8)}
    nodes = [Node(name) for name in results]
    nodes[3].vars["params"] = {"limit": 1000}
    outcomes = {o.node.name: o for o in Walk(library, library.get("t"), nodes, ReplayTransport(results),
                                             {"limit": 10}).run()}
    assert {n: o.conclusion.id for n, o in outcomes.items() if n != "n3"} == {
        n: "straggler" for n in results if n != "n3"}
    assert outcomes["n3"].conclusion.id == "fine"
    assert outcomes["n3"].evidence[0].decided_by["params.limit"] == 1000


GROUPS: list[list[str]] = []  # the groups Grouped was asked, in this module as imported by name


class Grouped:
    """A transport made by name (as `--executor` makes one) that answers whole groups."""

    def __init__(self, **_: Any) -> None:
        pass

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        raise AssertionError("a batching transport is asked in batches")

    def run_many(self, nodes: list[Node], request: dict[str, Any],
                 timeout: float) -> Iterator[tuple[int, ProbeAnswer]]:
        GROUPS.append([node.name for node in nodes])
        for i in range(len(nodes)):
            yield i, ProbeAnswer("ok", {"age_s": 1})

    def close(self) -> None:
        pass


def test_node_transports_hand_a_group_to_its_batching_transport(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Through NodeTransports (what `runbook run` walks over), the nodes of one batching transport
    are sent as one group; nodes of another transport are asked node by node beside them."""
    import importlib

    from runbook import transports

    monkeypatch.setitem(transports.TRANSPORTS, "grouped", "tests.run.test_dispatch:Grouped")
    module = importlib.import_module("tests.run.test_dispatch")
    module.GROUPS.clear()
    library = library_with(tmp_path)
    nodes = [Node(f"g{i}", "grouped") for i in range(5)] + [Node("alone", "missing-transport")]
    monkeypatch.setitem(transports.TRANSPORTS, "missing-transport", "tests.run.no_such_module:Nothing")
    routed = transports.NodeTransports()
    outcomes = {o.node.name: o for o in Walk(library, library.get("t"), nodes, routed, {}).run()}
    routed.close()
    assert [[f"g{i}" for i in range(5)]] == module.GROUPS
    assert all(outcomes[f"g{i}"].status == CONCLUDED for i in range(5))
    assert outcomes["alone"].status == ERROR and "no_such_module" in (outcomes["alone"].reason or "")


def test_the_pool_starts_no_more_threads_than_checks_in_flight() -> None:
    """One node walked through many rounds uses one thread, not one more per round: an idle
    thread's stack is address space, the first thing a tight RLIMIT_AS runs out of."""
    pool = CheckPool(64)
    transport = Echo()
    for round_no in range(10):
        landed: SimpleQueue[tuple[int, ProbeAnswer]] = SimpleQueue()
        pool.send(transport, [Node("n1")], {"check": "log", "with": {}}, 5.0, [round_no], landed)
        tag, answer = landed.get(timeout=10)
        assert (tag, answer.status) == (round_no, "ok")
    assert len(pool._threads) == 1
    pool.send(transport, [Node(f"m{i}") for i in range(5)], {"check": "log", "with": {}}, 5.0,
              list(range(5)), landed := SimpleQueue())
    assert sorted(landed.get(timeout=10)[0] for _ in range(5)) == list(range(5))
    assert len(pool._threads) <= 6
    pool.close()
