"""Message families of session 43's car: the custom all-reduce of vLLM (and of SGLang and TensorRT-LLM, which
reuse it) dying while it shares or opens its GPU buffers over CUDA IPC, on GPUs without peer access or with
PyTorch's expandable-segments allocator. Two or more messages of each wording read to
extension-errors:custom-allreduce-unsupported, and near misses in similar words that must read otherwise.
The wordings are the libraries' own (the source file is named beside each family)."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

CUSTOM_AR = "extension-errors:custom-allreduce-unsupported"

# (family, text, conclusion, role of the first match)
CASES = [
    # vLLM csrc/custom_all_reduce.cuh CUDACHECK: printf("Failed: Cuda error %s:%d '%s'\n", __FILE__, __LINE__,
    # cudaGetErrorString(e)); cudaIpcOpenMemHandle between GPUs with no peer access (sglang#552 on two T4s)
    ("vllm-cudacheck-peer",
     "Failed: Cuda error /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:307 'peer access is not "
     "supported between these two devices'\n"
     "[rank1]:[W CudaIPCTypes.cpp:16] Producer process has been terminated before all shared CUDA tensors "
     "released. See Note [Sharing CUDA tensors]",
     CUSTOM_AR, "cause"),
    ("vllm-cudacheck-peer",
     "(VllmWorker rank=1 pid=2211) Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:368 'peer access "
     "is not supported between these two devices'",
     CUSTOM_AR, "cause"),
    # the 2024 builds' form without `Cuda error` (vllm#5613, ai-dynamo/dynamo#787)
    ("vllm-cudacheck-peer",
     "2025-04-23T03:35:43.390Z  INFO dynamo_engine_vllm::worker: VLLM: Failed: "
     "/workspace/csrc/custom_all_reduce.cuh:368 'peer access is not supported between these two devices'",
     CUSTOM_AR, "cause"),
    # cudaIpcGetMemHandle refusing a VMM-mapped CUDA graph buffer (expandable segments): vllm#56180, #42609
    ("vllm-cudacheck-invalid",
     "Capturing CUDA graphs (FULL): 100%|##########| 2/2 [00:00<00:00, 6.11it/s]\n"
     "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'invalid argument'\n"
     "(EngineCore pid=3677484) ERROR 09-10 09:37:41 [multiproc_executor.py:314] Worker proc VllmWorker-0 "
     "died unexpectedly (exit code: None), shutting down executor.",
     CUSTOM_AR, "cause"),
    ("vllm-cudacheck-invalid",
     "Failed: Cuda error custom_all_reduce.cuh:455 'invalid argument'\n"
     "EngineCore failed to start: Worker proc VllmWorker-1 died unexpectedly",
     CUSTOM_AR, "cause"),
    ("vllm-cudacheck-invalid",
     "Failed: /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:310 'invalid argument'",
     CUSTOM_AR, "cause"),
    # SGLang's JIT kernel: panic() `Runtime check failed at FILE:LINE: ...` (THUDM/slime#1998)
    ("sglang-jit-runtime-check",
     "RuntimeError: Runtime check failed at "
     "/sgl-workspace/sglang/python/sglang/jit_kernel/include/sgl_kernel/"
     "distributed/custom_all_reduce.cuh:37: CUDA error: invalid argument\n"
     "Exception: Capture cuda graph failed",
     CUSTOM_AR, "cause"),
    ("sglang-jit-runtime-check",
     "[2026-05-31 10:02:11 TP1] RuntimeError: Runtime check failed at "
     "/usr/local/lib/python3.12/dist-packages/"
     "sglang/jit_kernel/include/sgl_kernel/distributed/custom_all_reduce.cuh:61: CUDA error: peer access is "
     "not supported between these two devices",
     CUSTOM_AR, "cause"),
    # vLLM's and SGLang's cudart wrapper (cuda_wrapper.py CUDART_CHECK: `CUDART error: {error_str}`),
    # sglang#4814
    ("cudart-wrapper-peer",
     "RuntimeError: CUDART error: peer access is not supported between these two devices",
     CUSTOM_AR, "cause"),
    ("cudart-wrapper-peer",
     "[2025-03-27 10:12:44 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
     "  File \"/opt/sglang/python/sglang/srt/distributed/device_communicators/cuda_wrapper.py\", line 146, "
     "in CUDART_CHECK\n"
     "    raise RuntimeError(f\"CUDART error: {error_str}\")\n"
     "RuntimeError: CUDART error: peer access is not supported between these two devices",
     CUSTOM_AR, "cause"),
    # TensorRT-LLM runtime/ipcUtils.cpp under TLLM_CUDA_CHECK (`CUDA runtime error in %s: %s`),
    # TensorRT-LLM#1498
    ("trtllm-ipc-peer",
     "E0425 10:43:31.433641 841 backend_model.cc:691] ERROR: Failed to create instance: unexpected error "
     "when creating modelInstanceState: [TensorRT-LLM][ERROR] CUDA runtime error in cudaIpcOpenMemHandle( "
     "reinterpret_cast<void**>(&foreignBuffer), handles[nodeId], cudaIpcMemLazyEnablePeerAccess): peer "
     "access is not supported between these two devices "
     "(/app/TensorRT-LLM/cpp/tensorrt_llm/runtime/ipcUtils.cpp:90)",
     CUSTOM_AR, "cause"),
    ("trtllm-ipc-peer",
     "[TensorRT-LLM][ERROR] CUDA runtime error in "
     "cudaIpcOpenMemHandle(reinterpret_cast<void**>(&foreignBuffer), "
     "handles[nodeId], cudaIpcMemLazyEnablePeerAccess): peer access is not supported between these two "
     "devices (/src/tensorrt_llm/cpp/tensorrt_llm/runtime/ipcUtils.cpp:88)",
     CUSTOM_AR, "cause"),
    # the kernel refusing a group size (csrc/custom_all_reduce.cuh CustomAllreduce::allreduce)
    ("world-size",
     "RuntimeError: custom allreduce only supports num gpus in (2,4,6,8). Actual num gpus = 3",
     CUSTOM_AR, "cause"),
    ("world-size",
     "(RayWorkerWrapper pid=4811) ERROR worker_base.py:382] RuntimeError: custom allreduce only supports num "
     "gpus in (2,4,6,8). Actual num gpus = 16",
     CUSTOM_AR, "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, the conclusion that must not come first, the one that must, or None)
NEAR_MISSES = [
    # vLLM's own P2P test failed: it warns and runs on with NCCL (custom_all_reduce.py finalize_p2p)
    ("p2p-warning",
     "WARNING 03-28 21:38:23 custom_all_reduce.py:133] Custom allreduce is disabled because your platform "
     "lacks GPU P2P capability or P2P test failed. To silence this warning, specify "
     "disable_custom_all_reduce=True explicitly.",
     CUSTOM_AR, None),
    # an unsupported world size and PCIe-only GPUs are only warnings too (custom_all_reduce.py __init__)
    ("world-size-warning",
     "WARNING 06-12 10:01:02 custom_all_reduce.py:84] Custom allreduce is disabled due to an unsupported "
     "world size: 3. Supported world sizes: [2, 4, 6, 8]. To silence this warning, specify "
     "disable_custom_all_reduce=True explicitly.",
     CUSTOM_AR, None),
    ("pcie-warning",
     "WARNING 06-12 10:01:02 custom_all_reduce.py:118] Custom allreduce is disabled because it's not "
     "supported "
     "on more than two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True "
     "explicitly.",
     CUSTOM_AR, None),
    # peer access refused by NCCL's own P2P transport is not the custom all-reduce
    ("nccl-p2p",
     "node1:1200:1250 [0] transport/p2p.cc:272 NCCL WARN Cuda failure 'peer access is not supported between "
     "these two devices'",
     CUSTOM_AR, None),
    # a CUDACHECK failure of another vLLM file, and NCCL's `invalid argument`
    ("other-cudacheck",
     "Failed: Cuda error /workspace/csrc/quickreduce/quick_reduce.h:62 'invalid argument'",
     CUSTOM_AR, None),
    ("other-cudacheck",
     "node1:1200:1250 [0] transport/p2p.cc:272 NCCL WARN Cuda failure 1 'invalid argument'",
     CUSTOM_AR, None),
    # the custom all-reduce running out of memory is memory, not a platform it cannot run on
    ("custom-ar-oom",
     "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:310 'out of memory'",
     CUSTOM_AR, None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
