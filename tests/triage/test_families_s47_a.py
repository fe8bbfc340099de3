"""Message families of session 47. extension-errors: pytest's report of an interrupted session
(_pytest/terminal.py `_report_keyboardinterrupt`, the crash location `PATH:LINE: KeyboardInterrupt`)
whose location is torch's FileBaton (torch/utils/file_baton.py): a CI timeout or a Ctrl-C caught the
process in the sleep loop of FileBaton.wait, waiting on the lock of a JIT extension build.
nccl-errors: PaddlePaddle's wrapper of a failed NCCL call when errno is EAGAIN (a system error) or
ENOSPC (its /dev/shm segment did not fit): paddle/fluid/platform/enforce.h `Nccl error, %s, detail: %s`
and phi/core/enforce.h `NCCL error(%d), %s.  Detail: %s`, raised as `(External)`. Messages of each
family read to their conclusion, and near misses in similar words that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion)
CASES = [
    ("file-baton-interrupt",
     "tests/test_fused_ops.py::test_layer_norm[bfloat16-4096]\n"
     "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!! KeyboardInterrupt !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
     "/opt/conda/lib/python3.11/site-packages/torch/utils/file_baton.py:53: KeyboardInterrupt\n"
     "(to show a full traceback on KeyboardInterrupt use --full-trace)\n"
     "============================ 41 passed in 3598.70s (0:59:58) ============================",
     "extension-errors:stale-extension-lock"),
    ("file-baton-interrupt",
     "!!!!!!!!!!!!!!!!!!!!!!!!!!! KeyboardInterrupt !!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
     "/home/runner/venv/lib/python3.10/site-packages/torch/utils/file_baton.py:42: KeyboardInterrupt\n"
     "##[error]The action has timed out.",
     "extension-errors:stale-extension-lock"),
    ("paddle-nccl-enospc",
     "OSError: (External)  Nccl error, internal error, detail: No space left on device\n"
     "Please try one of the following solutions:\n"
     "1. export NCCL_SHM_DISABLE=1;\n"
     "2. export NCCL_P2P_LEVEL=SYS;\n"
     "3. Increase shared memory by setting the -shm-size option when starting docker container, e.g., "
     "setting  -shm-size=2g.\n"
     "  (at /paddle/paddle/fluid/platform/collective_helper.cc:72)",
     "nccl-errors:shm-too-small"),
    ("paddle-nccl-errno",
     "OSError: (External)  Nccl error, unhandled system error, detail: Resource temporarily unavailable\n"
     "Please try one of the following solutions:\n"
     "2. export NCCL_P2P_LEVEL=SYS;",
     "nccl-errors:system-error-unexplained"),
    ("paddle-nccl-enospc",
     "OSError: (External) NCCL error(2), unhandled system error.  Detail: No space left on device\n"
     "Please try one of the following solutions:\n"
     "1. export NCCL_SHM_DISABLE=1;",
     "nccl-errors:shm-too-small"),
    ("paddle-nccl-errno",
     "Traceback (most recent call last):\n"
     "  File \"train.py\", line 88, in <module>\n"
     "    dist.init_parallel_env()\n"
     "OSError: (External) NCCL error(5), invalid usage.  Detail: Resource temporarily unavailable\n"
     "Please try one of the following solutions:\n"
     "1. export NCCL_SHM_DISABLE=1;",
     "nccl-errors:system-error-unexplained"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    assert_first(text, family, conclusion)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # an interrupt that caught the process anywhere else is no lock wait
    ("file-baton-interrupt",
     "!!!!!!!!!!!!!!!!!!!!!!!!!!! KeyboardInterrupt !!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
     "/usr/lib/python3.10/selectors.py:469: KeyboardInterrupt\n"
     "(to show a full traceback on KeyboardInterrupt use --full-trace)",
     "extension-errors:stale-extension-lock", None),
    # a frame of file_baton.py in a failure's long traceback is no interrupt in the wait
    ("file-baton-interrupt",
     "/opt/conda/lib/python3.11/site-packages/torch/utils/file_baton.py:27: in try_acquire\n"
     "    self.fd = os.open(self.lock_file_path, os.O_CREAT | os.O_EXCL)\n"
     "E   PermissionError: [Errno 13] Permission denied: '/tmp/torch_extensions/py311_cu121/fused/lock'",
     "extension-errors:stale-extension-lock", None),
    # Paddle's NCCL error with no errno detail is no system error of its own
    ("paddle-nccl-errno",
     "OSError: (External) NCCL error(5), invalid usage.\n"
     "  [Hint: 'ncclInvalidUsage'. The call to NCCL is incorrect. This is usually reflecting a programming "
     "error.] (at /paddle/paddle/phi/core/distributed/nccl_comm_context.cc:61)",
     "nccl-errors:system-error-unexplained", None),
    # Paddle's wrapper of a CUDA call, not of NCCL
    ("paddle-nccl-errno",
     "OSError: (External) CUDA error(2), out of memory.\n"
     "  [Hint: 'cudaErrorMemoryAllocation'. The API call failed because it was unable to allocate enough "
     "memory to perform the requested operation.] (at /paddle/paddle/phi/backends/gpu/cuda/cuda_info.cc:272)",
     "nccl-errors:system-error-unexplained", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
