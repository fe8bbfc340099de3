"""A walk pauses only full garbage collections, and gives the thresholds back however it ends."""

from __future__ import annotations

import gc
import threading

import pytest

from runbook.run import gcpause
from runbook.run.gcpause import full_collections_paused


def test_full_collections_are_paused_and_the_thresholds_restored() -> None:
    before = gc.get_threshold()
    with full_collections_paused():
        young, middle, oldest = gc.get_threshold()
        assert (young, middle) == before[:2]  # young collections go on as usual
        assert oldest > 10**6
    assert gc.get_threshold() == before


def test_nested_and_concurrent_pauses_restore_once_the_last_ends() -> None:
    before = gc.get_threshold()
    inner_done, outer_may_end = threading.Event(), threading.Event()

    def other_walk() -> None:
        with full_collections_paused():
            inner_done.set()
            outer_may_end.wait(5)

    with full_collections_paused():
        thread = threading.Thread(target=other_walk)
        thread.start()
        assert inner_done.wait(5)
    assert gc.get_threshold() != before  # the other walk still runs
    outer_may_end.set()
    thread.join(5)
    assert gc.get_threshold() == before
    assert gcpause._depth == 0


def test_an_error_in_the_walk_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    with pytest.raises(KeyboardInterrupt), full_collections_paused():
        raise KeyboardInterrupt
    assert gc.get_threshold() == before


def test_a_walk_runs_with_full_collections_paused() -> None:
    from runbook.library.runbooks import load_library
    from runbook.run.walk import Walk
    from runbook.testing.runner import ReplayTransport
    from runbook.transports import Node
    from tests.run.test_walk_memo import HEALTHY

    seen: list[tuple[int, int, int]] = []

    class Thresholds:
        def on_step(self, outcome: object, evidence: object) -> None:
            seen.append(gc.get_threshold())

        def on_node_done(self, outcome: object) -> None:
            pass

    before = gc.get_threshold()
    library = load_library()
    Walk(library, library.get("training-hang"), [Node("n1"), Node("n2")],
         ReplayTransport({"n1": HEALTHY, "n2": HEALTHY}), {"log": "/var/log/train.log"},
         listeners=[Thresholds()]).run()
    assert seen and all(t[2] > 10**6 for t in seen)
    assert gc.get_threshold() == before
