"""Session 46: pastes whose only evidence is that a process failed. torchrun's failure summary
(elastic/multiprocessing/errors/__init__.py: `exitcode  : 1 (pid: P)` under `Root Cause (first observed
failure)`) says a rank exited with an error whose traceback is in its own output: a rank that failed
first, not a stall of a live process. A resemblance never names a conclusion a signature already named.
A rank that Horovod's stall inspector lists (`6: [horovod_allreduce.0, ...]`) is no srun label."""

from __future__ import annotations

import pytest

from runbook.library.runbooks import load_library
from runbook.triage.lognorm import normalize
from runbook.triage.result import triage_text
from tests.triage.families import assert_first, assert_near_miss


def _summary(exitcode: int, rank: int = 0) -> str:
    return "\n".join([
        "------------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        f"[{rank}]:",
        "  time      : 2025-02-03_04:05:06",
        "  host      : worker-3",
        f"  rank      : {rank} (local_rank: {rank})",
        f"  exitcode  : {exitcode} (pid: 81234)",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "============================================================",
    ])


def test_a_failure_summary_with_an_exit_code_is_a_rank_that_failed_first() -> None:
    assert_first(_summary(1), "torchrun-summary", "ddp-errors:rank-failed-first", "knock-on")
    assert_first(_summary(2, rank=5), "torchrun-summary", "ddp-errors:rank-failed-first", "knock-on")


def test_a_summary_of_a_rank_killed_by_sigkill_stays_a_kill_from_outside() -> None:
    assert_near_miss(_summary(-9), "torchrun-summary", "ddp-errors:rank-failed-first",
                     first="host-faults:killed-likely-oom")


def test_a_summary_of_a_segfault_stays_a_native_crash() -> None:
    assert_near_miss(_summary(-11), "torchrun-summary", "ddp-errors:rank-failed-first",
                     first="ddp-errors:rank-native-crash")


def test_a_resemblance_never_repeats_a_conclusion_already_named() -> None:
    """The knock-on's own conclusion is not offered again as a similar error line's."""
    result = triage_text(load_library(), None, _summary(1) + "\n", "torchrun-summary")
    named = [(m.runbook, m.conclusion) for m in result.matches]
    assert len(named) == len(set(named)), named


_STALL = ("[1,0]<stderr>:[2019-10-09 15:36:43.594972: W horovod/common/stall_inspector.cc:105] One or "
          "more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are "
          "waiting for remainder of ranks for more than 60 seconds. This may indicate that different ranks "
          "are trying to submit different tensors or that only subset of ranks is submitting tensors, which "
          "will cause deadlock.")


@pytest.mark.parametrize("listed", [
    "[1,0]<stderr>:Stalled ranks:\n[1,0]<stderr>:3: [horovod_allreduce.0, horovod_allreduce.1, "
    "horovod_allreduce.10 ...]",
    "Missing ranks:\n12: [DistributedAdam_Allreduce/cond_12/HorovodAllreduce_grads_12_0]",
])
def test_a_rank_the_stall_inspector_lists_is_the_rank_that_stopped_first(listed: str) -> None:
    """stall_inspector.cc lists each missing rank as `N: [tensors]`; the number is no srun label."""
    assert_first(_STALL + "\n" + listed, "horovod", "ddp-errors:rank-stopped-first")


@pytest.mark.parametrize(("line", "expected"), [
    ("3: [rank3]: RuntimeError: x", "RuntimeError: x"),  # srun's label before torch's prefix
    ("0: [2024-05-01 12:00:00,123] INFO loading", "INFO loading"),
    ("6: [horovod_allreduce.0, horovod_allreduce.1 ...]",) * 2,
    ("3: [0.25, 0.5, 0.75]", "[0.25, 0.5, 0.75]"),  # a list of numbers a rank printed: the label goes
])
def test_srun_labels_are_stripped_but_not_a_stalled_ranks_number(line: str, expected: str) -> None:
    assert normalize(line) == expected


def test_a_lost_keep_alive_heartbeat_is_a_node_that_failed_mid_job() -> None:
    line = ("WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'gpu07_3311_0' has "
            "failed to send a keep-alive heartbeat to the rendezvous 'job-42' due to an error of type "
            "RendezvousConnectionError.")
    assert_first("\n".join([line] * 3), "keep-alive", "ddp-errors:rank-failed-first", "knock-on")


def test_the_agent_giving_up_on_an_unanswered_store_stays_master_unreachable() -> None:
    assert_first("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the "
                 "C10d store has failed. See inner exception for details.", "agent",
                 "ddp-errors:master-unreachable")
