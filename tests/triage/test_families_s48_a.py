"""Message families of session 48 (a). nccl-errors: UCX's report of a fatal signal it caught
(openucx/ucx src/ucs/debug/debug.c ucs_debug_handle_error_signal, `Caught signal %d (%s: %s%s)` with
strsignal and ucs_signal_cause_bus) for SIGBUS with BUS_ADRERR, `Caught signal 7 (Bus error: nonexistent
physical address)`: a write to a shared-memory page its tmpfs cannot back, /dev/shm too small, in a
process where UCX (HPC-X's NCCL net plugin, UCC, MPI) owns the error signals. Messages of the family read
to their conclusion, and near misses in similar words (another signal, another si_code) that must read
otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion)
CASES = [
    ("ucx-sigbus-adrerr",
     "[gpu-node-07:118842:0:118990] Caught signal 7 (Bus error: nonexistent physical address)\n"
     "==== backtrace (tid: 118990) ====\n"
     " 0 0x0000000000042520 __sigaction()  ???:0\n"
     " 1 0x00000000000a8c3e __memmove_avx_unaligned_erms()  ???:0\n"
     " 2 0x0000000000071a2b ncclProxyProgress()  ???:0\n"
     "=================================",
     "nccl-errors:shm-too-small"),
    ("ucx-sigbus-adrerr",
     "(RayWorkerWrapper pid=5121) [worker-3:5121:0:5388] Caught signal 7 (Bus error: nonexistent physical "
     "address)\n"
     "(RayWorkerWrapper pid=5121) ==== backtrace (tid:   5388) ====\n"
     "(RayWorkerWrapper pid=5121)  0 0x000000000003c050 killpg()  ???:0",
     "nccl-errors:shm-too-small"),
    ("ucx-sigbus-adrerr",
     "[1718012345.118842] [trainer-0:2211 :0:2290] Caught signal 7 (Bus error: nonexistent physical "
     "address)\n"
     "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -7) local_rank: 1 (pid: 2211)",
     "nccl-errors:shm-too-small"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    assert_first(text, family, conclusion)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # a misaligned access is a bug of the code, not a shared-memory page without backing
    ("ucx-sigbus-adrerr",
     "[gpu-node-07:118842:0:118990] Caught signal 7 (Bus error: invalid address alignment)\n"
     "==== backtrace (tid: 118990) ====",
     "nccl-errors:shm-too-small", None),
    # BUS_OBJERR: the hardware's error, not /dev/shm
    ("ucx-sigbus-adrerr",
     "[gpu-node-07:118842:0:118990] Caught signal 7 (Bus error: object-specific hardware error)",
     "nccl-errors:shm-too-small", None),
    # UCX's segfault report is the rank's own native crash
    ("ucx-sigbus-adrerr",
     "[gpu-node-07:118842:0:118990] Caught signal 11 (Segmentation fault: address not mapped to object at "
     "address 0x7f3a00000000)\n"
     "==== backtrace (tid: 118990) ====",
     "nccl-errors:shm-too-small", "ddp-errors:rank-native-crash"),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-near-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
