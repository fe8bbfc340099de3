"""watchdog: PyTorch's NCCL watchdog timeouts, on verbatim lines from public threads (data/watchdog.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from runbook.checks.facts import watchdog

CASES = yaml.safe_load((Path(__file__).parent / "data" / "watchdog.yaml").read_text(encoding="utf-8"))
FIELDS = {"count", "timeouts", "progress", "ranks", "ops", "seqs", "lowest_seq", "ranks_disagree_on_seq",
          "behind_ranks", "ranks_in_different_collectives", "waits_in_first_collectives"}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_verbatim_lines_give_exact_facts(case: dict[str, Any]) -> None:
    facts = watchdog.parse(case["lines"].splitlines())
    assert facts is not None
    assert set(facts) == FIELDS
    assert {k: facts[k] for k in case["expected"]} == case["expected"]


def test_no_timeout_gives_none() -> None:
    assert watchdog.parse([]) is None
    assert watchdog.parse(["[rank0]:[E ProcessGroupNCCL.cpp:577] [Rank 0] Some NCCL operations have failed "
                           "or timed out."]) is None


def test_the_rank_with_the_lowest_last_completed_work_is_behind() -> None:
    # Constructed in torch 2.4's format (see data/watchdog.yaml for verbatim ones): rank 2 of group 1
    # completed less than ranks 0 and 1.
    lines = [
        f"[rank{r}]:[E1206 18:44:12.715588844 ProcessGroupNCCL.cpp:1664] [PG 1 Rank {r}] Exception (either "
        f"an error or timeout) detected by watchdog at work: {w}, last enqueued NCCL work: {w}, last "
        f"completed NCCL work: {w - 1}."
        for r, w in ((0, 101), (1, 101), (2, 100))
    ]
    facts = watchdog.parse(lines)
    assert facts is not None
    assert facts["behind_ranks"] == [2]
    assert facts["count"] == 0


def _caught(rank: int, seq: int, op: str, pg: str = "", numel: int = 1) -> str:
    return (f"[rank{rank}]:[E ProcessGroupNCCL.cpp:616] {pg}[Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
            "Timeout(ms)=600000) ran for 600015 milliseconds before timing out.")


def test_ranks_waiting_in_different_collectives() -> None:
    differ = watchdog.parse([_caught(0, 315, "ALLREDUCE"), _caught(1, 313, "_ALLGATHER_BASE")])
    assert differ["ranks_in_different_collectives"] is True
    late = watchdog.parse([_caught(0, 1517, "ALLREDUCE"), _caught(1, 1516, "ALLREDUCE")])  # one rank late
    assert late["ranks_disagree_on_seq"] and late["ranks_in_different_collectives"] is False
    same = watchdog.parse([_caught(0, 40, "ALLREDUCE"), _caught(1, 40, "ALLREDUCE")])
    assert same["ranks_in_different_collectives"] is False
    groups = watchdog.parse([_caught(0, 315, "ALLREDUCE", "[PG 0 Rank 0] "),
                             _caught(1, 12, "BROADCAST", "[PG 3 Rank 0] ")])  # two groups' own sequences
    assert groups["ranks_in_different_collectives"] is False


def test_waits_in_the_first_collectives() -> None:
    # nanotron#204 as pasted: ranks 2 and 3 in the barrier's one-element ALLREDUCE #3 while rank 0 tokenises
    setup = watchdog.parse([_caught(2, 3, "ALLREDUCE"), _caught(3, 3, "ALLREDUCE")])
    assert setup["waits_in_first_collectives"] is True
    assert watchdog.parse([_caught(1, 1, "BROADCAST")])["waits_in_first_collectives"] is True
    # a training step's one-element all-reduce (a loss), a model broadcast at init, or one of each
    assert watchdog.parse([_caught(0, 1517, "ALLREDUCE")])["waits_in_first_collectives"] is False
    model = watchdog.parse([_caught(0, 1, "BROADCAST", numel=778567680)])
    assert model["waits_in_first_collectives"] is False
    mixed = watchdog.parse([_caught(0, 2, "ALLREDUCE"), _caught(1, 2, "ALLREDUCE", numel=4096)])
    assert mixed["waits_in_first_collectives"] is False
    # torch before 2.1 gives no size: nothing to say
    old = ("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=1, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1802212 milliseconds "
           "before timing out.")
    assert watchdog.parse([old])["waits_in_first_collectives"] is False
