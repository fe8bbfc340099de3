"""Message families of the communication stacks and launchers the earlier sweeps left out (Huawei Ascend's
HCCL and torch_npu, PaddlePaddle's launchers, Kubeflow, Lightning, UCX, aws-ofi-nccl, the mlx5 driver and the
NVSwitch driver): two or more messages of each family read to their conclusion, and near misses in similar
words that must read otherwise. The wordings are the libraries' own (the source file, or the thread a family
was read from, is named beside each family)."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion, role of the first match)
CASES = [
    # CANN's HCCL error catalogue (hcomm's error messages, EI0002 Communication_Error_Timeout: `The wait
    # execution of the Notify register times out. Reason: The Notify register has not received the Notify
    # record from remote rank: [%s]...`): HCCL's collective timeout (HCCL_EXEC_TIMEOUT), the NPU's form of the
    # NCCL watchdog's timeout
    ("hccl-notify-timeout",
     "EI0002: [PID: 20417] 2025-02-11-08:30:12.004.321 The wait execution of the Notify register times out. "
     "Reason: The Notify register has not received the Notify record from remote rank [5].base information: "
     "[streamID:[7], taskID[12], taskType[Notify Wait], tag[AllReduce_10.1.0.4%eth0_60000_0_1739262612]].",
     "training-hang:crashed-collective-timeout", "knock-on"),
    # as MindSpore wraps it (`Run task for graph:kernel_graph_N error! ... Ascend Error Message:EI0002: ...`)
    ("hccl-notify-timeout",
     "RuntimeError: Run task for graph:kernel_graph_3 error! The details refer to 'Ascend Error Message'.\n"
     "EI0002: The wait execution of the Notify register times out. Reason: The Notify register has not "
     "received "
     "the Notify record from remote rank [2].",
     "training-hang:crashed-collective-timeout", "knock-on"),
    # EI0006 Communication_Error_Get_Socket (`Getting socket times out. Reason: %s`): a peer never connected
    # while the communicator was set up (HCCL_CONNECT_TIMEOUT)
    # https://github.com/hiyouga/LlamaFactory/issues/5071,
    # https://github.com/vllm-project/vllm-ascend/issues/486
    ("hccl-socket-timeout",
     "EI0006: 2024-10-02-14:20:31.117.204 Getting socket times out. Reason: Remote Rank did not send the "
     "data in "
     "time. Please check the reason for the rank being stuck",
     "ddp-errors:ranks-wait-for-peer", "knock-on"),
    ("hccl-socket-timeout",
     "[rank3]: RuntimeError: HCCL function error: HcclCommInitRootInfoConfig, error code is 7\n"
     "[rank3]: EI0006: [PID: 88123] 2025-05-20-09:01:44.510.002 Getting socket times out. Reason: 1. The "
     "remote "
     "does not initiate a connect request. some NPUs in the cluster are abnormal.",
     "ddp-errors:ranks-wait-for-peer", "knock-on"),
    # HCCL's socket manager (hccl_socket_manager.cc `[Wait][LinkEstablish]wait socket establish timeout,
    # role[%d] rank[%u] timeout[%d]`) https://github.com/vllm-project/vllm-ascend/issues/1955
    ("hccl-socket-timeout",
     "[ERROR] HCCL(51200,python3):2025-06-01-12:00:01.000.100 [hccl_socket_manager.cc:778] [51311][Wait]"
     "[LinkEstablish]wait socket establish timeout, role[0] rank[3] timeout[120]",
     "ddp-errors:ranks-wait-for-peer", "knock-on"),
    # EI0005 Inconsistent_Collective_Communication_Arguments_Between_Ranks
    ("hccl-args-inconsistent",
     "EI0005: [PID: 7021] 2024-11-05-17:40:03.221.900 The arguments for collective communication are "
     "inconsistent "
     "between ranks: tag [AllGather_10.0.0.8%eth0_60000_0_1730], parameter [count], local [4096], remote "
     "[8192]",
     "training-hang:collective-mismatch", "cause"),
    ("hccl-args-inconsistent",
     "EI0005: The arguments for collective communication are inconsistent between ranks: tag "
     "[HcomBroadcast_1], "
     "parameter [dataType], local [float16], remote [float32]",
     "training-hang:collective-mismatch", "cause"),
    # EI0008 Package_Error_Incorrect_HCCL_Version
    ("hccl-version",
     "EI0008: The HCCL versions are inconsistent: tag [HcomAllReduce_6629], local_version [8.0.RC3], "
     "remote_version [8.0.RC1]",
     "nccl-errors:nccl-version-differs-from-peers", "cause"),
    ("hccl-version",
     "[rank0]: EI0008: [PID: 4410] 2025-01-09-11:11:11.000.001 The HCCL versions are inconsistent: tag "
     "[AllReduce_192.168.3.1%ens1_60000_0_1736], local_version [7.1], remote_version [8.0]",
     "nccl-errors:nccl-version-differs-from-peers", "cause"),
    # EI0013 Execution_Error_ROCE_CQE: an RDMA completion with error on the NPU's RoCE link
    ("hccl-error-cqe",
     "EI0013: [PID: 9012] 2025-03-03-03:03:03.123.456 An error CQE occurred during operator execution. Local "
     "information: server 10.2.0.1, device ID 6, device IP 192.168.10.6. Peer information: server 10.2.0.2, "
     "device ID 6, device IP 192.168.10.14.",
     "nccl-errors:network-errors-in-log", "cause"),
    ("hccl-error-cqe",
     "[rank14]: EI0013: An error CQE occurred during operator execution. Local information: server 7.0.0.3, "
     "device ID 1, device IP 29.1.1.2. Peer information: server 7.0.0.4, device ID 1, device IP 29.1.2.2.",
     "nccl-errors:network-errors-in-log", "cause"),
    # EJ0002 (HCCP Environment_Error: `The network port is down.Suggest: %s`)
    ("hccl-port-down",
     "EJ0002: [PID: 3301] 2025-02-02-02:02:02.222.222 The network port is down.Suggest: check the link of "
     "NPU 4 "
     "with hccn_tool -i 4 -link -g",
     "nccl-errors:ib-port-down", "cause"),
    ("hccl-port-down",
     "EJ0002: The network port is down.Suggest: Check the optical module and the cable of the device.",
     "nccl-errors:ib-port-down", "cause"),
    # EI0015 Ranktable_Detect_Failed: the root-info rendezvous did not gather every rank
    ("hccl-rootinfo",
     "EI0015: [PID: 1200] 2025-07-07-07:07:07.070.707 Failed to collect cluster information of the "
     "communicator "
     "based on rootInfo detection. Reason: topo detect timeout.",
     "ddp-errors:rendezvous-incomplete", "cause"),
    ("hccl-rootinfo",
     "[rank9]: EI0015: Failed to collect cluster information of the communicator based on rootInfo "
     "detection. "
     "Reason: The server node did not receive the information of all ranks.",
     "ddp-errors:rendezvous-incomplete", "cause"),
    # HCCL's socket (hccl_socket.cc `[HcclSocket][Listen] socket type[%d], listen on ip[%s] and specific
    # port[%u] fail. Please check the port status and whether the port is been using by other process.`)
    # https://github.com/vllm-project/vllm-ascend/issues/1955
    ("hccl-listen-port",
     "[ERROR] HCCL(4410,python3):2025-07-01-10:00:00.000.001 [hccl_socket.cc:100] [4410][HcclSocket][Listen] "
     "socket type[1], listen on ip[10.20.0.5] and specific port[60001] fail. Please check the port status "
     "and "
     "whether the port is been using by other process.",
     "ddp-errors:port-in-use", "cause"),
    ("hccl-listen-port",
     "[HcclSocket][Listen] socket type[0], listen on ip[192.168.0.3] and specific port[16666] fail.",
     "ddp-errors:port-in-use", "cause"),
    # torch_npu's task queue (torch_npu/csrc/core/npu/NPUQueue.cpp deviceErrorMap; thrown as `%s, %s` and
    # logged as `%s happened.`): the NPU's uncorrectable HBM error and multi-bit ECC error, and its HCCS link
    # error
    ("npu-memory-error",
     "RuntimeError: UCE ERROR, [ERROR] 2025-03-01-10:00:00 (PID:3456, Device:5, RankID:5) ERR00100 PTA call "
     "acl "
     "api failed.",
     "gpu-hardware:uncorrectable-ecc", "cause"),
    ("npu-memory-error",
     "RuntimeError: HBM MULTI BIT ECC ERROR, EZ9999: Inner Error!",
     "gpu-hardware:uncorrectable-ecc", "cause"),
    ("npu-memory-error",
     "[ERROR] PTA(1234,python):2025-03-01-10:00:00.000.000 HBM MULTI BIT ECC ERROR happened.",
     "gpu-hardware:uncorrectable-ecc", "cause"),
    ("npu-hccs-link",
     "RuntimeError: HCCS LINK ERROR, EI9999: Inner Error!",
     "gpu-hardware:nvlink-error", "cause"),
    ("npu-hccs-link",
     "[ERROR] PTA(77,python):2025-04-04-04:04:04.000.000 HCCS LINK ERROR happened.",
     "gpu-hardware:nvlink-error", "cause"),
    # Paddle's old launcher (python/paddle/distributed/utils/launch_utils.py, fleet/launch_utils.py: `ABORT!!!
    # Out of all {} trainers, the trainer process with rank={} was aborted. Please check its log.`)
    # https://github.com/PaddlePaddle/PaddleOCR/issues/3817,
    # https://github.com/PaddlePaddle/Paddle/issues/26867
    ("paddle-launch-abort",
     "ERROR 2021-08-26 07:33:44,620 launch_utils.py:584] ABORT!!! Out of all 2 trainers, the trainer "
     "process with "
     "rank=[1] was aborted. Please check its log.",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("paddle-launch-abort",
     "ERROR 2023-04-01 10:00:00,000 launch_utils.py:642] ABORT!!! Out of all 8 trainers, the trainer "
     "process with "
     "rank=[2, 3] was aborted. Please check its log.",
     "ddp-errors:rank-failed-first", "knock-on"),
    # ... and the failed trainer's own error, when pasted with it, comes first
    # (paddle/fluid/imperative/data_loader.cc `DataLoader process (pid %ld) exited is killed by signal: %s.`)
    # https://github.com/PaddlePaddle/PaddleDetection/issues/7252
    ("paddle-launch-abort",
     "SystemError: (Fatal) DataLoader process (pid 2210) exited is killed by signal: Killed. (at "
     "/paddle/paddle/"
     "fluid/imperative/data_loader.cc:181)\n"
     "ERROR 2022-11-02 08:42:32,186 launch_utils.py:604] ABORT!!! Out of all 1 trainers, the trainer "
     "process with "
     "rank=[0] was aborted. Please check its log.",
     "host-faults:killed-likely-oom", "cause"),
    # Paddle's new launcher (python/paddle/distributed/launch/controllers/controller.py: `Container failed
    # !!!`, then the container's `Container rank %d status failed cmd ...`)
    ("paddle-launch-container",
     "LAUNCH INFO 2024-01-10 09:00:00,451 Pod failed\n"
     "LAUNCH ERROR 2024-01-10 09:00:00,452 Container failed !!!\n"
     "Container rank 3 status failed cmd ['/usr/bin/python', '-u', 'train.py'] code 1 log log/workerlog.3",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("paddle-launch-container",
     "LAUNCH ERROR 2025-05-02 18:21:07,004 Container failed !!!",
     "ddp-errors:rank-failed-first", "knock-on"),
    # Paddle's signal handler on a trainer the launcher stopped after another one failed (Paddle's distributed
    # FAQ: `[SignalInfo: *** SIGTERM (@0x...) received by PID ... from PID ... ***]` means another trainer
    # failed)
    ("paddle-trainer-sigterm",
     "[SignalInfo: *** SIGTERM (@0x3fe) received by PID 1164 (TID 0x7f6cf1fc6700) from PID 1022 ***]",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("paddle-trainer-sigterm",
     "FatalError: `Termination signal` is detected by the operating system.\n"
     "  [TimeInfo: *** Aborted at 1700000000 (unix time) try \"date -d @1700000000\" if you are using GNU "
     "date ***]\n"
     "  [SignalInfo: *** SIGTERM (@0x7ea) received by PID 3242 (TID 0x7f51a2e4a740) from PID 2026 ***]",
     "ddp-errors:rank-failed-first", "knock-on"),
    # Kubeflow's training operator (pkg/controller.v1/pytorch/pytorchjob_controller.go and its siblings:
    # `PyTorchJob %s is failed because %d %s replica(s) failed.`, `... is restarting because ...`, TFJob's
    # `has failed because`): a pod of the job failed; its log holds the cause
    ("kubeflow-replica-failed",
     "Warning  PyTorchJobFailed  2m  pytorchjob-controller  PyTorchJob bert-ddp is failed because 1 Worker "
     "replica(s) failed.",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("kubeflow-replica-failed",
     "Message: PyTorchJob llm-sft is restarting because 2 Worker replica(s) failed.",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("kubeflow-replica-failed",
     "TFJob default/mnist has failed because 1 Chief replica(s) failed.",
     "ddp-errors:rank-failed-first", "knock-on"),
    # Lightning's DDP strategy (src/lightning/pytorch/strategies/ddp.py reconciliate_processes: `DeadLock
    # detected from rank: {self.global_rank} \n {trace}`): a rank's exception, the other ranks killed
    ("lightning-deadlock-detected",
     "pytorch_lightning.utilities.exceptions.DeadlockDetectedException: DeadLock detected from rank: 2",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("lightning-deadlock-detected",
     "lightning.fabric.utilities.exceptions.DeadlockDetectedException: DeadLock detected from rank: 0",
     "ddp-errors:rank-failed-first", "knock-on"),
    # torch/multiprocessing/spawn.py ProcessRaisedException (`-- Process %d terminated with the following
    # error:`)
    ("spawn-raised",
     "torch.multiprocessing.spawn.ProcessRaisedException: \n\n-- Process 1 terminated with the following "
     "error:",
     "ddp-errors:rank-failed-first", "knock-on"),
    # ... the raising rank's own error follows it, and comes first
    ("spawn-raised",
     "torch.multiprocessing.spawn.ProcessRaisedException: \n\n-- Process 0 terminated with the following "
     "error:\n"
     "Traceback (most recent call last):\n"
     "RuntimeError: CUDA error: an illegal memory access was encountered",
     "gpu-hardware:xid-application", "cause"),
    # Lightning's DDP wrapper (src/lightning/pytorch/overrides/distributed.py prepare_for_backward)
    ("lightning-unused-parameters",
     "RuntimeError: It looks like your LightningModule has parameters that were not used in producing the "
     "loss "
     "returned by training_step. If this is intentional, you must enable the detection of unused parameters "
     "in "
     "DDP, either by setting the string value `strategy='ddp_find_unused_parameters_true'`",
     "ddp-errors:unused-parameters", "cause"),
    ("lightning-unused-parameters",
     "[rank1]: RuntimeError: It looks like your LightningModule has parameters that were not used in "
     "producing the "
     "loss returned by training_step.",
     "ddp-errors:unused-parameters", "cause"),
    # UCX (src/uct/ib/base/ib_log.c, ib_md.c): its hint appended to an RDMA registration's ENOMEM when the
    # locked-memory limit is not unlimited
    ("ucx-memlock",
     "[1765653660.705652] [gpu3:640743:0]           ib_md.c:287  UCX  ERROR "
     "ibv_reg_mr(address=0x15213b956010, "
     "length=65536, access=0xf) failed: Cannot allocate memory : Please set max locked memory (ulimit -l) to "
     "'unlimited' (current: 65536 kbytes)",
     "nccl-errors:resource-limit", "cause"),
    ("ucx-memlock",
     "[1736959004.001121] [node7:29714:0]        ib_iface.c:1060 UCX  ERROR mlx5_0: ibv_create_cq(cqe=4096) "
     "failed: Cannot allocate memory : Please set max locked memory (ulimit -l) to 'unlimited' (current: 64 "
     "kbytes)",
     "nccl-errors:resource-limit", "cause"),
    # UCX's mlx5 completion with error (src/uct/ib/mlx5/ib_mlx5_log.c: `%s on %s:%d/%s (synd 0x%x vend 0x%x
    # hw_synd %d/%d)`), the retry counts that NCCL reports as IBV_WC_RETRY_EXC_ERR / IBV_WC_RNR_RETRY_EXC_ERR
    ("ucx-retry-exceeded",
     "[1715000000.123456] [node1:12345:0]        ib_mlx5_log.c:171  UCX  ERROR Transport retry count "
     "exceeded on "
     "mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)",
     "nccl-errors:network-errors-in-log", "cause"),
    ("ucx-retry-exceeded",
     "[1715000000.2] [gpu12:901:0]  ib_mlx5_log.c:177  UCX  ERROR Receive-no-ready retry count exceeded on "
     "mlx5_3:1/RoCE (synd 0x16 vend 0x82 hw_synd 0/0)",
     "nccl-errors:network-errors-in-log", "cause"),
    # aws-ofi-nccl (src/nccl_ofi_rdma.cpp, nccl_ofi_sendrecv.cpp: `Request %p completed with error. RC: %d.
    # Error: %d (%s). Completed length: %ld, Request: %s`), libfabric's EFA or other provider
    ("ofi-completion-error",
     "ip-10-0-1-5:1234:1299 [0] nccl_net_ofi_rdma.cpp:1200 NCCL WARN NET/OFI Request 0x7f12a0 completed "
     "with error. "
     "RC: 21. Error: 4101 (Unknown error). Completed length: 0, Request: { dev: 0, size: 0, state: CREATED }",
     "nccl-errors:network-errors-in-log", "cause"),
    ("ofi-completion-error",
     "node3:77:90 [4] NCCL WARN NET/OFI Request 0x5581e0 completed with error. RC: 103. Error: Remote peer "
     "aborted. Completed length: 0, Request: { buffer_index: 0, dev: 4, size: 0, state: CREATED, type: RECV "
     "}",
     "nccl-errors:network-errors-in-log", "cause"),
    # the mlx5 driver (drivers/net/ethernet/mellanox/mlx5/core/events.c `Port module event[error]: module %u,
    # %s, %s`): a cable or module error on the port
    ("mlx5-module-error",
     "mlx5_core 0000:5e:00.0: Port module event[error]: module 0, Cable error, Bad or shorted cable/module",
     "nccl-errors:nic-down", "cause"),
    ("mlx5-module-error",
     "[Tue Jun  3 10:00:00 2025] mlx5_core 0000:9a:00.1: Port module event[error]: module 1, Cable error, "
     "Power "
     "budget exceeded",
     "nccl-errors:nic-down", "cause"),
    # the NVSwitch driver (nvswitch's SXid print: `SXid (PCI:%04x:%02x:%02x.%x): %05d, Fatal, ...`)
    ("nvswitch-fatal-sxid",
     "[ 1234.567890] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 24007, Fatal, Link 42 sourcetrack timeout "
     "error "
     "(First)",
     "gpu-hardware:nvlink-error", "cause"),
    ("nvswitch-fatal-sxid",
     "kernel: nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 11001, Fatal, ingress invalid command",
     "gpu-hardware:nvlink-error", "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, conclusion it must not be first, what must be first instead or None)
NEAR_MISSES = [
    # HCCL's socket listening at its port is no failure
    ("hccl-listen-port",
     "[INFO] HCCL(1234,python):2025-01-01 [hccl_socket.cc:95] listen on ip[192.168.1.2] port[60000] success",
     "ddp-errors:port-in-use", None),
    # torch_npu's SUSPECT MEM ERROR names no certain fault of the memory
    ("npu-memory-error",
     "RuntimeError: SUSPECT MEM ERROR, EZ9999: Inner Error!",
     "gpu-hardware:uncorrectable-ecc", None),
    # a trainer killed by SIGSEGV failed by itself: no other trainer stopped it
    ("paddle-trainer-sigterm",
     "[SignalInfo: *** SIGSEGV (@0x0) received by PID 3242 (TID 0x7f51a2e4a740) from PID 0 ***]",
     "ddp-errors:rank-failed-first", None),
    # the new launcher's clean end
    ("paddle-launch-container",
     "LAUNCH INFO 2022-07-20 12:10:56,915 Pod completed\nLAUNCH INFO 2022-07-20 12:10:57,388 Exit code 0",
     "ddp-errors:rank-failed-first", None),
    # a job that runs or completed
    ("kubeflow-replica-failed",
     "PyTorchJob bert-ddp is successfully completed.",
     "ddp-errors:rank-failed-first", None),
    # Paddle's DataLoader killed by SIGBUS is its shared memory, not the OOM killer
    ("paddle-launch-abort",
     "SystemError: (Fatal) DataLoader process (pid 1104) exited is killed by signal: Bus error.",
     "host-faults:killed-likely-oom", None),
    # UCX's registration failure without its memlock hint: the limit is unlimited, so it is no limit
    ("ucx-memlock",
     "[1715000000.1] [node1:1:0]          ib_md.c:309  UCX  ERROR ibv_reg_mr(address=0x7f0000000000, "
     "length=263192, access=0xf) failed: Cannot allocate memory",
     "nccl-errors:resource-limit", None),
    # the mlx5 driver's report of a module plugged or unplugged (also at boot, on an unused port) names no
    # fault
    ("mlx5-module-error",
     "mlx5_core 0000:0b:00.1: Port module event: module 1, Cable unplugged",
     "nccl-errors:nic-down", None),
    # a non-fatal SXid is no link failure
    ("nvswitch-fatal-sxid",
     "nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 20009, Non-fatal, Link 28 RX Short Error Rate",
     "gpu-hardware:nvlink-error", None),
    # torch's own DDP unused-parameter warning is no error
    ("lightning-unused-parameters",
     "UserWarning: find_unused_parameters=True was specified in DDP constructor, but did not find any unused "
     "parameters in the forward pass.",
     "ddp-errors:unused-parameters", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
