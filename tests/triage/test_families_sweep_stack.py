"""Message families of the stack's libraries (vLLM, SGLang, Ray, DeepSpeed, PyTorch, transformers,
Megatron, the NVIDIA driver), each written as the library's source prints it (the file named beside
it), read as the conclusion an engineer would name from that message alone; and near misses of the
same shape that must not read so."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_never_cause
from tests.triage.families import found as _found

CASES = [
    # PyTorch's C10_CUDA_DRIVER_CHECK (c10/cuda/CUDAException.h): the driver API's CUDA_ERROR_OUT_OF_MEMORY
    ("pytorch c10/cuda/CUDAException.h", "RuntimeError: CUDA driver error: out of memory",
     "cuda-oom:oom-batch-or-model"),
    ("pytorch c10/cuda/CUDAException.h",
     "[rank3]: RuntimeError: CUDA driver error: out of memory",
     "cuda-oom:oom-batch-or-model"),
    # SGLang's model_runner.py / pool_configurator.py: the static fraction less the weights holds no token
    ("sglang srt/model_executor/model_runner.py",
     "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
     "cuda-oom:kv-cache-too-small"),
    ("sglang srt/mem_cache/pool_configurator.py",
     "[2025-06-01 10:00:00 TP0] RuntimeError: Not enough memory. Please try to increase "
     "--mem-fraction-static. Current value: mem_fraction_static=0.78",
     "cuda-oom:kv-cache-too-small"),
    # SGLang's tensor-parallel memory check: one GPU has less free memory than the others
    ("sglang srt/model_executor/model_runner.py",
     "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
     "min_per_gpu_memory=16.28, local_gpu_memory=46.81, local_gpu_memory * 0.9=42.13",
     "cuda-oom:gpu-held-by-other-process"),
    ("sglang srt/model_executor/model_runner.py (older)",
     "ValueError: The memory capacity is unbalanced. min_available_device_memory=20.5, "
     "local_device_memory=70.1, local_device_memory*0.9=63.09",
     "cuda-oom:gpu-held-by-other-process"),
    # vLLM's profiling assertion before its `Initial free memory` wording (worker/worker.py, V0)
    ("vllm worker/worker.py",
     "AssertionError: Error in memory profiling. This happens when the GPU memory was not properly cleaned "
     "up before initializing the vLLM instance.",
     "cuda-oom:gpu-held-by-other-process"),
    # a process ended by SIGBUS, as the shell and Python report it: shared memory /dev/shm cannot back
    ("bash job control", "Bus error (core dumped)", "cuda-oom:dataloader-shm-exhausted"),
    ("bash job control",
     "./train.sh: line 12: 48211 Bus error               (core dumped) python train.py --bs 64",
     "cuda-oom:dataloader-shm-exhausted"),
    ("cpython Python/pylifecycle.c faulthandler", "Fatal Python error: Bus error",
     "cuda-oom:dataloader-shm-exhausted"),
    # torch's shared-memory tensors (aten/src/ATen/MapAllocator.cpp) in /dev/shm/torch_*: the write fails
    ("pytorch aten/src/ATen/MapAllocator.cpp",
     "RuntimeError: unable to write to file </torch_1423_2967408413_0>: No space left on device (28)",
     "cuda-oom:dataloader-shm-exhausted"),
    ("pytorch aten/src/ATen/MapAllocator.cpp",
     "RuntimeError: unable to write to file </torch_88213_1130264853_7>",
     "cuda-oom:dataloader-shm-exhausted"),
    # Ray's GCS never answered (src/ray/gcs/gcs_client, python/ray/_private/gcs_utils.py, utils.py)
    ("ray src/ray/gcs/gcs_client/gcs_client.cc",
     "[2025-03-01 22:48:06,851 W 6578 6578] gcs_client.cc:182: Failed to get cluster ID from GCS server: "
     "TimedOut: Timed out while waiting for GCS to become available.",
     "ray-hang:ray-unresponsive"),
    ("ray python/ray/_private/gcs_utils.py",
     "2023-05-22 16:41:02,771 ERROR gcs_utils.py:213 -- Failed to connect to GCS. Please check "
     "`gcs_server.out` for more details.",
     "ray-hang:ray-unresponsive"),
    ("ray python/ray/_private/utils.py",
     "2023-05-22 16:41:02,771 WARNING utils.py:1416 -- Unable to connect to GCS at 10.0.3.7:6379. Check that "
     "(1) Ray GCS with matching version started successfully at the specified address, and (2) there is no "
     "firewall setting preventing access.",
     "ray-hang:ray-unresponsive"),
    # ray.init(address="auto") with no cluster to join (python/ray/_private/services.py), two versions' words
    ("ray python/ray/_private/services.py",
     "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to by "
     "setting `--address` flag or `RAY_ADDRESS` environment variable.",
     "ray-hang:no-ray-cluster"),
    ("ray python/ray/_private/services.py (1.x)",
     "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to by "
     "setting `address`.",
     "ray-hang:no-ray-cluster"),
    # vLLM's Ray executor (executor/ray_utils.py) waiting for bundles no node offers
    ("vllm executor/ray_utils.py",
     "INFO 02-02 19:54:30 ray_utils.py:212] Waiting for creating a placement group of specs for 10 seconds. "
     "specs=[{'GPU': 1.0, 'node:172.31.42.4': 0.001}, {'GPU': 1.0}]. Check `ray status` to see if you have "
     "enough resources.",
     "ray-hang:infeasible-resources"),
    ("vllm executor/ray_utils.py",
     "ValueError: Cannot provide a placement group of placement_group_specs=[{'GPU': 1.0, "
     "'node:10.0.0.2': 0.001}, {'GPU': 1.0}] within 1800 seconds. See `ray status` to make sure the cluster "
     "has enough resources.",
     "ray-hang:infeasible-resources"),
    # Ray's object store cannot spill: the local disk is over its capacity threshold
    # (python/ray/exceptions.py)
    ("ray python/ray/exceptions.py",
     "ray.exceptions.OutOfDiskError: Local disk is full",
     "host-faults:disk-full"),
    ("ray python/ray/exceptions.py",
     "The object cannot be created because the local object store is full and the local disk's utilization "
     "is over capacity (95% by default).Tip: Use `df` on this node to check disk usage and `ray memory` to "
     "check object store memory usage.",
     "host-faults:disk-full"),
    # no driver, no device: torch (torch/csrc/cuda/Module.cpp), nvidia-smi, cudaErrorNoDevice
    ("pytorch c10/cuda/CUDAFunctions.cpp",
     "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
     "installed a driver from http://www.nvidia.com/Download/index.aspx",
     "gpu-driver-hang:gpu-unavailable"),
    ("nvidia-smi",
     "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
     "latest NVIDIA driver is installed and running.",
     "gpu-driver-hang:gpu-unavailable"),
    ("CUDA runtime cudaErrorNoDevice", "RuntimeError: CUDA error: no CUDA-capable device is detected",
     "gpu-driver-hang:gpu-unavailable"),
    # cudaErrorInvalidDeviceFunction: no code in the binary for this device's architecture
    ("CUDA runtime cudaErrorInvalidDeviceFunction", "RuntimeError: CUDA error: invalid device function",
     "extension-errors:gpu-arch-not-built"),
    ("CUDA runtime cudaErrorInvalidDeviceFunction",
     "torch.AcceleratorError: CUDA error: invalid device function\nCUDA kernel errors might be "
     "asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
     "extension-errors:gpu-arch-not-built"),
    # nvcc does not know an architecture the JIT build asks for (TORCH_CUDA_ARCH_LIST, -gencode)
    ("nvcc", "nvcc fatal   : Unsupported gpu architecture 'compute_90'",
     "extension-errors:extension-cuda-mismatch"),
    ("nvcc", "nvcc fatal   : Value 'sm_120' is not defined for option 'gpu-architecture'",
     "extension-errors:extension-cuda-mismatch"),
    # torch.load on a short or damaged file (caffe2/serialize/inline_container.cc,
    # torch/csrc/serialization.cpp)
    ("pytorch caffe2/serialize/inline_container.cc",
     "RuntimeError: PytorchStreamReader failed reading file data/0: invalid header or archive is corrupted",
     "checkpoint-problems:checkpoint-corrupt"),
    ("pytorch caffe2/serialize/inline_container.cc",
     "RuntimeError: PytorchStreamReader failed reading file data/94: file read failed",
     "checkpoint-problems:checkpoint-corrupt"),
    ("pytorch torch/csrc/serialization.cpp",
     "RuntimeError: unexpected EOF, expected 4014429833 more bytes. The file might be corrupted.",
     "checkpoint-problems:checkpoint-corrupt"),
    # torch/_weights_only_unpickler.py's refusal, pasted without torch.load's `Weights only load failed`
    ("pytorch torch/_weights_only_unpickler.py",
     "WeightsUnpickler error: Unsupported global: GLOBAL argparse.Namespace was not an allowed global by "
     "default. Please use `torch.serialization.add_safe_globals([Namespace])` to allowlist this global.",
     "checkpoint-problems:weights-only-refused"),
    ("pytorch torch/_weights_only_unpickler.py",
     "WeightsUnpickler error: Unsupported operand 149", "checkpoint-problems:weights-only-refused"),
    # transformers' from_pretrained: no weights file in the directory it was given (modeling_utils.py)
    ("transformers modeling_utils.py",
     "OSError: Error no file named pytorch_model.bin, model.safetensors, tf_model.h5, model.ckpt.index or "
     "flax_model.msgpack found in directory /data/run7/checkpoint-1000.",
     "checkpoint-problems:checkpoint-missing"),
    ("transformers modeling_utils.py (4.2x)",
     "OSError: Error no file named ['pytorch_model.bin', 'tf_model.h5', 'model.ckpt.index', "
     "'flax_model.msgpack'] found in directory outputs/final or `from_tf` and `from_flax` set to False.",
     "checkpoint-problems:checkpoint-missing"),
    # DeepSpeed's zero_to_fp32.py: the tag directory holds no model or optimizer states
    ("deepspeed utils/zero_to_fp32.py",
     "FileNotFoundError: can't find model states file at '/ckpt/global_step100/mp_rank_00_model_states.pt'",
     "checkpoint-problems:checkpoint-missing"),
    ("deepspeed utils/zero_to_fp32.py",
     "FileNotFoundError: can't find *_optim_states.pt files in directory '/ckpt/global_step100'",
     "checkpoint-problems:checkpoint-missing"),
    # DeepSpeed's fp16 optimizers (runtime/fp16/fused_optimizer.py, unfused_optimizer.py, zero stage 1/2)
    # at a loss scale of three digits or fewer: the scale has collapsed
    ("deepspeed runtime/fp16/fused_optimizer.py",
     "[2024-02-01 10:11:12,131] [INFO] [fused_optimizer.py:344:step] [deepspeed] fp16 dynamic loss scale "
     "overflow! Skipping step. Attempted loss scale: 1, reducing to 1",
     "nan-loss:fp16-overflow"),
    ("deepspeed runtime/zero/stage2.py (0.3)",
     "[deepspeed] fp16 dynamic loss scale overflow! Rank 0 Skipping step. Attempted loss scale: 2.0, "
     "reducing to 1.0",
     "nan-loss:fp16-overflow"),
    # the gradients' norm checked before it is used: torch.nn.utils.clip_grad_norm_(error_if_nonfinite=True)
    # (torch/nn/utils/clip_grad.py) and Megatron's per-bucket check
    # (core/distributed/param_and_grad_buffer.py)
    ("pytorch torch/nn/utils/clip_grad.py",
     "RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot "
     "be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
     "`error_if_nonfinite=False`",
     "nan-loss:loss-diverged"),
    ("pytorch torch/nn/utils/clip_grad.py",
     "RuntimeError: The total norm of order inf for gradients from `parameters` is non-finite, so it cannot "
     "be clipped.",
     "nan-loss:loss-diverged"),
    ("megatron core/distributed/param_and_grad_buffer.py",
     "AssertionError: Rank 13: found NaN in local grad norm in backward pass before data-parallel "
     "communication collective. Device: 5, node: node-15-11",
     "nan-loss:loss-diverged"),
    ("megatron core/distributed/param_and_grad_buffer.py (rerun state machine)",
     "RuntimeError: Rank 3, node gpu-12, device 3, iteration 1200: Unexpected result nan (message='found NaN "
     "in local grad norm for bucket #0 in backward pass before data-parallel communication collective')",
     "nan-loss:loss-diverged"),
    # torch's CPU allocator (c10/core/impl/alloc_cpu.cpp) in its Windows-like wording
    ("pytorch c10/core/impl/alloc_cpu.cpp",
     "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you "
     "tried to allocate 37984010240 bytes.",
     "memory-growth:host-memory-pressure"),
    ("pytorch c10/core/impl/alloc_cpu.cpp",
     "[enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to "
     "allocate 911360 bytes.",
     "memory-growth:host-memory-pressure"),
]


@pytest.mark.parametrize(("source", "line", "conclusion"), CASES,
                         ids=[f"{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(source: str, line: str, conclusion: str) -> None:
    assert_first(line, source, conclusion)


# Ray 1.x's memory monitor (python/ray/memory_monitor.py): the node's memory, whichever runbook names it
RAY_1X_OOM = [
    "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node gpu-7 is used "
    "(241.3 / 251.8 GB). The top 10 memory consumers are:",
    "ray.exceptions.RayTaskError(RayOutOfMemoryError): ray::RolloutWorker.sample() (pid=5311, ip=10.0.0.3)",
]


@pytest.mark.parametrize("line", RAY_1X_OOM, ids=["message", "wrapped"])
def test_ray_1x_memory_monitor_is_the_hosts_memory(line: str) -> None:
    found = _found(line, "ray python/ray/memory_monitor.py")
    assert found and found[0][1] == "cause", found
    assert found[0][0] in ("cuda-oom:ray-memory-monitor", "ray-hang:host-out-of-memory"), found


# Ray's WorkerCrashedError (python/ray/exceptions.py): a consequence; the cause is in the worker's own log
@pytest.mark.parametrize("line", [
    "ray.exceptions.WorkerCrashedError: The worker died unexpectedly while executing this task. Check "
    "python-core-worker-*.log files for more information.",
    "(raylet) The worker died unexpectedly while executing this task. Check python-core-worker-*.log files "
    "for more information.",
], ids=["exception", "message"])
def test_a_crashed_ray_worker_is_a_knock_on(line: str) -> None:
    found = _found(line, "ray python/ray/exceptions.py")
    assert found[:1] == [("ray-hang:collect-never-returns", "knock-on")], found


# Near misses: the same shape or the same words, another failure (or none)
NEAR_MISSES = [
    # another driver error through the same check macro: not memory
    ("pytorch c10/cuda/CUDAException.h", "RuntimeError: CUDA driver error: invalid argument",
     "cuda-oom:oom-batch-or-model"),
    # SGLang's KV pool full at run time (a batch, not the start-up sizing)
    ("sglang srt/mem_cache/common.py",
     "RuntimeError: Prefill out of memory. Try to lower your batch size.", "cuda-oom:kv-cache-too-small"),
    # SGLang's own memory report at load: nothing held elsewhere
    ("sglang srt/model_executor/model_runner.py",
     "[2025-06-01 10:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
     "avail mem=62.31 GB, mem usage=14.99 GB.", "cuda-oom:gpu-held-by-other-process"),
    # a GPU that fell off the bus is not /dev/shm
    ("NVIDIA driver", "NVRM: GPU at PCI:0000:3b:00: GPU has fallen off the bus.",
     "cuda-oom:dataloader-shm-exhausted"),
    # a write that fails on an ordinary file is not torch's shared memory
    ("pytorch aten/src/ATen/MapAllocator.cpp",
     "RuntimeError: unable to write to file </scratch/cache/tokens.bin>",
     "cuda-oom:dataloader-shm-exhausted"),
    # a torch OOM inside a Ray task is the GPU's memory, not Ray's memory monitor
    ("ray python/ray/exceptions.py",
     "ray.exceptions.RayTaskError(OutOfMemoryError): ray::Trainer.step() (pid=811, ip=10.0.0.4) "
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
     "cuda-oom:ray-memory-monitor"),
    # the GCS connect warning alone: a slow start that then joins prints it too
    ("ray src/ray/rpc/gcs_server/gcs_rpc_client.h",
     "[2025-03-01 22:48:01,851 W 6578 6578] gcs_rpc_client.h:151: Failed to connect to GCS at address "
     "10.1.2.3:6379 within 5 seconds.", "ray-hang:ray-unresponsive"),
    # joining a cluster that is there
    ("ray python/ray/_private/worker.py",
     "2025-03-01 10:00:00,000\tINFO worker.py:1514 -- Connecting to existing Ray instance at address: "
     "10.0.0.1:6379...", "ray-hang:no-ray-cluster"),
    # vLLM's placement group ready: the engine goes on
    ("vllm executor/ray_utils.py",
     "INFO 02-02 19:54:31 ray_distributed_executor.py:176] use_ray_spmd_worker: True",
     "ray-hang:infeasible-resources"),
    # zero_to_fp32 on a directory that holds its files: the script's own progress
    ("deepspeed utils/zero_to_fp32.py",
     "Processing zero checkpoint '/ckpt/global_step100'", "checkpoint-problems:checkpoint-missing"),
    # the disk-usage warning of Ray's file-system monitor precedes failures of every kind: not a cause alone
    ("ray src/ray/common/file_system_monitor.cc",
     "(raylet) [2024-05-02 11:03:14,221 E 41230 41261] (raylet) file_system_monitor.cc:111: "
     "/tmp/ray/session_2024-05-02_10-55-01_123456_41000 is over 95% full, available space: 2438410240; "
     "capacity: 232947798016. Object creation will fail if spilling is required.", "host-faults:disk-full"),
    # a rank's LOCAL_RANK past the last GPU: a launch mistake, not a missing driver or a missing arch
    ("CUDA runtime cudaErrorInvalidDevice", "RuntimeError: CUDA error: invalid device ordinal",
     "gpu-driver-hang:gpu-unavailable"),
    ("CUDA runtime cudaErrorInvalidDevice", "RuntimeError: CUDA error: invalid device ordinal",
     "extension-errors:gpu-arch-not-built"),
    # nvcc refusing an option is not an architecture it does not know
    ("nvcc", "nvcc fatal   : Unknown option '-fopenmp'", "extension-errors:extension-cuda-mismatch"),
    # the writer's short write is the disk filling, not a corrupt file read
    ("pytorch caffe2/serialize/inline_container.cc",
     "RuntimeError: [enforce fail at inline_container.cc:595] . PytorchStreamWriter failed writing file "
     "data/12: file write failed", "checkpoint-problems:checkpoint-corrupt"),
    # a git-lfs pointer read by pickle is a bad file, not weights_only refusing it
    ("python pickle", "_pickle.UnpicklingError: invalid load key, 'v'.",
     "checkpoint-problems:weights-only-refused"),
    # the tokenizer, not the weights
    ("transformers tokenization_utils_base.py",
     "OSError: Can't load tokenizer for 'outputs/final'. If you were trying to load it from "
     "'https://huggingface.co/models', make sure you don't have a local directory with the same name.",
     "checkpoint-problems:checkpoint-missing"),
    # DeepSpeed's first overflows at a large scale are its warm-up, not a collapse
    ("deepspeed runtime/fp16/fused_optimizer.py",
     "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 65536, reducing to "
     "32768", "nan-loss:fp16-overflow"),
    # a finite norm clipped as asked
    ("pytorch torch/nn/utils/clip_grad.py",
     "step 1200 | grad norm: 3.214 | clipped to 1.0", "nan-loss:loss-diverged"),
    # the GPU's memory, not the host's
    ("pytorch c10/cuda/CUDACachingAllocator.cpp",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
     "memory-growth:host-memory-pressure"),
]


@pytest.mark.parametrize(("source", "line", "not_this"), NEAR_MISSES,
                         ids=[f"not-{c[2]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_is_not_read_as_the_family(source: str, line: str, not_this: str) -> None:
    assert_never_cause(line, source, not_this)
