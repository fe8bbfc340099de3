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
    "self_listed_as_other", "held_by_others", "caused_by_others", "elsewhere_mib", "held_elsewhere",
    "caused_elsewhere",
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


@pytest.mark.parametrize(("case_id", "held"), [
    ("old-format-held-outside-pytorch", True),  # 22 GiB of 31.74 in use outside PyTorch
    ("old-format-reserved-in-total", False),  # 948 MiB: the CUDA context on a 4 GiB card
    ("old-format-gpu-1", False),
])
def test_memory_in_use_outside_the_process(case_id: str, held: bool) -> None:
    facts = cuda_oom.parse(lines_of(case_id))
    assert facts is not None
    assert facts["held_elsewhere"] is held
    assert facts["caused_elsewhere"] is held  # each request was small: it fits wherever it is held


def test_memory_elsewhere_counts_this_process_in_full_when_the_message_says_it() -> None:
    # Constructed from the 2.1 format: no process listed (a container cannot see the others), this
    # process has 4 GiB of a 16 GiB card, 0 free: 12 GiB is held by something the message cannot name.
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
            "capacity of 16.00 GiB of which 0 bytes is free. Including non-PyTorch memory, this process has "
            "4.00 GiB memory in use. Of the allocated memory 3.00 GiB is allocated by PyTorch, and 0 bytes "
            "is reserved by PyTorch but unallocated.")
    facts = cuda_oom.parse([line])
    assert facts is not None
    outside = (facts["elsewhere_mib"], facts["held_elsewhere"], facts["caused_elsewhere"])
    assert outside == (12288.0, True, True)
    # Two listed processes and no "this process has": which one is the job is unknown.
    two = line.replace("Including non-PyTorch memory, this process has 4.00 GiB memory in use.",
                       "Process 1 has 4.00 GiB memory in use. Process 2 has 12.00 GiB memory in use.")
    facts = cuda_oom.parse([two])
    assert facts is not None and (facts["elsewhere_mib"], facts["held_elsewhere"]) == (None, None)


def test_a_process_that_nvml_says_holds_nothing_holds_at_least_what_pytorch_holds() -> None:
    """torchtune#2071's message (https://github.com/meta-pytorch/torchtune/issues/2071): NVML saw
    none of the process's memory ("0 bytes"), yet PyTorch holds 22.6 GiB of the 23.4 in it: the
    GPU is full of the job's own tensors, not of someone else's."""
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
            "capacity of 23.43 GiB of which 206.00 MiB is free. Including non-PyTorch memory, this process "
            "has 0 bytes memory in use. Of the allocated memory 22.41 GiB is allocated by PyTorch, and "
            "206.31 MiB is reserved by PyTorch but unallocated.")
    facts = cuda_oom.parse([line])
    assert facts is not None and facts["this_process_mib"] == 0.0
    assert facts["elsewhere_mib"] < 1024 and facts["held_elsewhere"] is False
    # the same message with the process's memory printed is read as before
    seen = cuda_oom.parse([line.replace("has 0 bytes memory", "has 23.00 GiB memory")])
    assert seen is not None and seen["held_elsewhere"] is False
