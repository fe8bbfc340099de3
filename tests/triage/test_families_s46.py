"""Session 46: pastes whose only evidence is that a process failed. torchrun's failure summary
(elastic/multiprocessing/errors/__init__.py: `exitcode  : 1 (pid: P)` under `Root Cause (first observed
failure)`) says a rank exited with an error whose traceback is in its own output: a rank that failed
first, not a stall of a live process. A resemblance never names a conclusion a signature already named."""

from __future__ import annotations

from runbook.library.runbooks import load_library
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
