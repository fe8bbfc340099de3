"""cuda_oom: PyTorch's CUDA OOM messages, on verbatim lines from public threads (data/cuda_oom.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from runbook.checks.facts import cuda_oom

CASES = yaml.safe_load((Path(__file__).parent / "data" / "cuda_oom.yaml").read_text(encoding="utf-8"))
FIELDS = {
    "count", "kind", "requested_mib", "gpu", "total_mib", "free_mib", "this_process_mib",
    "other_processes", "other_processes_count", "other_processes_mib", "allocated_by_pytorch_mib",
    "reserved_unallocated_mib", "already_allocated_mib", "reserved_total_mib",
    "self_listed_as_other", "held_by_others", "caused_by_others",
}


def lines_of(case_id: str) -> list[str]:
    return next(c for c in CASES if c["id"] == case_id)["lines"].splitlines()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_verbatim_lines_give_exact_facts(case: dict[str, Any]) -> None:
    facts = cuda_oom.parse(case["lines"].splitlines())
    assert facts is not None
    assert set(facts) == FIELDS
    assert {k: facts[k] for k in case["expected"]} == case["expected"]


def test_no_oom_message_gives_none() -> None:
    assert cuda_oom.parse([]) is None
    assert cuda_oom.parse(["NCCL WARN Cuda failure 'out of memory'", "Killed: out of memory"]) is None


def test_numbers_come_from_the_last_allocator_message_and_count_covers_all() -> None:
    # Constructed: two verbatim threads' lines put one after the other, the driver's error last.
    lines = lines_of("old-format-reserved-in-total") + lines_of("driver-cuda-error")
    facts = cuda_oom.parse(lines)
    assert facts is not None
    assert (facts["count"], facts["kind"], facts["requested_mib"]) == (2, "cuda-error", 16.0)
    lines = lines_of("old-format-reserved-in-total") + lines_of("new-format-held-by-another-process")
    facts = cuda_oom.parse(lines)
    assert facts is not None
    assert (facts["count"], facts["requested_mib"], facts["reserved_total_mib"]) == (2, 115599.36, None)


@pytest.mark.parametrize(("others", "held"), [
    ("Process 7 has 1023.00 MiB memory in use.", False),  # under 1024 MiB
    ("Process 7 has 1.00 GiB memory in use.", True),  # 1024 MiB and 12.5% of 8 GiB
    ("Process 7 has 700.00 MiB memory in use. Process 8 has 324.00 MiB memory in use.", True),  # summed
])
def test_held_by_others_threshold(others: str, held: bool) -> None:
    # Constructed from the 2.1 format to test the rule's edges; not a line from a thread.
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
            f"capacity of 8.00 GiB of which 0 bytes is free. {others} Including non-PyTorch memory, this "
            "process has 6.00 GiB memory in use. Of the allocated memory 5.00 GiB is allocated by PyTorch, "
            "and 100.00 MiB is reserved by PyTorch but unallocated.")
    facts = cuda_oom.parse([line])
    assert facts is not None
    assert facts["held_by_others"] is held
    assert facts["self_listed_as_other"] is False


def test_one_listed_process_far_above_pytorch_is_not_self() -> None:
    # Constructed: no "this process has", one process holding 10 GiB while PyTorch holds 1 GiB.
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
            "capacity of 16.00 GiB of which 0 bytes is free. Process 99 has 10.00 GiB memory in use. Of the "
            "allocated memory 1.00 GiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but "
            "unallocated.")
    facts = cuda_oom.parse([line])
    assert facts is not None
    assert (facts["self_listed_as_other"], facts["held_by_others"]) == (False, None)


def test_others_caused_the_oom_only_when_the_request_would_have_fit_without_them() -> None:
    # https://github.com/lianqi1008/Control-GIC/issues/6: another process holds 11.29 GiB, but the
    # job asked for 112.89 GiB of a 79.14 GiB GPU: no other process is to blame.
    big = cuda_oom.parse(lines_of("new-format-held-by-another-process"))
    assert big is not None and big["held_by_others"] is True and big["caused_by_others"] is False
    # Constructed from the 2.1 format: 1 GiB asked, 0 free, 2 GiB held by another process.
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
            "capacity of 8.00 GiB of which 0 bytes is free. Process 7 has 2.00 GiB memory in use. "
            "Including non-PyTorch memory, this process has 6.00 GiB memory in use.")
    small = cuda_oom.parse([line])
    assert small is not None and small["caused_by_others"] is True
