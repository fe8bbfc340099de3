"""Message families of session 43's second sweep: an RDMA memory registration the NIC's driver refused (NCCL's
verbs wrapper, UCX, NIXL, Mooncake's transfer engine and the SGLang/vLLM code that calls it, aws-ofi-nccl),
NCCL's CUDA check on a GPU its build has no code for, and torch_npu's failed HCCL collective. Two or more
messages of each family read to their conclusion, and near misses in similar words read otherwise. The
wordings are the libraries' own (the source file is named beside each family)."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss, found

RDMA_REG = "nccl-errors:rdma-registration-failed"
LIMIT = "nccl-errors:resource-limit"
ARCH = "extension-errors:gpu-arch-not-built"
UNEXPLAINED = "nccl-errors:nccl-error-unexplained"

# (family, text, conclusion, role of the first match)
CASES = [
    # NCCL src/misc/ibvwrap.cc IBV_PTR_CHECK_ERRNO: WARN("Call to " name " failed with error %s",
    # strerror(errno)) for ibv_reg_mr, ibv_reg_mr_iova2 and ibv_reg_dmabuf_mr
    ("nccl-ibv-reg-mr",
     "gpu-node-07:20211:20477 [3] misc/ibvwrap.cc:182 NCCL WARN Call to ibv_reg_mr_iova2 failed with error "
     "Invalid argument\n"
     "gpu-node-07:20211:20477 [3] NCCL INFO transport/net_ib.cc:1872 -> 2",
     RDMA_REG, "cause"),
    ("nccl-ibv-reg-mr",
     "worker-2:551:602 [0] misc/ibvwrap.cc:206 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Bad "
     "address",
     RDMA_REG, "cause"),
    # UCX src/uct/ib/base/ib_md.c uct_ib_md_print_mem_reg_err_msg: "%s(address=%p, length=%zu, access=0x%lx)
    # failed: %s" (title ibv_reg_mr or ibv_reg_dmabuf_mr), with NIXL's UCX backend after it
    # (src/plugins/ucx/ucx_utils.cpp: NIXL_ERROR << ... ": failed to ucp_mem_map: " << ucs_status_string)
    ("ucx-ibv-reg-mr",
     "[1747812345.118201] [gpu3:7001:0]          ib_md.c:301  UCX  ERROR ibv_reg_mr(address=0x7f1c40000000, "
     "length=536870912, access=0x10000f) failed: Bad address",
     RDMA_REG, "cause"),
    ("nixl-ucp-mem-map",
     "E0708 11:02:33.001200 9120 ucx_utils.cpp:645] ucx context: failed to ucp_mem_map: Input/output error\n"
     "nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND",
     RDMA_REG, "cause"),
    # Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_context.cpp: PLOG(ERROR) <<
    # "Failed to register memory " << addr (glog appends ": strerror [errno]"),
    # tent/src/transport/rdma/context.cpp "Failed to register memory from ADDR to ADDR in RDMA device DEV",
    # and the dma-buf path's
    # "Failed to retrieve dmabuf for ADDR cuda error=..."
    ("mooncake-register-memory",
     "E1120 03:14:07.551010 4410 rdma_context.cpp:602] Failed to register memory 0x7a1e58000000: Invalid "
     "argument [22]",
     RDMA_REG, "cause"),
    ("mooncake-register-memory",
     "E1120 03:14:07.551010 4410 context.cpp:583] Failed to register memory from 0x7a1e58000000 to "
     "0x7a1e78000000 in RDMA device mlx5_2: Bad address [14]",
     RDMA_REG, "cause"),
    ("mooncake-register-memory",
     "E0302 08:00:01.200300 77 rdma_context.cpp:457] Failed to retrieve dmabuf for 140213514240000 cuda "
     "error=operation not supported",
     RDMA_REG, "cause"),
    # SGLang python/sglang/srt/disaggregation/mooncake/transfer_engine.py (and vLLM's Mooncake connectors):
    # raise RuntimeError("Mooncake memory registration failed.") when register_memory returns non-zero
    ("sglang-mooncake-register",
     '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/disaggregation/mooncake/'
     'transfer_engine.py", '
     "line 41, in register\n"
     '    raise RuntimeError("Mooncake memory registration failed.")\n'
     "RuntimeError: Mooncake memory registration failed.",
     RDMA_REG, "cause"),
    # aws-ofi-nccl (nccl_ofi_rdma.cpp register_rail_mr_buffer / nccl_ofi_sendrecv.cpp register_mr_buffers)
    ("aws-ofi-nccl-register",
     "ip-10-1-2-3:8801:8915 [4] nccl_ofi_rdma.cpp:1102 NCCL WARN NET/OFI Unable to register memory "
     "(type = 2) "
     "for device 4. RC: -22, Error: Invalid argument",
     RDMA_REG, "cause"),
    # Mooncake's ENOMEM is the locked-memory limit, as NCCL's and UCX's are
    ("mooncake-register-memory",
     "E0605 17:54:16.878770 1787 rdma_context.cpp:198] Failed to register memory 0x7f56e6600000: Cannot "
     "allocate memory [12]",
     LIMIT, "cause"),
    # torch_npu torch_npu/csrc/framework/OpParamMaker.cpp: `OPS function error: <op>, error code is N` for an
    # HCCL collective run as an NPU op (N an HcclResult of hccl_types.h), CANN's EI0006 (hcomm's error
    # catalogue, Communication_Error_Get_Socket `Getting socket times out. Reason: %s`) after it
    ("torch-npu-hccl-op",
     "[rank2]: RuntimeError: InnerRunOpApi:../torch_npu/csrc/framework/OpParamMaker.cpp:287 OPS function "
     "error: HcclAllgather, error code is 6\n"
     "[rank2]: [ERROR] 2025-08-02-10:11:12 (PID:5120, Device:2, RankID:2) ERR01100 OPS call acl api failed.\n"
     "[rank2]: EI0006: [PID: 5120] 2025-08-02-10:11:12.100.200 Getting socket times out. Reason: Remote Rank "
     "did not send the data in time. Please check the reason for the rank being stuck",
     UNEXPLAINED, "cause"),
    ("torch-npu-hccl-op",
     "RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: "
     "HcclBroadcast, error code is 9\n"
     "[ERROR] 2025-09-12-10:01:44 (PID:4406, Device:3, RankID:3) ERR01100 OPS call acl api failed.",
     UNEXPLAINED, "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# NCCL src/include/checks.h CUDACHECK (WARN("Cuda failure '%s'", cudaGetErrorString(err))) at enqueue.cc or
# init.cc, and torch's `Last error:` after ncclUnhandledCudaError: a libnccl with no code for this GPU
# (NVIDIA/nccl#1372). nccl-errors' torch-nccl-mismatch reads the same line first (its walk compares torch's
# NCCL with the one loaded); the architecture missing from the build comes right after it.
NO_CODE_FOR_GPU = [
    "node1:2336636:2336906 [0] enqueue.cc:58 NCCL WARN Cuda failure 'named symbol not found'\n"
    "node1:2336636:2336906 [0] enqueue.cc:47 NCCL WARN Cuda failure 'named symbol not found'",
    "torch.distributed.DistBackendError: NCCL error in: "
    "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
    "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
    "ncclUnhandledCudaError: Call to CUDA function failed.\n"
    "Last error:\n"
    "Cuda failure 'named symbol not found'",
    "node1:4411:4502 [3] init.cc:1630 NCCL WARN Cuda failure 'no kernel image is available for execution on "
    "the device'",
]


@pytest.mark.parametrize("text", NO_CODE_FOR_GPU, ids=[f"nccl-no-code-for-gpu-{i}" for i in range(3)])
def test_nccl_without_code_for_the_gpu_names_the_missing_architecture_second(text: str) -> None:
    matches = found(text, "nccl-no-code-for-gpu")
    assert matches[:2] == [("nccl-errors:torch-nccl-mismatch", "cause"), (ARCH, "cause")], matches


# (family, text, the conclusion that must not come first, the one that must, or None)
NEAR_MISSES = [
    # a verbs registration's ENOMEM is the locked-memory limit, not a buffer the NIC cannot pin
    ("nccl-ibv-reg-mr",
     "node3:881:902 [1] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot "
     "allocate memory",
     RDMA_REG, LIMIT),
    ("ucx-ibv-reg-mr",
     "[1765653660.705652] [gpu3:640743:0]           ib_md.c:287  UCX  ERROR "
     "ibv_reg_mr(address=0x15213b956010, "
     "length=65536, access=0xf) failed: Cannot allocate memory : Please set max locked memory (ulimit -l) to "
     "'unlimited' (current: 65536 kbytes)",
     RDMA_REG, LIMIT),
    # another verbs call that failed is a network error, not a registration
    ("nccl-ibv-reg-mr",
     "node3:881:902 [1] misc/ibvwrap.cc:236 NCCL WARN Call to ibv_modify_qp failed with error Invalid "
     "argument",
     RDMA_REG, "nccl-errors:network-errors-in-log"),
    # Mooncake failing to unregister, or an mcp tool failing to register, is no pinning refused
    ("mooncake-register-memory",
     "E1120 03:14:07.551010 4410 rdma_context.cpp:620] Failed to unregister memory 0x7a1e58000000",
     RDMA_REG, None),
    ("mooncake-register-memory",
     "WARNING:agent.tools:Failed to register Memory MCP client: connection refused",
     RDMA_REG, None),
    # torch_npu's non-HCCL op failure is no collective, and the communicator's set-up (HCCL function error:
    # hcclCommInitRootInfoConfig) with EI0006 stays a peer that never came
    ("torch-npu-hccl-op",
     "RuntimeError: InnerRun:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:194 OPS function error: "
     "MaxPoolGradWithArgmaxV1, error code is 500002\n"
     "[ERROR] 2024-12-19-12:06:38 (PID:1940485, Device:0, RankID:-1) ERR01100 OPS call acl api failed",
     UNEXPLAINED, None),
    ("torch-npu-hccl-op",
     "[rank3]: RuntimeError: create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:149 HCCL "
     "function error: hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), "
     "error code is 7\n"
     "[rank3]: EI0006: [PID: 88123] 2025-05-20-09:01:44.510.002 Getting socket times out. Reason: 1. The "
     "remote does not initiate a connect request. some NPUs in the cluster are abnormal.",
     UNEXPLAINED, "ddp-errors:ranks-wait-for-peer"),
    # torch's own CUDA error of the same name is not NCCL's, and not read as an architecture missing
    ("nccl-no-code-for-gpu",
     "[rank0]: RuntimeError: CUDA error: named symbol not found",
     ARCH, None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
