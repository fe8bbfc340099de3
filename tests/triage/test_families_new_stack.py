"""Message families that had no conclusion of their own (the new conclusions host-faults:open-files-limit,
ray-hang:object-store-full, gpu-driver-hang:driver-libraries-missing): lines written from each library's
template (its source file named), read as the conclusion an engineer names from those lines alone; and near
misses of the same shape that must not read so."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

CASES = [
    # CPython's open() under EMFILE (Objects/exceptions.c OSError `[Errno %d] %s: %r`)
    ("cpython OSError errno 24",
     "Traceback (most recent call last):\n"
     "  File \"train.py\", line 88, in __getitem__\n"
     "    with open(self.paths[idx], \"rb\") as f:\n"
     "OSError: [Errno 24] Too many open files: '/data/shards/part-00123.bin'",
     "host-faults:open-files-limit"),
    ("cpython OSError errno 24, no file name",
     "OSError: [Errno 24] Too many open files",
     "host-faults:open-files-limit"),
    # multiprocessing/reduction.py recvfds: `received %d items of ancdata` (a DataLoader worker's tensor sent
    # by file descriptor that the main process could not receive)
    ("cpython Lib/multiprocessing/reduction.py recvfds",
     "  File \"/usr/lib/python3.10/multiprocessing/reduction.py\", line 164, in recvfds\n"
     "    raise RuntimeError('received %d items of ancdata' %\n"
     "RuntimeError: received 0 items of ancdata",
     "host-faults:open-files-limit"),
    # torch's shared-memory allocator (aten/src/ATen/MapAllocator.cpp `unable to open shared memory object
    # <%s> in read-write mode: %s (%d)`)
    ("pytorch aten/src/ATen/MapAllocator.cpp",
     "RuntimeError: unable to open shared memory object </torch_41872_3127584395_917> in read-write mode: "
     "Too many open files (24)",
     "host-faults:open-files-limit"),
    # Ray's core worker (plasma_store_provider.cc) and ObjectStoreFullError's text (python/ray/exceptions.py)
    ("ray src/ray/core_worker/store_provider/plasma_store_provider.cc",
     "[2026-02-07 04:20:03,942 E 1225 1225] plasma_store_provider.cc:122: Failed to put object "
     "641e079764274441ffffffffffffffffffffffff0200000001000000 in object store because it is full. "
     "Object size is 219375455268 bytes.",
     "ray-hang:object-store-full"),
    ("ray python/ray/exceptions.py ObjectStoreFullError",
     "ray.exceptions.ObjectStoreFullError: Failed to put object "
     "00ffffffffffffffffffffffffffffffffffffff0100000001000000 in object store because it is full. "
     "Object size is 2147483648 bytes.\n"
     "The local object store is full of objects that are still in scope and cannot be evicted. Tip: Use the "
     "`ray memory` command to list active objects in the cluster.",
     "ray-hang:object-store-full"),
    ("ray python/ray/_raylet.pyx check_status",
     "  File \"python/ray/_raylet.pyx\", line 148, in ray._raylet.check_status\n"
     "ray.exceptions.ObjectStoreFullError: Failed to put object "
     "87c1a0582234fb65ffffffffffffffffffffffff0100000001000000 in object store because it is full.",
     "ray-hang:object-store-full"),
    # pynvml's NVML_ERROR_LIBRARY_NOT_FOUND (nvidia-ml-py pynvml.py `NVML Shared Library Not Found`)
    ("nvidia-ml-py pynvml.py _LoadNvmlLibrary",
     "pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found",
     "gpu-driver-hang:driver-libraries-missing"),
    # nvidia-smi's own words where libnvidia-ml cannot be loaded
    ("nvidia-smi",
     "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA "
     "Display Driver is properly installed and present in your system.\n"
     "Please also try adding directory that contains libnvidia-ml.so to your system PATH.",
     "gpu-driver-hang:driver-libraries-missing"),
    # nvidia-container-cli (libnvidia-container, `load library failed: %s`) and the loader's dlopen error for
    # libcuda
    ("libnvidia-container nvc.c",
     "docker: Error response from daemon: failed to create task for container: OCI runtime create failed: "
     "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
     "object file: no such file or directory: unknown.",
     "gpu-driver-hang:driver-libraries-missing"),
    ("glibc dlopen libcuda.so.1",
     "OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
     "gpu-driver-hang:driver-libraries-missing"),
]


@pytest.mark.parametrize(("source", "text", "conclusion"), CASES, ids=[c[0] for c in CASES])
def test_family_reads_as(source: str, text: str, conclusion: str) -> None:
    assert_first(text, source, conclusion)


NEAR_MISSES = [
    # Ray's raylet and NCCL out of descriptors keep their own conclusions
    ("ray raylet node_manager.cc",
     "(raylet) [2026-01-01 10:00:00,000 E 123 123] (raylet) node_manager.cc:562: Raylet failed to accept new "
     "connection: Too many open files",
     "host-faults:open-files-limit", "ray-startup:open-files-limit"),
    ("nccl misc/socket.cc",
     "misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43211> failed : "
     "Too many open files",
     "host-faults:open-files-limit", "nccl-errors:resource-limit"),
    # another errno of the same call is not the descriptor limit
    ("cpython OSError errno 28",
     "OSError: [Errno 28] No space left on device: '/data/cache/part-00001.bin'",
     "host-faults:open-files-limit", None),
    # Ray's S3-like wording and the spill disk being full are not the object store's references
    ("s3 client put",
     "RuntimeError: Failed to put object checkpoints/step_100.pt: S3Error: AccessDenied",
     "ray-hang:object-store-full", None),
    ("ray python/ray/exceptions.py OutOfDiskError",
     "ray.exceptions.OutOfDiskError: Local disk is full\nThe object cannot be created because the local "
     "object store is full and the local disk's utilization is over capacity (95% by default).",
     "ray-hang:object-store-full", "host-faults:disk-full"),
    # the toolkit's runtime library (a wheel or image without CUDA) is not the driver's
    ("glibc dlopen libcudart",
     "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory",
     "gpu-driver-hang:driver-libraries-missing", None),
    # a driver and library of different versions stays gpu-unavailable
    ("nvml version mismatch",
     "Failed to initialize NVML: Driver/library version mismatch",
     "gpu-driver-hang:driver-libraries-missing", "gpu-driver-hang:gpu-unavailable"),
]


@pytest.mark.parametrize(("source", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[c[0] for c in NEAR_MISSES])
def test_near_miss(source: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, source, not_first, first)
