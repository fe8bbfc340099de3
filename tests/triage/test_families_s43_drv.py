"""Message families of session 43's driver sweep: a GPU driver older than the CUDA runtime the job was built
for, in the words of torch (c10/cuda/CUDAFunctions.cpp), the CUDA runtime (errors 35, 804 and 222, as CuPy,
NCCL, XLA and NVIDIA's own servers print them) and nvidia-container-cli (libnvidia-container src/cli/dsl.c).
Two or more messages of each family read to gpu-driver-hang's driver-too-old-for-cuda, and near misses in
similar words read otherwise. The wordings are the libraries' own (the source is named beside each family)."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

TOO_OLD = "gpu-driver-hang:driver-too-old-for-cuda"
# c10/cuda/CUDAFunctions.cpp device_count_impl, cudaErrorInsufficientDriver with a driver found
TORCH_TAIL = (
    "Please update your GPU driver by downloading and installing a new version from the URL: "
    "http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a "
    "PyTorch "
    "version that has been compiled with your version of the CUDA driver.")

# (family, text, conclusion, role of the first match)
CASES = [
    # torch raises it on first CUDA use ...
    ("torch-driver-too-old",
     '  File "/opt/venv/lib/python3.10/site-packages/torch/cuda/__init__.py", line 302, in _lazy_init\n'
     "    torch._C._cuda_init()\n"
     "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). " + TORCH_TAIL,
     TOO_OLD, "cause"),
    # ... and warns it from torch.cuda.is_available() (vllm-project/vllm#11623's collect_env)
    ("torch-driver-too-old",
     "/usr/local/lib64/python3.8/site-packages/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: "
     "The NVIDIA driver on your system is too old (found version 11040). " + TORCH_TAIL
     + " (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)\n"
     "  return torch._C._cuda_getDeviceCount() > 0\n"
     "PyTorch version: 2.4.0+cu121",
     TOO_OLD, "cause"),
    # ... or only its first words, as a report quotes them (vllm-project/vllm#1772)
    ("torch-driver-too-old", "RuntimeError: The NVIDIA driver on your system is too old", TOO_OLD, "cause"),
    # vLLM's engine start on a CUDA 13 wheel with a 570 driver (CUDA 12.8)
    ("torch-driver-too-old",
     "(EngineCore_DP0 pid=4121) ERROR 06-11 09:12:03 [core.py:708] EngineCore failed to start.\n"
     "(EngineCore_DP0 pid=4121) ERROR 06-11 09:12:03 [core.py:708] RuntimeError: The NVIDIA driver on your "
     "system is too old (found version 12080). " + TORCH_TAIL,
     TOO_OLD, "cause"),
    # the CUDA runtime's cudaErrorInsufficientDriver (35), as CuPy and catboost raise it and NCCL's
    # CUDACHECK warns it
    ("cuda-insufficient-driver",
     "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version is "
     "insufficient for CUDA runtime version",
     TOO_OLD, "cause"),
    ("cuda-insufficient-driver",
     "CatBoostError: catboost/cuda/cuda_lib/cuda_base.h:281: CUDA error 35: CUDA driver version is "
     "insufficient "
     "for CUDA runtime version",
     TOO_OLD, "cause"),
    ("cuda-insufficient-driver",
     "node-3:2210:2210 [0] init.cc:1861 NCCL WARN Cuda failure 'CUDA driver version is insufficient for CUDA "
     "runtime version'",
     TOO_OLD, "cause"),
    # 804: a newer CUDA's forward-compatibility libcuda on a GPU that does not support it, as torch warns
    # it ...
    ("cuda-compat-not-supported",
     "/opt/conda/lib/python3.11/site-packages/torch/cuda/__init__.py:129: UserWarning: CUDA initialization: "
     "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
     "NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted "
     "on non supported HW (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)\n"
     "  return torch._C._cuda_getDeviceCount() > 0",
     TOO_OLD, "cause"),
    # ... XLA's cuInit (TensorFlow, JAX) ...
    ("cuda-compat-not-supported",
     "2025-01-27 13:52:31.859374: E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:152] failed "
     "call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: "
     "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: "
     "forward compatibility was attempted on non supported HW",
     TOO_OLD, "cause"),
    # ... and nvidia-container-cli, lower-case, failing a container's start
    ("cuda-compat-not-supported",
     "docker: Error response from daemon: OCI runtime create failed: container_linux.go:349: starting "
     "container process caused: process_linux.go:449: container init caused: running prestart hook 0 caused: "
     "error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: initialization error: cuda "
     "error: "
     "forward compatibility was attempted on non supported hw: unknown.",
     TOO_OLD, "cause"),
    # 222: PTX from a newer toolkit than the driver (triton-inference-server/server#2193,
    # fauxpilot/fauxpilot#19)
    ("ptx-unsupported-toolchain",
     "E1029 03:56:30.380349 1 model_repository_manager.cc:899] failed to load 'some_model' version 6: "
     "Internal: unable to auto-complete model configuration for 'some_model', failed to load model: CUDA "
     "runtime implicit "
     "initialization on GPU:0 failed. Status: the provided PTX was compiled with an unsupported toolchain.",
     TOO_OLD, "cause"),
    ("ptx-unsupported-toolchain",
     "terminate called after throwing an instance of 'std::runtime_error'\n  what():  [FT][ERROR] CUDA "
     "runtime error: the provided PTX was compiled with an unsupported toolchain. "
     "/workspace/build/fastertransformer_backend/build/_deps/repo-ft-src/src/fastertransformer/utils/"
     "cuda_utils.h:393",
     TOO_OLD, "cause"),
    ("ptx-unsupported-toolchain",
     "torch.AcceleratorError: CUDA error: the provided PTX was compiled with an unsupported toolchain.\n"
     "Search for `cudaErrorUnsupportedPtxVersion' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
     "group__CUDART__TYPES.html for more information.\nCUDA kernel errors might be asynchronously reported "
     "at some other API call, so the stacktrace below might "
     "be incorrect.",
     TOO_OLD, "cause"),
    # nvidia-container-cli's requirement check of the image's NVIDIA_REQUIRE_CUDA (src/cli/dsl.c dsl_evaluate)
    ("container-requires-newer-cuda",
     "docker: Error response from daemon: failed to create task for container: failed to create shim task: "
     "OCI runtime create failed: runc create failed: unable to start container process: error during "
     "container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: "
     "Auto-detected mode as 'legacy'\nnvidia-container-cli: requirement error: unsatisfied condition: "
     "cuda>=12.4, please update your driver to "
     "a newer version, or use an earlier cuda container: unknown.",
     TOO_OLD, "cause"),
    ("container-requires-newer-cuda",
     "Error: failed to start containers: vllm\nnvidia-container-cli: requirement error: unsatisfied "
     "condition: cuda>=12.9, please update your driver to "
     "a newer version, or use an earlier cuda container: unknown",
     TOO_OLD, "cause"),
    # the oldest releases formatted the failed expression with spaces
    ("container-requires-newer-cuda",
     "running prestart hook 0 caused \"error running hook: exit status 1, stdout: , stderr: exec command: "
     "[/usr/bin/nvidia-container-cli --load-kmods configure --ldconfig=@/sbin/ldconfig.real --device=all "
     "--compute --utility --require=cuda>=10.1 --pid=2840 "
     "/var/lib/docker/overlay2/4b1f/merged]\\nnvidia-container-cli: "
     "requirement error: unsatisfied condition: cuda >= 10.1\\n\"\": unknown.",
     TOO_OLD, "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, the conclusion that must not come first, the one that must, or None)
NEAR_MISSES = [
    # no driver at all is the driver not reachable, not a driver too old (the same torch function)
    ("torch-driver-too-old",
     "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
     "installed a driver from http://www.nvidia.com/Download/index.aspx",
     TOO_OLD, "gpu-driver-hang:gpu-unavailable"),
    # the user-space library does not match the loaded kernel module: a reboot, not a wheel
    ("torch-driver-too-old",
     "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.126",
     TOO_OLD, "gpu-driver-hang:gpu-unavailable"),
    # no GPU visible to CUDA at all (cudaErrorNoDevice)
    ("cuda-insufficient-driver",
     "RuntimeError: CUDA error: no CUDA-capable device is detected\nCUDA kernel errors might be "
     "asynchronously reported at some other API call, so the stacktrace below might "
     "be incorrect.",
     TOO_OLD, "gpu-driver-hang:gpu-unavailable"),
    # a container requirement on the GPU's brand or architecture, not on CUDA
    ("container-requires-newer-cuda",
     "nvidia-container-cli: requirement error: unsatisfied condition: brand = tesla",
     TOO_OLD, None),
    # the toolkit's nvcc differs from torch's CUDA: an extension build problem, not the driver
    ("cuda-insufficient-driver",
     "RuntimeError: The detected CUDA version (11.4) mismatches the version that was used to compile PyTorch "
     "(12.1). Please make sure to use the same CUDA versions.",
     TOO_OLD, None),
    # a GPU too old for the build is an architecture, not a driver, matter
    ("ptx-unsupported-toolchain",
     "RuntimeError: CUDA error: no kernel image is available for execution on the device",
     TOO_OLD, None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
