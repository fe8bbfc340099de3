"""Message families of the stack met in public issue threads of 2023-2026 (round three of the stack's
sweep): the lines the users pasted (each thread's URL beside them), and lines of the same family
written from the library's template (its source file named), read as the conclusion an engineer
would name from those lines alone; and near misses of the same shape that must not read so."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_never_cause

CASES = [
    # TRL's GRPO with a vLLM server: the weight sync goes through vLLM's StatelessProcessGroup
    # (vllm/distributed/utils.py, store keys `broadcast_from/<src>/<counter>`), whose store wait runs out
    # when the other side of the sync stopped
    ("https://github.com/huggingface/trl/issues/2923",
     "[rank0]:[W403 00:25:54.341099763 socket.cpp:462] [c10d] waitForInput: poll for socket "
     "SocketImpl(fd=80, addr=[localhost]:44084, remote=[::ffff:0.0.0.0]:51216) returned 0, likely a timeout\n"
     "torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /broadcast_from/0/553755",
     "rlhf-hang:weight-sync-stuck"),
    ("vllm distributed/utils.py StatelessProcessGroup.broadcast_obj",
     "[rank0]: torch.distributed.DistStoreError: wait timeout after 600000ms, keys: /broadcast_from/0/12",
     "rlhf-hang:weight-sync-stuck"),
    # torch.distributed.checkpoint's load plan (torch/distributed/checkpoint/default_planner.py):
    # a key of the model that the checkpoint does not hold
    ("https://github.com/JinjieNi/dlms-are-super-data-learners/issues/4",
     "[rank3]:   File \"/usr/local/lib/python3.12/dist-packages/torch/distributed/checkpoint/"
     "default_planner.py\", line 233, in create_local_plan\n"
     "[rank3]:     return create_default_local_load_plan(\n"
     "[rank3]: RuntimeError: Missing key in checkpoint state_dict: model.decoder.final_layernorm.weight.",
     "checkpoint-problems:config-mismatch"),
    ("pytorch torch/distributed/checkpoint/default_planner.py",
     "RuntimeError: Missing key in checkpoint state_dict: optimizer.state.embed_tokens.weight.exp_avg.",
     "checkpoint-problems:config-mismatch"),
    # Megatron's dist-checkpointing validation (megatron/core/dist_checkpointing/validation.py
    # maybe_report_missing_and_unexpected_keys)
    ("megatron core/dist_checkpointing/validation.py",
     "megatron.core.dist_checkpointing.core.CheckpointingException: Unexpected keys (not found in the "
     "checkpoint) encountered in the provided sharded state dict. \nUnexpected keys (for this rank): "
     "{'decoder.layers.self_attention.linear_qkv.layer_norm_weight'}.",
     "checkpoint-problems:config-mismatch"),
    ("megatron core/dist_checkpointing/validation.py",
     "CheckpointingException: Some keys found in the checkpoint are missing in the provided sharded state "
     "dict. \nMissing keys (for all ranks): {'output_layer.weight'}.",
     "checkpoint-problems:config-mismatch"),
    # DeepSpeed's ZeRO resume (deepspeed/runtime/engine.py _load_zero_checkpoint)
    ("https://github.com/deepspeedai/Megatron-DeepSpeed/issues/439",
     "    raise ZeRORuntimeException(\"The checkpoint being loaded used a DP \" \\\n"
     "[rank5]: deepspeed.runtime.zero.utils.ZeRORuntimeException: The checkpoint being loaded used a DP "
     "world size of 8 but the current world size is 16. Automatic adjustment of ZeRO's optimizer state "
     "partitioning with a new world size is not currently supported.",
     "checkpoint-problems:zero-world-size-changed"),
    ("https://github.com/THUDM/GLM/issues/136",
     "deepspeed.runtime.zero.utils.ZeRORuntimeException: The checkpoint being loaded used a DP world size of "
     "256 but the current world size is 2. Automatic adjustment of ZeRO's optimizer state partitioning with "
     "a new world size is not currently supported.",
     "checkpoint-problems:zero-world-size-changed"),
    # an illegal address in its other wordings: thrust's system_error (`<what>: <error name>: <string>`),
    # torch before 1.5 (THCGeneral `cuda runtime error (%d) : %s`, THCudaCheck), the driver API's
    # C10_CUDA_DRIVER_CHECK (NCCL's `Cuda failure '...'` stays nccl-errors', test_families_sweep_comm.py)
    ("https://github.com/skhu101/GauHuman/issues/21",
     "RuntimeError: merge_sort: failed to synchronize: cudaErrorIllegalAddress: an illegal memory access "
     "was encountered",
     "gpu-hardware:xid-application"),
    ("https://github.com/laughtervv/DepthAwareCNN/issues/12",
     "RuntimeError: cuda runtime error (77) : an illegal memory access was encountered at "
     "/pytorch/aten/src/THC/generic/THCTensorCopy.c:20",
     "gpu-hardware:xid-application"),
    ("https://github.com/pytorch/pytorch/issues/2983",
     "THCudaCheck FAIL file=/py/conda-bld/pytorch_1490981920203/work/torch/lib/THC/THCTensorCopy.cu line=85 "
     "error=77 : an illegal memory access was encountered",
     "gpu-hardware:xid-application"),
    ("pytorch c10/cuda/CUDAException.h C10_CUDA_DRIVER_CHECK",
     "RuntimeError: CUDA driver error: an illegal memory access was encountered",
     "gpu-hardware:xid-application"),
    ("CUDA driver API CUDA_ERROR_LAUNCH_FAILED", "triton.runtime.errors: CUDA_ERROR_LAUNCH_FAILED",
     "gpu-hardware:xid-application"),
    # the driver's probe at load (kernel-open/nvidia/nv-pci.c, nv.c): a GPU it did not take
    ("https://github.com/NVIDIA/NVSentinel/issues/155",
     "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).",
     "gpu-driver-hang:gpu-missing"),
    ("nvidia kernel-open/nvidia/nv-pci.c",
     "Mar 02 10:11:12 node7 kernel: NVRM: The NVIDIA probe routine failed for 2 device(s).",
     "gpu-driver-hang:gpu-missing"),
]


@pytest.mark.parametrize(("source", "line", "conclusion"), CASES,
                         ids=[f"{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(source: str, line: str, conclusion: str) -> None:
    assert_first(line, source, conclusion)


# Threads whose pasted lines already read right before this round: kept so that they stay so
ALREADY = [
    ("https://github.com/fe1ixxu/ALMA/issues/42",
     "2 pytorch allocator cache flushes since last step. this happens when there is high memory pressure and "
     "is detrimental to performance.",
     "cuda-oom:gpu-memory-near-limit"),
    ("https://github.com/vllm-project/vllm/issues/2418",
     "ValueError: The model's max seq len (4096) is larger than the maximum number of tokens that can be "
     "stored in KV cache (3664). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
     "initializing the engine.",
     "cuda-oom:kv-cache-too-small"),
    ("https://github.com/lemonade-sdk/vllm-rocm/issues/5",
     "(EngineCore pid=42521) ERROR 06-09 14:01:52 [core.py:1136] ValueError: To serve at least one request "
     "with the models's max seq len (131072), (4.11 GiB KV cache is needed, which is larger than the "
     "available KV cache memory (4.0 GiB).",
     "cuda-oom:kv-cache-too-small"),
    ("https://github.com/real-stanford/flingbot/issues/11",
     "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
     "ray-hang:host-out-of-memory"),
    ("https://github.com/Dao-AILab/flash-attention/issues/1832",
     "ImportError: /opt/lib/python3.12/site-packages/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so: "
     "undefined symbol: "
     "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
     "extension-errors:extension-abi-mismatch"),
    ("https://github.com/RLinf/RLinf/issues/227",
     "(raylet) [2025-10-31 17:10:05,847 E 24507 24507] (raylet) worker_pool.cc:586: Some workers of the "
     "worker process(27991) have not registered within the timeout. The process is dead, probably it crashed "
     "during start.",
     "ray-startup:workers-crash-unexplained"),
    ("https://github.com/AnswerDotAI/ModernBERT/issues/233",
     "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 9.773696745450087e-06, 'epoch': 0.53}",
     "nan-loss:loss-diverged"),
    ("https://github.com/alibaba/Pai-Megatron-Patch/issues/60",
     "AssertionError: Rank 3: found NaN in local grad norm in backwards pass. Device: 3, node: gpu-node-7",
     "nan-loss:loss-diverged"),
    ("https://github.com/h2oai/h2o-llmstudio/issues/214",
     "RuntimeError: [enforce fail at inline_container.cc:471] . PytorchStreamWriter failed writing file "
     "data/228: file write failed",
     "host-faults:checkpoint-storage-full"),
    ("https://github.com/lyogavin/airllm/issues/137",
     "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
     "checkpoint-problems:checkpoint-corrupt"),
]


@pytest.mark.parametrize(("source", "line", "conclusion"), ALREADY,
                         ids=[f"{c[2]}-{i}" for i, c in enumerate(ALREADY)])
def test_a_thread_already_read_right_stays_so(source: str, line: str, conclusion: str) -> None:
    assert_first(line, source, conclusion)


# Near misses: the same shape or the same words, another failure (or none)
NEAR_MISSES = [
    # a rendezvous store key, not the weight sync's
    ("pytorch torch/distributed/elastic",
     "torch.distributed.DistStoreError: wait timeout after 900000ms, keys: /torch.rendezvous.abc123.0",
     "rlhf-hang:weight-sync-stuck"),
    # torch.distributed.checkpoint's planner log and a state dict with a missing key that is not a load error
    ("pytorch torch/distributed/checkpoint",
     "INFO:torch.distributed.checkpoint:Loading state_dict from checkpoint dir /ckpt/step_100",
     "checkpoint-problems:config-mismatch"),
    # DeepSpeed loading a ZeRO checkpoint that fits
    ("deepspeed runtime/engine.py",
     "[2024-05-01 10:00:00,000] [INFO] [engine.py:3100:_get_all_zero_checkpoint_state_dicts] successfully "
     "read 16 ZeRO state_dicts for rank 3",
     "checkpoint-problems:zero-world-size-changed"),
    # another CUDA error by name: out of memory, not an illegal address
    ("CUDA runtime", "RuntimeError: CUDA error: cudaErrorMemoryAllocation: out of memory",
     "gpu-hardware:xid-application"),
    ("nccl src/include/checks.h", "NCCL WARN Cuda failure 'out of memory'", "gpu-hardware:xid-application"),
    # the hint that follows every asynchronous CUDA error
    ("pytorch c10/cuda/CUDAException.h",
     "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
     "might be incorrect.",
     "gpu-hardware:xid-application"),
    # the probe routine not called (another driver holds the device), the driver loading
    ("nvidia nv-pci.c", "NVRM: The NVIDIA probe routine was not called for 1 device(s).",
     "gpu-driver-hang:gpu-missing"),
    ("nvidia nv.c",
     "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build",
     "gpu-driver-hang:gpu-missing"),
]


@pytest.mark.parametrize(("source", "line", "not_this"), NEAR_MISSES,
                         ids=[f"not-{c[2]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_is_not_read_as_the_family(source: str, line: str, not_this: str) -> None:
    assert_never_cause(line, source, not_this)
