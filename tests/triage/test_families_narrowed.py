"""Three rules narrowed so that they name the cause their lines show, not a neighbour's: an InfiniBand
registration's `Cannot allocate memory` is the locked-memory limit, not host memory; torch_npu's pinned HOST
memory failure raised as torch.OutOfMemoryError is not the device running out; a git-lfs pointer loaded as
weights is no checkpoint cut short. Lines of each family written from the library's template (its source
file named beside them), read as the conclusion an engineer would name from those lines alone; and near
misses of the same shape that must not read so."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss, assert_never_cause

CASES = [
    # the host's own allocation failures stay host memory: the shell's fork (bash jobs.c make_child,
    # `sys_error ("fork")`), Python's OSError for ENOMEM, torch's CPU allocator
    # (c10/core/impl/alloc_cpu.cpp) and its shared-memory mmap (aten/src/ATen/MapAllocator.cpp:
    # `unable to mmap N bytes from file <F>: %s (%d)`)
    ("bash jobs.c", "/usr/bin/bash: fork: Cannot allocate memory", "memory-growth:host-memory-pressure"),
    ("cpython Lib/multiprocessing/popen_fork.py",
     '  File "/usr/lib/python3.10/multiprocessing/popen_fork.py", line 66, in _launch\n'
     "    self.pid = os.fork()\n"
     "OSError: [Errno 12] Cannot allocate memory",
     "memory-growth:host-memory-pressure"),
    ("pytorch c10/core/impl/alloc_cpu.cpp",
     "RuntimeError: [enforce fail at alloc_cpu.cpp:117] err == 0. DefaultCPUAllocator: can't allocate "
     "memory: you tried to allocate 4194304000 bytes. Error code 12 (Cannot allocate memory)",
     "memory-growth:host-memory-pressure"),
    ("pytorch aten/src/ATen/MapAllocator.cpp",
     "RuntimeError: unable to mmap 1048576 bytes from file </torch_4242_3795218400_17>: Cannot allocate "
     "memory (12)",
     "memory-growth:host-memory-pressure"),
    # a git-lfs pointer checked out in place of the weights: transformers' and diffusers' own diagnosis
    # (transformers src/transformers/modeling_utils.py load_state_dict, diffusers
    # src/diffusers/models/model_loading_utils.py), pickle reading the pointer's first byte (`v` is no
    # opcode of any pickle protocol: Lib/pickletools.py), the pointer's first line (git-lfs docs/spec.md),
    # llama.cpp's GGUF reader (ggml/src/gguf.cpp: `invalid magic characters: '%c%c%c%c', expected 'GGUF'`)
    ("transformers src/transformers/modeling_utils.py",
     "OSError: You seem to have cloned a repository without having git-lfs installed. Please install git-lfs "
     "and run `git lfs install` followed by `git lfs pull` in the folder you cloned.",
     "checkpoint-problems:checkpoint-lfs-pointer"),
    ("diffusers src/diffusers/models/model_loading_utils.py",
     '  File "/opt/conda/lib/python3.11/site-packages/diffusers/models/model_loading_utils.py", line 160, in '
     "load_state_dict\n"
     "    raise OSError(\n"
     "OSError: You seem to have cloned a repository without having git-lfs installed. Please install git-lfs "
     "and run `git lfs install` followed by `git lfs pull` in the folder you cloned.",
     "checkpoint-problems:checkpoint-lfs-pointer"),
    ("pytorch torch/serialization.py _legacy_load",
     '  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 1246, in _legacy_load\n'
     "    magic_number = pickle_module.load(f, **pickle_load_args)\n"
     "_pickle.UnpicklingError: invalid load key, 'v'.",
     "checkpoint-problems:checkpoint-lfs-pointer"),
    ("pytorch torch/serialization.py _legacy_load",
     "[rank0]: _pickle.UnpicklingError: invalid load key, 'v'.",
     "checkpoint-problems:checkpoint-lfs-pointer"),
    ("git-lfs docs/spec.md",
     "$ head -c 200 checkpoints/base/model-00001-of-00004.safetensors\n"
     "version https://git-lfs.github.com/spec/v1\n"
     "oid sha256:4d7c0a3e1f9b8a6c5d2e0f1a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e\n"
     "size 4976698672",
     "checkpoint-problems:checkpoint-lfs-pointer"),
    ("llama.cpp ggml/src/gguf.cpp",
     "gguf_init_from_file_impl: invalid magic characters: 'vers', expected 'GGUF'\n"
     "llama_model_load: error loading model: llama_model_loader: failed to load model from "
     "models/7B/ggml-model-q4_0.gguf",
     "checkpoint-problems:checkpoint-lfs-pointer"),
]


@pytest.mark.parametrize(("source", "line", "conclusion"), CASES,
                         ids=[f"{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(source: str, line: str, conclusion: str) -> None:
    assert_first(line, source, conclusion)


ALREADY = [
    # torch.OutOfMemoryError by its device's words is still the device's memory: the caching allocators of
    # CUDA and ROCm (c10/cuda/CUDACachingAllocator.cpp), XPU (c10/xpu/XPUCachingAllocator.cpp), Ascend
    # (torch_npu/csrc/core/npu/NPUCachingAllocator.cpp), cuDNN's workspace
    # (aten/src/ATen/native/cudnn/Conv_v8.cpp)
    ("pytorch c10/cuda/CUDACachingAllocator.cpp",
     "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
     "capacity of 79.15 GiB of which 1.02 GiB is free.",
     "cuda-oom:oom-batch-or-model"),
    ("pytorch c10/cuda/CUDACachingAllocator.cpp (ROCm)",
     "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of "
     "191.98 GiB of which 2.11 GiB is free.",
     "cuda-oom:oom-batch-or-model"),
    ("pytorch c10/xpu/XPUCachingAllocator.cpp",
     "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total "
     "capacity of 64.00 GiB",
     "cuda-oom:oom-batch-or-model"),
    ("torch_npu NPUCachingAllocator.cpp",
     "torch.OutOfMemoryError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total "
     "capacity; 57.10 GiB already allocated)",
     "cuda-oom:oom-batch-or-model"),
    ("pytorch aten/src/ATen/native/cudnn/Conv_v8.cpp",
     "torch.OutOfMemoryError: Not enough memory for workspace!", "cuda-oom:oom-batch-or-model"),
    # an InfiniBand registration's ENOMEM with UCX's memlock hint (src/uct/ib/base/ib_log.c
    # uct_ib_memlock_limit_msg) stays the locked-memory limit
    ("ucx src/uct/ib/base/ib_log.c",
     "[1736959004.001121] [node7:29714:0]        ib_iface.c:1060 UCX  ERROR mlx5_0: ibv_create_srq() failed: "
     "Cannot allocate memory : Please set max locked memory (ulimit -l) to 'unlimited' (current: 8192 "
     "kbytes)",
     "nccl-errors:resource-limit"),
    # NCCL's verbs wrapper (src/misc/ibvwrap.cc: `Call to ibv_%s failed with error %s`)
    ("nccl src/misc/ibvwrap.cc",
     "gpu12:4242:4300 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_qp failed with error Cannot "
     "allocate memory",
     "nccl-errors:resource-limit"),
]


@pytest.mark.parametrize(("source", "line", "conclusion"), ALREADY,
                         ids=[f"{c[2]}-{i}" for i, c in enumerate(ALREADY)])
def test_a_line_already_read_right_stays_so(source: str, line: str, conclusion: str) -> None:
    assert_first(line, source, conclusion)


NEAR_MISSES = [
    # an InfiniBand verbs call's ENOMEM is the locked-memory limit (ulimit -l), not host RAM: UCX's
    # registration and queue creation (src/uct/ib/base/ib_md.c `%s(address=%p, length=%zu, access=0x%lx)
    # failed: %m`, ib_iface.c), Gloo's ibverbs transport (gloo/transport/ibverbs/unbound_buffer.cc), NCCL's
    # verbs wrapper (src/misc/ibvwrap.cc)
    ("ucx src/uct/ib/base/ib_md.c",
     "[1715000000.1] [node1:1:0]          ib_md.c:309  UCX  ERROR ibv_reg_mr(address=0x7f0000000000, "
     "length=263192, access=0xf) failed: Cannot allocate memory",
     "memory-growth:host-memory-pressure"),
    ("ucx src/uct/ib/base/ib_iface.c",
     "[1744644100.553280] [worker-0:188662:0]        ib_iface.c:1230 UCX  ERROR mlx5_0: "
     "ibv_create_cq(cqe=4096) failed: Cannot allocate memory",
     "memory-growth:host-memory-pressure"),
    ("ucx src/uct/ib/base/ib_log.c",
     "[1765653660.705652] [gpu3:640743:0]           ib_md.c:287  UCX  ERROR "
     "ibv_reg_mr(address=0x15213b956010, length=65536, access=0xf) failed: Cannot allocate memory : "
     "Please set max locked memory (ulimit -l) to "
     "'unlimited' (current: 65536 kbytes)",
     "memory-growth:host-memory-pressure"),
    ("gloo gloo/transport/ibverbs/unbound_buffer.cc",
     "terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
     "  what():  [enforce fail at gloo/transport/ibverbs/unbound_buffer.cc:56] mr != nullptr. ibv_reg_mr: "
     "Cannot allocate memory (did you run into the locked memory limit?)",
     "memory-growth:host-memory-pressure"),
    ("nccl src/misc/ibvwrap.cc",
     "node3:881:902 [1] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot "
     "allocate memory",
     "memory-growth:host-memory-pressure"),
    # torch_npu's pinned HOST memory allocation (torch_npu/csrc/core/npu/CachingHostAllocator.cpp
    # allocate_host_memory_slowpath: NPU_CHECK_ERROR(aclrtMallocHostWithCfg(...)), worded by NPUException.h as
    # `FUNC:FILE:LINE NPU function error: CALL, error code is N`), raised as torch.OutOfMemoryError: host RAM,
    # the locked-memory limit or the size of one pinned buffer, not the device's memory
    ("torch_npu torch_npu/csrc/core/npu/CachingHostAllocator.cpp",
     "torch.OutOfMemoryError: "
     "allocate_host_memory_slowpath:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:252 NPU function "
     "error: aclrtMallocHostWithCfg, error code is 207001",
     "cuda-oom:oom-batch-or-model"),
    ("torch_npu torch_npu/csrc/core/npu/CachingHostAllocator.cpp",
     "(Worker_TP1 pid=4242) ERROR 09-01 10:11:12 [multiproc_executor.py:671] torch.OutOfMemoryError: "
     "allocate_host_memory_slowpath:../torch_npu/csrc/core/npu/CachingHostAllocator.cpp:244\n"
     "(Worker_TP1 pid=4242) ERROR 09-01 10:11:12 [multiproc_executor.py:671] NPU function error: "
     "aclrtMallocHost, error code is 207001\n"
     "(Worker_TP1 pid=4242) ERROR 09-01 10:11:12 [multiproc_executor.py:671] [ERROR] 2025-09-01-10:11:12 "
     "(PID:4242, Device:1, RankID:-1) ERR00100 PTA call acl api failed",
     "cuda-oom:oom-batch-or-model"),
    # pickle keys other than `v` are no pointer: zeros where the data should be (storage), an HTML page
    # saved in place of the file; a safetensors header out of range is any file that is not safetensors;
    # git-lfs configured or set up is no pointer loaded
    ("pytorch torch/serialization.py _legacy_load", "_pickle.UnpicklingError: invalid load key, '\\x00'.",
     "checkpoint-problems:checkpoint-lfs-pointer"),
    ("pytorch torch/serialization.py _legacy_load", "_pickle.UnpicklingError: invalid load key, '<'.",
     "checkpoint-problems:checkpoint-lfs-pointer"),
    ("safetensors safetensors/src/tensor.rs",
     "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
     "checkpoint-problems:checkpoint-lfs-pointer"),
    ("git-lfs .gitattributes", "*.safetensors filter=lfs diff=lfs merge=lfs -text",
     "checkpoint-problems:checkpoint-lfs-pointer"),
    ("git-lfs commands/command_install.go", "Git LFS initialized.",
     "checkpoint-problems:checkpoint-lfs-pointer"),
]


@pytest.mark.parametrize(("source", "line", "not_this"), NEAR_MISSES,
                         ids=[f"not-{c[2]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_is_not_read_as_the_family(source: str, line: str, not_this: str) -> None:
    assert_never_cause(line, source, not_this)


# a pointer read by pickle is no save cut short; zeros where the data should be still are
@pytest.mark.parametrize(("line", "not_first", "first"), [
    ("_pickle.UnpicklingError: invalid load key, 'v'.", "checkpoint-problems:checkpoint-corrupt",
     "checkpoint-problems:checkpoint-lfs-pointer"),
    ("_pickle.UnpicklingError: invalid load key, '\\x00'.", "checkpoint-problems:checkpoint-lfs-pointer",
     "checkpoint-problems:checkpoint-corrupt"),
])
def test_the_load_key_tells_a_pointer_from_a_corrupt_file(line: str, not_first: str, first: str) -> None:
    assert_near_miss(line, "pytorch torch/serialization.py _legacy_load", not_first, first)
