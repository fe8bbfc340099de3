"""Message families of session 47. ddp-errors: DeepSpeed's launcher killing its other local ranks
(deepspeed/launcher/launch.py `sigkill_handler`: `Killing subprocess PID` for each process, then
`exits with return code = N`). Its monitor calls the handler once a rank has exited non-zero, so the
line is a knock-on of a rank that failed first, also where the paste is cut before the return code.
Where the paste holds the rank's own error, or the return code of a SIGKILL, that is the answer.
gpu-driver-hang: CUDA's error 803 (cudaErrorSystemDriverMismatch, `system has unsupported display driver /
cuda driver combination`), a libcuda that is not the loaded kernel module's: the GPU cannot be used, as
with NVML's `Driver/library version mismatch`; a driver merely older than the runtime is another reading."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

CASES = [
    ("[2025-03-02 10:14:07,512] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 40211\n"
     "[2025-03-02 10:14:07,513] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 40212\n",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("[INFO] [launch.py:315:sigkill_handler] Killing subprocess 1733\n"
     "[INFO] [launch.py:315:sigkill_handler] Killing subprocess 1734\n"
     "[INFO] [launch.py:315:sigkill_handler] Killing subprocess 1735\n",
     "ddp-errors:rank-failed-first", "knock-on"),
]
DRIVER_MISMATCH = [
    # torch's device count (c10/cuda/CUDAFunctions.cpp: `Error %d: %s` after cudaGetDeviceCount)
    ("  File \"/opt/conda/lib/python3.10/site-packages/torch/cuda/__init__.py\", line 298, in _lazy_init\n"
     "    torch._C._cuda_init()\n"
     "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
     "calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported "
     "display driver / cuda driver combination\n"),
    # the runtime's error name, as CUDA Python and C++ programs print it
    ("E1107 04:12:55.101 cuda_utils.cc:41] cudaSetDevice(0) failed: cudaErrorSystemDriverMismatch: "
     "system has unsupported display driver / cuda driver combination\n"),
]
NEAR_MISSES = [
    # a driver older than the runtime is its own reading
    ("RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n",
     "gpu-driver-hang:gpu-unavailable", "gpu-driver-hang:driver-too-old-for-cuda"),
    # the return code says the kernel's OOM killer ended the rank: host-faults' cause comes first
    ("[INFO] [launch.py:319:sigkill_handler] Killing subprocess 40211\n"
     "[ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=0'] "
     "exits with return code = -9\n",
     "ddp-errors:rank-failed-first", "host-faults:killed-likely-oom"),
    # the rank's own error is in the paste: it is the cause
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity "
     "of 23.65 GiB of which 1.10 GiB is free.\n"
     "[INFO] [launch.py:319:sigkill_handler] Killing subprocess 40211\n",
     "ddp-errors:rank-failed-first", None),
]


@pytest.mark.parametrize(("text", "conclusion", "role"), CASES)
def test_the_launcher_killing_its_ranks_is_a_knock_on(text: str, conclusion: str, role: str) -> None:
    assert_first(text, "deepspeed-launcher", conclusion, role)


@pytest.mark.parametrize(("text", "not_first", "first"), NEAR_MISSES)
def test_the_ranks_own_end_comes_first(text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, "deepspeed-launcher", not_first, first)


@pytest.mark.parametrize("text", DRIVER_MISMATCH)
def test_error_803_is_a_library_that_does_not_match_the_driver(text: str) -> None:
    assert_first(text, "cuda-error-803", "gpu-driver-hang:gpu-unavailable")
