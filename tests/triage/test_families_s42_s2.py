"""Message families of session 42's sweep s2: a GPU without bf16 (or too old for torch.compile's Triton) in
the words of torch and xFormers; NCCL's missing socket interface behind torch's
`ncclInternalError`; HCCL's (Ascend) failed link setup between two ranks; mmcv's fp16 loss scaler halved
step after step. Two or more messages of each family read to their conclusion, and near misses in similar
words that must read otherwise. The wordings are the libraries' own (the source file is named beside each
family)."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# torch's DistBackendError for ncclResult_t 3 (ProcessGroupNCCL.cpp / NCCLUtils), then NCCL's last error
NCCL_INTERNAL = (
    "[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1970, internal error - please report this issue to the NCCL developers, NCCL "
    "version 2.20.5\n"
    "[rank1]: ncclInternalError: Internal check failed.\n"
    "[rank1]: Last error:\n")

# (family, text, conclusion, role of the first match)
CASES = [
    # torch/amp/autocast_mode.py: autocast(dtype=torch.bfloat16) when torch.cuda.is_bf16_supported() is false
    ("bf16-unsupported",
     '  File "/opt/conda/lib/python3.11/site-packages/torch/amp/autocast_mode.py", line 266, in __init__\n'
     "    raise RuntimeError(\n"
     "RuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype to float16.",
     "extension-errors:gpu-arch-too-old", "cause"),
    ("bf16-unsupported",
     "[rank0]: RuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype to float16.",
     "extension-errors:gpu-arch-too-old", "cause"),
    # xformers/ops/fmha/common.py not_supported_reasons: bf16 on compute capability below 8
    ("bf16-unsupported",
     "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:\n"
     "     query       : shape=(1, 1024, 16, 64) (torch.bfloat16)\n"
     "`cutlassF-pt` is not supported because:\n"
     "    bf16 is only supported on A100+ GPUs",
     "extension-errors:gpu-arch-too-old", "cause"),
    # vLLM's check (worker / platforms): its own wording, already read before this sweep
    ("bf16-unsupported",
     "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla "
     "V100-SXM2-32GB GPU has compute capability 7.0. You can use float16 instead by explicitly setting the "
     "`dtype` flag in CLI, for example: --dtype=half.",
     "extension-errors:gpu-arch-too-old", "cause"),
    # torch/_inductor/exc.py GPUTooOldForTriton: torch.compile on a GPU below compute capability 7.0
    ("triton-gpu-too-old",
     "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
     "RuntimeError: Found Tesla P40 which is too old to be supported by the triton GPU compiler, which is "
     "used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of "
     "CUDA capability 6.1",
     "extension-errors:gpu-arch-too-old", "cause"),
    ("triton-gpu-too-old",
     "torch._inductor.exc.GPUTooOldForTriton: Found NVIDIA GeForce GTX 1080 Ti which is too old to be "
     "supported by the triton GPU compiler, which is used as the backend. Triton only supports devices of "
     "CUDA Capability >= 7.0, but your device is of CUDA capability 6.1",
     "extension-errors:gpu-arch-too-old", "cause"),
    # NCCL bootstrap.cc / net_socket.cc: no interface matches NCCL_SOCKET_IFNAME; torch wraps it as
    # ncclInternalError, which must not outrank NCCL's own last error
    ("nccl-no-socket-interface",
     NCCL_INTERNAL + "[rank1]: Bootstrap : no socket interface found",
     "nccl-errors:socket-ifname-wrong", "cause"),
    ("nccl-no-socket-interface",
     NCCL_INTERNAL + "[rank1]: NET/Socket : no interface found",
     "nccl-errors:socket-ifname-wrong", "cause"),
    ("nccl-no-socket-interface",
     "node3:2231:2231 [0] NCCL WARN Bootstrap : no socket interface found\n"
     "node3:2231:2231 [0] NCCL INFO init.cc:1720 -> 3\n"
     "RuntimeError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, "
     "internal error, NCCL version 2.14.3\n"
     "ncclInternalError: Internal check failed. This is either a bug in NCCL or due to memory corruption",
     "nccl-errors:socket-ifname-wrong", "cause"),
    # hcomm transport_manager.cc: the link between two ranks could not be set up
    # ([InitChannelStage][RunFailed] with the createLink parameters), and EI0009 as torch_npu prints it
    ("hccl-link-setup",
     "[ERROR] HCCL(3321,python3):2025-11-20-18:18:03.114.306 [transport_manager.cc:954] [3399]"
     "[InitChannelStage][RunFailed]Transport init error! createLink para:rank[2]-localUserrank[2]-"
     "localIpAddr[10.20.0.3/2], remoteRank[9]-remoteUserrank[9]-remoteIpAddr[10.20.0.8/1], machineType[0], "
     "linkMode[1], isUsedRdma[1], tag[AllReduce_group_name_4]\n"
     "[ERROR] HCCL(3321,python3):2025-11-20-18:18:03.114.500 [transport_manager.cc:470] [3350][Alloc]call "
     "trace: hcclRet -> 4",
     "nccl-errors:network-errors-in-log", "cause"),
    ("hccl-link-setup",
     "[ERROR] HCCL(871,python):2025-04-01-09:00:00.000.001 [hccl_communicator.cc:2210] [902]"
     "[Create][DestLink]"
     "Transport init error! createLink para:rank[0]-localUserrank[0]-localIpAddr[192.168.3.10], dst_rank[1]-"
     "remoteUserrank[1]-remote_ip_addr[192.168.3.11], machineType[1], serverId[192.168.3.10], linkMode[1], "
     "tag[HcomBroadcast_1]",
     "nccl-errors:network-errors-in-log", "cause"),
    ("hccl-link-setup",
     "EI0009: [PID: 5021] 2025-06-02-10:11:12.131.415 Transport init error. Reason: Device 3 transport init "
     "error.\n"
     "        Solution: Check other NPUs that are not reporting errors, or check if there are any "
     "abnormalities on the other end's NPU.",
     "nccl-errors:network-errors-in-log", "cause"),
    # hcomm detect_connect_anomalies.cc ProcessDetectionResults: the connect-timeout detector's banner
    ("hccl-link-setup",
     "[ERROR] HCCL(9921,):2026-01-05-03:04:05.100.226 [detect_connect_anomalies.cc:127] [9990]"
     "-------------------CONNECT TIMEOUT DETECT RESULT-----------------------\n"
     "[ERROR] HCCL(9921,):2026-01-05-03:04:05.100.244 [detect_connect_anomalies.cc:132] [9990]This node "
     "(server 10.1.1.2, device ID 1) detects that srcRank (server 10.1.1.2, device ID 1) fails to connect to "
     "dstRank (server 10.1.1.5, device ID 0).",
     "nccl-errors:network-errors-in-log", "cause"),
    # mmcv/runner/hooks/optimizer.py Fp16OptimizerHook (its own LossScaler): the scale halved step after step
    ("mmcv-fp16-overflow",
     "2023-06-15 04:03:40,870 - mmdet - WARNING - Check overflow, downscale loss scale to 512.0\n"
     "2023-06-15 04:03:41,870 - mmdet - WARNING - Check overflow, downscale loss scale to 256.0",
     "nan-loss:fp16-overflow", "cause"),
    ("mmcv-fp16-overflow",
     "2022-01-11 10:00:00,001 - mmseg - WARNING - Check overflow, downscale loss scale to 1.0\n"
     "2022-01-11 10:00:30,001 - mmseg - INFO - Iter [50/80000]\tlr: 1.000e-04, loss: nan",
     "nan-loss:fp16-overflow", "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, the conclusion that must not come first, the one that must, or None)
NEAR_MISSES = [
    # transformers/training_args.py: both wordings also fire with no GPU visible (a CPU-only torch, a driver
    # too old; older versions raise the Ampere one without looking for a GPU): not the GPU's age alone
    ("bf16-unsupported",
     "ValueError: Your setup doesn't support bf16/gpu. You need to assign use_cpu if you want to train the "
     "model on CPU.",
     "extension-errors:gpu-arch-too-old", None),
    # a GPU that has no kernel for its architecture is the build, not the GPU's age
    ("bf16-unsupported",
     "RuntimeError: CUDA error: no kernel image is available for execution on the device",
     "extension-errors:gpu-arch-too-old", "extension-errors:gpu-arch-not-built"),
    # ncclInternalError alone names no cause: not another NCCL than torch's
    ("nccl-no-socket-interface",
     NCCL_INTERNAL + "[rank1]: Proxy Call to rank 0 failed (Setup)",
     "nccl-errors:torch-nccl-mismatch", None),
    # ... while torch asking for a symbol its libnccl lacks still is
    ("nccl-no-socket-interface",
     "ImportError: /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so: undefined symbol: "
     "ncclCommRegister",
     "nccl-errors:socket-ifname-wrong", "nccl-errors:torch-nccl-mismatch"),
    # HCCL's link setup that succeeded, and EI0002's execution timeout (a collective timeout, not the link)
    ("hccl-link-setup",
     "[INFO] HCCL(5521,python3):2025-01-08-09:10:03.113.403 [transport_manager.cc:300] [5612]create "
     "transport link success, rank[4] remoteRank[12]",
     "nccl-errors:network-errors-in-log", None),
    ("hccl-link-setup",
     "EI0002: [PID: 4121] 2025-03-02-11:20:41.512.880 The wait execution of the Notify register times out. "
     "Reason: The Notify register has not received the Notify record from remote rank [1].",
     "nccl-errors:network-errors-in-log", "training-hang:crashed-collective-timeout"),
    # EI0006, a peer that never came to connect, stays ddp-errors' (a knock-on with nccl.network taxonomy)
    ("hccl-link-setup",
     "EI0006: [PID: 4121] 2025-07-01-00:40:04.135.732 Getting socket times out. Reason: Remote Rank did not "
     "send the data in time. Please check the reason for the rank being stuck",
     "nccl-errors:network-errors-in-log", "ddp-errors:ranks-wait-for-peer"),
    # the first halvings from mmcv's 2**32 are dynamic loss scaling at work, not an overflow that persists
    ("mmcv-fp16-overflow",
     "2023-06-15 04:03:40,870 - mmdet - WARNING - Check overflow, downscale loss scale to 2147483648.0\n"
     "2023-06-15 04:03:41,870 - mmdet - WARNING - Check overflow, downscale loss scale to 1073741824.0",
     "nan-loss:fp16-overflow", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
