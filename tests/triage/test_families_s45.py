"""Session 45: watchdog timeouts at the job's set-up. Ranks that time out only in one-element
collectives among their group's first (`WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, ...)`: a
barrier, or the count `broadcast_object_list` sends first) waited for a rank still busy before them
(tokenising the dataset in `main_process_first`, k-means, skipping batches on resume): the cause,
`training-hang:rank-busy-at-set-up`, not the knock-on a collective timeout otherwise is. Lines as torch
prints them (ProcessGroupNCCL.cpp's checkTimeout), and near misses: a training step's one-element
all-reduce, the model's broadcast at init, a timeout without sizes (torch before 2.1)."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss


def _caught(rank: int, seq: int, op: str, numel: int | None = 1, ms: int = 600000) -> str:
    sizes = f"NumelIn={numel}, NumelOut={numel}, " if numel is not None else ""
    return (f"[rank{rank}]:[E ProcessGroupNCCL.cpp:523] [Rank {rank}] Watchdog caught collective operation "
            f"timeout: WorkNCCL(SeqNum={seq}, OpType={op}, {sizes}Timeout(ms)={ms}) ran for {ms + 659} "
            "milliseconds before timing out.")


# (family, text, conclusion)
CASES = [
    ("set-up-barrier",
     "Grouping texts in chunks of 2049:   8%|▊         | 726000/9672101 [02:32<30:38, 4866.01 examples/s]\n"
     + _caught(2, 3, "ALLREDUCE") + "\n" + _caught(3, 3, "ALLREDUCE"),
     "training-hang:rank-busy-at-set-up"),
    ("set-up-broadcast",
     "\n".join(_caught(r, 1, "BROADCAST", ms=1800000) for r in (1, 2, 3)) + "\n"
     "[E ProcessGroupNCCL.cpp:489] Some NCCL operations have failed or timed out. Due to the asynchronous "
     "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
     "training-hang:rank-busy-at-set-up"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    assert_first(text, family, conclusion)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # a one-element all-reduce deep into training (a reduced loss): a stuck step, not the set-up
    ("set-up-barrier", _caught(0, 460631, "ALLREDUCE"),
     "training-hang:rank-busy-at-set-up", "training-hang:crashed-collective-timeout"),
    # the model's broadcast at engine init: every rank waits in it, the transport between GPUs is suspect
    ("set-up-broadcast", _caught(0, 1, "BROADCAST", numel=778567680) + "\n" + _caught(1, 1, "BROADCAST",
                                                                                      numel=778567680),
     "training-hang:rank-busy-at-set-up", "training-hang:crashed-collective-timeout"),
    # torch before 2.1 gives no size: nothing says it is a barrier
    ("set-up-no-size", _caught(1, 1, "BROADCAST", numel=None),
     "training-hang:rank-busy-at-set-up", "training-hang:crashed-collective-timeout"),
    # a rank that failed first is the cause, whatever the others waited in
    ("set-up-barrier",
     "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 79.15 GiB of which 1.12 GiB is free. Of the allocated memory 75.10 GiB is allocated by "
     "PyTorch, and 1.50 GiB is reserved by PyTorch but unallocated.\n" + _caught(1, 3, "ALLREDUCE"),
     "training-hang:rank-busy-at-set-up", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
