"""Message families of session 45 (b): torch.save's storage writer before the zip format (pytorch
torch/csrc/serialization.cpp doWrite, `write(): fd N failed with ` + strerror), and torch's DataLoader
worker killed by a signal (torch/csrc/DataLoader.cpp, `is killed by signal: ` + strsignal: SIGKILL's
`Killed` is a kill from outside and host memory, not /dev/shm; a segfault is neither). Two messages of
each family read to their conclusion, and near misses in similar words that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss, found

# (family, text, conclusion)
CASES = [
    ("torch-legacy-writer",
     '  File "/usr/lib/python3.6/site-packages/torch/serialization.py", line 297, in _save\n'
     "    serialized_storages[key]._write_file(f, _should_read_directly(f))\n"
     "RuntimeError: write(): fd 12 failed with No space left on device",
     "host-faults:checkpoint-storage-full"),
    ("torch-legacy-writer",
     "RuntimeError: write(): fd 7 failed with Disk quota exceeded",
     "host-faults:checkpoint-storage-full"),
    ("torch-legacy-writer",
     '  File "/opt/venv/lib/python3.7/site-packages/torch/serialization.py", line 143, in _with_file_like\n'
     "    return body(f)\n"
     "RuntimeError: write(): fd 41 failed with Input/output error",
     "host-faults:storage-errors"),
    ("dataloader-sigkill",
     '  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/_utils/signal_handling.py", line 66, '
     "in handler\n    _error_if_any_worker_fails()\n"
     "RuntimeError: DataLoader worker (pid 30712) is killed by signal: Killed. ",
     "host-faults:killed-likely-oom"),
    ("dataloader-sigkill",
     "[rank3]: RuntimeError: DataLoader worker (pid 118) is killed by signal: Killed.",
     "host-faults:killed-likely-oom"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    assert_first(text, family, conclusion)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # an I/O error of the writer is the storage's, not a full file system
    ("torch-legacy-writer",
     "RuntimeError: write(): fd 29 failed with Input/output error",
     "host-faults:checkpoint-storage-full", "host-faults:storage-errors"),
    # a worker's own segfault is a crash in the worker, not a kill from outside
    ("dataloader-sigkill",
     "RuntimeError: DataLoader worker (pid 4411) is killed by signal: Segmentation fault. ",
     "host-faults:killed-likely-oom", None),
    # SIGBUS stays /dev/shm
    ("dataloader-sigkill",
     "RuntimeError: DataLoader worker (pid 9002) is killed by signal: Bus error. It is possible that "
     "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
     "host-faults:killed-likely-oom", "cuda-oom:dataloader-shm-exhausted"),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)


@pytest.mark.parametrize("text", [c[1] for c in CASES if c[0] == "dataloader-sigkill"])
def test_a_sigkilled_worker_is_host_memory_not_shm(text: str) -> None:
    conclusions = [c for c, _ in found(text, "dataloader-sigkill")]
    assert "cuda-oom:host-memory-pressure" in conclusions[:3], conclusions
    assert "cuda-oom:dataloader-shm-exhausted" not in conclusions, conclusions


def test_a_segfaulted_worker_is_not_shm() -> None:
    text = "RuntimeError: DataLoader worker (pid 4411) is killed by signal: Segmentation fault. "
    causes = [c for c, r in found(text, "dataloader-sigkill") if r == "cause"]
    assert "cuda-oom:dataloader-shm-exhausted" not in causes, causes
