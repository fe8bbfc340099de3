"""Message families of session 42's sweep s3: an inference engine that finds no GPU to run on (vLLM's
platform detection and DeviceConfig, SGLang's get_device, NVML's driver not loaded); the trainer-to-engine
weight-update group that does not form (SGLang's init_weights_update_group); vLLM's custom all-reduce
warning for lack of P2P, which must not hide a later error; vLLM's reports that one of its processes
failed at start-up or a worker failed, knock-ons of the error above them. Two or more messages of each
family read to their conclusion, and near misses in similar words that must read otherwise. The
wordings are the libraries' own (the source file is named beside each family)."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# vllm/v1/engine/core_client.py (0.9 on): the API server's error after the engine core process failed
CORE_CLIENT = (
    "(APIServer pid=1) Traceback (most recent call last):\n"
    '(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core_client.py", '
    "line 722, in wait_for_engine_startup\n"
    "(APIServer pid=1)     raise RuntimeError(\n"
    "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core "
    "proc(s): {}")

# (family, text, conclusion, role of the first match)
CASES = [
    # vllm/platforms/__init__.py resolve_current_platform_cls_qualname (0.6.4 on): no platform plugin answered
    ("vllm-no-platform",
     "INFO 03-25 13:59:21 [__init__.py:260] No platform detected, vLLM is running on UnspecifiedPlatform\n"
     "INFO 03-25 13:59:23 [api_server.py:977] vLLM API server version 0.8.1",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    ("vllm-no-platform",
     "Defaulted container \"vllm\" out of: vllm, routing-proxy (init)\n"
     "INFO 11-20 08:01:02 __init__.py:187] No platform detected, vLLM is running on UnspecifiedPlatform",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    # vllm/config.py DeviceConfig (0.6.4-0.9) and vllm/config/device.py (0.10 on, with the DEBUG hint):
    # device="auto" on UnspecifiedPlatform
    ("vllm-no-platform",
     '  File "/usr/local/lib/python3.12/dist-packages/vllm/config.py", line 1433, in __init__\n'
     '    raise RuntimeError("Failed to infer device type")\n'
     "RuntimeError: Failed to infer device type",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    ("vllm-no-platform",
     '  File "/usr/local/lib/python3.12/dist-packages/vllm/config/device.py", line 58, in __post_init__\n'
     "    raise RuntimeError(\n"
     "RuntimeError: Failed to infer device type, please set the environment variable "
     "`VLLM_LOGGING_LEVEL=DEBUG` to turn on verbose logging to help debug the issue.",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    # vllm/platforms/__init__.py cuda_platform_plugin at VLLM_LOGGING_LEVEL=DEBUG: NVML saw no GPU
    ("vllm-no-platform",
     "DEBUG 05-02 10:00:00 [__init__.py:51] CUDA platform is not available because no GPU is found.\n"
     "INFO 05-02 10:00:00 [__init__.py:253] No platform detected, vLLM is running on UnspecifiedPlatform",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    # sglang/srt/utils.py get_device(): the accelerators it lists grew over releases
    ("sglang-no-accelerator",
     '  File "/sgl-workspace/sglang/python/sglang/srt/utils.py", line 1315, in get_device\n'
     '    raise RuntimeError("No accelerator (CUDA, XPU, HPU) is available.")\n'
     "RuntimeError: No accelerator (CUDA, XPU, HPU) is available.",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    ("sglang-no-accelerator",
     "RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) is available.",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    # NVML_ERROR_DRIVER_NOT_LOADED: pynvml's exception, and vLLM's detection logging it at DEBUG
    ("nvml-driver-not-loaded",
     "pynvml.NVMLError_DriverNotLoaded: Driver Not Loaded",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    ("nvml-driver-not-loaded",
     "DEBUG 05-02 10:00:00 [__init__.py:79] Exception happens when checking CUDA platform: Driver Not "
     "Loaded\n"
     "DEBUG 05-02 10:00:00 [__init__.py:99] CUDA platform is not available because: Driver Not Loaded",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    # nvidia-container-cli starting a `--gpus` container on a host without its driver loaded
    ("nvml-driver-not-loaded",
     "docker: Error response from daemon: failed to create task for container: failed to create shim task: "
     "OCI runtime create failed: runc create failed: unable to start container process: error during "
     "container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: "
     "Auto-detected mode as 'legacy'\n"
     "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    # HIP's hipErrorNoDevice as torch (ROCm build) raises it, and vLLM's ROCm detection at DEBUG
    ("hip-no-device",
     "RuntimeError: HIP error: no ROCm-capable device is detected\n"
     "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
     "might be incorrect.",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    ("hip-no-device",
     "DEBUG 05-02 10:00:00 [__init__.py:120] ROCm platform is not available because no GPU is found.",
     "gpu-driver-hang:gpu-unavailable", "cause"),
    # moby daemon/devices.go: `--gpus` asked of a Docker with no NVIDIA container toolkit registered
    ("docker-no-gpu-driver",
     'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
     "gpu-driver-hang:driver-libraries-missing", "cause"),
    ("docker-no-gpu-driver",
     "Error response from daemon: could not select device driver \"nvidia\" with capabilities: [[gpu]]",
     "gpu-driver-hang:driver-libraries-missing", "cause"),
    # sglang/srt/model_executor/model_runner.py init_weights_update_group: the weight-update group's barrier
    # (newer releases) failing, and the error it logs when init_custom_process_group raises
    ("weight-update-group",
     "[2025-03-05 03:55:55 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
     '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 463, in '
     "init_weights_update_group\n"
     "    dist.barrier(group=self._model_update_group, device_ids=[self.gpu_id])\n"
     "torch.distributed.DistBackendError: [2] is setting up NCCL communicator and retrieving ncclUniqueId "
     "from [0] via c10d key-value store by key '0', but store->get('0') got error: failed to format addr, "
     "unknown family=0",
     "rlhf-hang:workers-in-rendezvous", "knock-on"),
    ("weight-update-group",
     "[2025-01-10 10:30:00 TP0] Failed to initialize custom process group: [1] is setting up NCCL "
     "communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
     "store->get('0') got error: Socket Timeout.",
     "rlhf-hang:workers-in-rendezvous", "knock-on"),
    ("weight-update-group",
     "[2025-01-10 10:30:00 TP1] Failed to initialize custom process group: wait timeout after 600000ms, "
     "keys: /default_pg/0//nccl/0/0.",
     "rlhf-hang:workers-in-rendezvous", "knock-on"),
    # vLLM's RLHF example worker extension (examples/offline_inference/rlhf_utils.py) names it
    # init_weight_update_group; the store's host (the trainer) hung up on it
    ("weight-update-group",
     '  File "/workspace/rlhf_utils.py", line 37, in init_weight_update_group\n'
     "    self.model_update_group = stateless_init_process_group(\n"
     "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did "
     "the remote server shutdown or crash?",
     "rlhf-hang:workers-in-rendezvous", "knock-on"),
    # vllm distributed/device_communicators/custom_all_reduce.py: the start-up warning, alone
    ("custom-allreduce-no-p2p",
     "WARNING 06-01 10:00:00 [custom_all_reduce.py:137] Custom allreduce is disabled because your platform "
     "lacks GPU P2P capability or P2P test failed. To silence this warning, specify "
     "disable_custom_all_reduce=True explicitly.",
     "nccl-errors:p2p-redirected", "knock-on"),
    ("custom-allreduce-no-p2p",
     "(VllmWorker rank=1 pid=402) WARNING 02-11 09:00:00 [custom_all_reduce.py:84] Custom allreduce is "
     "disabled because your platform lacks GPU P2P capability or P2P test failed. To silence this warning, "
     "specify disable_custom_all_reduce=True explicitly.",
     "nccl-errors:p2p-redirected", "knock-on"),
    # vllm/v1/engine/core.py run_engine_core: logger.exception when EngineCoreProc() raised
    ("vllm-engine-start-failed",
     "(EngineCore_DP0 pid=144) ERROR 08-18 20:42:56 [core.py:1330] EngineCore failed to start.\n"
     "(EngineCore_DP0 pid=144) ERROR 08-18 20:42:56 [core.py:1330] Traceback (most recent call last):",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("vllm-engine-start-failed",
     "ERROR 05-21 20:01:47 [core.py:493] EngineCore failed to start.",
     "ddp-errors:rank-failed-first", "knock-on"),
    # vllm/v1/engine/core_client.py: 0.8 without, 0.9 on with the failed processes
    ("vllm-engine-core-init-failed", CORE_CLIENT, "ddp-errors:rank-failed-first", "knock-on"),
    ("vllm-engine-core-init-failed",
     "RuntimeError: Engine core initialization failed. See root cause above.",
     "ddp-errors:rank-failed-first", "knock-on"),
    # vllm/entrypoints/openai/api_server.py (V0's MQLLMEngine) build_async_engine_client_from_engine_args
    ("vllm-v0-engine-process",
     '  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/openai/api_server.py", line 269, in '
     "build_async_engine_client_from_engine_args\n"
     "    raise RuntimeError(\n"
     "RuntimeError: Engine process failed to start. See stack trace for the root cause.",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("vllm-v0-engine-process",
     "[vllm] uncaught exception in pid=1\n"
     "RuntimeError: Engine process failed to start. See stack trace for the root cause.",
     "ddp-errors:rank-failed-first", "knock-on"),
    # vllm/v1/executor/multiproc_executor.py: a worker's error sent back over its RPC (0.8's tuple form too)
    ("vllm-worker-failed",
     "(EngineCore_DP0 pid=7279) ERROR 11-05 09:18:38 [core.py:781] RuntimeError: Worker failed with error "
     "'Dimension out of range (expected to be in range of [-1, 0], but got 1)', please check the stack "
     "trace above for the root cause",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("vllm-worker-failed",
     "ERROR 04-28 14:33:29 [core.py:387] RuntimeError: ('Worker failed with error %s, please check the "
     "stack trace above for the root cause', 'expected size 131072==32768, stride 128==128 at dim=0')",
     "ddp-errors:rank-failed-first", "knock-on"),
    # ... the worker's own report, and the executors' monitors seeing a worker process gone
    ("vllm-worker-died",
     "(VllmWorker rank=0 pid=281) ERROR 07-15 08:54:44 [multiproc_executor.py:522] WorkerProc hit an "
     "exception.\n"
     "(VllmWorker rank=0 pid=281) ERROR 07-15 08:54:44 [multiproc_executor.py:522] Traceback (most recent "
     "call last):",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("vllm-worker-died",
     "(EngineCore_DP0 pid=265) ERROR 02-27 10:31:24 [multiproc_executor.py:231] Worker proc VllmWorker-0 "
     "died unexpectedly, shutting down executor.",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("vllm-worker-died",
     "(EngineCore_DP0 pid=88) ERROR 03-02 12:00:00 [ray_executor_v2.py:464] RayWorkerProc rank=[3] died "
     "unexpectedly, shutting down executor.",
     "ddp-errors:rank-failed-first", "knock-on"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, the conclusion that must not come first, the one that must, or None)
NEAR_MISSES = [
    # a platform vLLM did detect (a CPU build, a TPU host, an out-of-tree plugin) is no missing GPU
    ("vllm-no-platform",
     "INFO 05-02 10:00:00 [__init__.py:241] Automatically detected platform cpu.\n"
     "INFO 05-02 10:00:01 [api_server.py:1043] vLLM API server version 0.8.5",
     "gpu-driver-hang:gpu-unavailable", None),
    ("vllm-no-platform",
     "INFO 05-02 10:00:00 [__init__.py:241] Automatically detected platform tpu.\n"
     "INFO 05-02 10:00:00 [__init__.py:174] Platform plugin ascend is activated",
     "gpu-driver-hang:gpu-unavailable", None),
    # torch's own empty device string names no engine and no GPU (a user's empty setting does the same)
    ("vllm-no-platform",
     "RuntimeError: Device string must not be empty",
     "gpu-driver-hang:gpu-unavailable", None),
    # someone else's accelerator check in other words
    ("sglang-no-accelerator",
     "RuntimeError: No accelerator (CUDA or MPS) available; the benchmark needs one",
     "gpu-driver-hang:gpu-unavailable", None),
    # NVML's other errors and a busy GPU are not a driver that is not loaded
    ("nvml-driver-not-loaded",
     "pynvml.NVMLError_NoPermission: Insufficient Permissions",
     "gpu-driver-hang:gpu-unavailable", None),
    # Docker asked for a device it knows, not for GPUs
    ("docker-no-gpu-driver",
     'docker: Error response from daemon: error gathering device information while adding custom device '
     '"/dev/nvidia0": no such file or directory.',
     "gpu-driver-hang:driver-libraries-missing", None),
    # the weight-update group's request and its success are no failure
    ("weight-update-group",
     "[2025-01-10 10:00:00 TP0] init custom process group: master_address=10.0.0.2, master_port=29600, "
     "rank_offset=1, rank=1, world_size=3, group_name=weight_update_group, backend=nccl\n"
     'INFO:     127.0.0.1:51234 - "POST /init_weights_update_group HTTP/1.1" 200 OK',
     "rlhf-hang:workers-in-rendezvous", None),
    # torch's error in the group names a specific cause: that comes first
    ("weight-update-group",
     "[2025-01-10 10:30:00 TP1] Failed to initialize custom process group: The client socket has timed out "
     "after 1800000ms while trying to connect to (10.0.0.2, 29600)..",
     "rlhf-hang:workers-in-rendezvous", "ddp-errors:master-unreachable"),
    # the same store error outside the weight-update group stays torch's
    ("weight-update-group",
     "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving "
     "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket "
     "Timeout",
     "rlhf-hang:workers-in-rendezvous", "ddp-errors:ranks-wait-for-peer"),
    # the P2P warning is vLLM running on with NCCL: a later OOM is the error
    ("custom-allreduce-no-p2p",
     "WARNING 06-01 10:00:00 [custom_all_reduce.py:137] Custom allreduce is disabled because your platform "
     "lacks GPU P2P capability or P2P test failed. To silence this warning, specify "
     "disable_custom_all_reduce=True explicitly.\n"
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity "
     "of 23.65 GiB of which 1.02 GiB is free.",
     "nccl-errors:p2p-redirected", "cuda-oom:oom-batch-or-model"),
    # the engine's own knock-ons give way to the error above them
    ("vllm-engine-core-init-failed",
     "(EngineCore_DP0 pid=6940) ValueError: Free memory on device cuda:1 (19.77/22.05 GiB) on startup is "
     "less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce "
     "GPU memory used by other processes.\n"
     "(EngineCore_DP0 pid=6940) ERROR 08-18 20:42:56 [core.py:1330] EngineCore failed to start.\n"
     + CORE_CLIENT,
     "ddp-errors:rank-failed-first", "cuda-oom:gpu-held-by-other-process"),
    ("vllm-engine-core-init-failed",
     "INFO 03-25 13:59:21 [__init__.py:260] No platform detected, vLLM is running on UnspecifiedPlatform\n"
     "ERROR 03-25 13:59:30 [core.py:493] EngineCore failed to start.\n"
     "RuntimeError: Engine core initialization failed. See root cause above.",
     "ddp-errors:rank-failed-first", "gpu-driver-hang:gpu-unavailable"),
    ("vllm-worker-failed",
     "(VllmWorker rank=1 pid=77) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
     "GPU 1 has a total capacity of 79.19 GiB of which 1.20 GiB is free.\n"
     "(EngineCore_DP0 pid=50) RuntimeError: Worker failed with error 'CUDA out of memory. Tried to allocate "
     "2.00 GiB. GPU 1 has a total capacity of 79.19 GiB of which 1.20 GiB is free.', please check the stack "
     "trace above for the root cause",
     "ddp-errors:rank-failed-first", "cuda-oom:oom-batch-or-model"),
    # the engine dying at run time follows a hung worker as well as a failed one: not a rank that failed
    ("vllm-engine-dead",
     "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) "
     "for the root cause.",
     "ddp-errors:rank-failed-first", None),
    ("vllm-engine-dead",
     "ERROR 03-18 22:29:46 [serving_chat.py:677] vllm.engine.multiprocessing.MQEngineDeadError: Engine loop "
     "is not running. Inspect the stacktrace to find the original error: RuntimeError('Engine process (pid "
     "402494) died.').",
     "ddp-errors:rank-failed-first", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
