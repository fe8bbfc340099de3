"""Message families of session 42's sweep s1: NCCL's NVLink SHARP (NVLS) multicast setup failing for the
NVSwitch fabric manager, the driver's Xid 45 that names the Xid that caused it, vLLM's Ray executor finding
fewer GPUs than it needs, NCCL's driver-call check running out of GPU memory, and Ray's worker-died block
with its OOM-killer hint. Two or more messages of each family read to their conclusion, and near misses in
similar words that must read otherwise. The wordings are the libraries' own (the source file is named beside
each family)."""

from __future__ import annotations

import pytest

from tests.triage.families import RAY_EXIT_DETAIL, assert_first, assert_near_miss

# (family, text, conclusion, role of the first match)
CASES = [
    # NCCL 2.27+ transport/nvls.cc nvlsAllocateMem: cuMulticastBindMem failed, NCCL's WARN names the Fabric
    # Manager (`Failed to bind NVLink SHARP (NVLS) Multicast memory of size %ld : CUDA error %d '%s'.\nThis is
    # usually caused by ...`), as NCCL prints it and as torch's DistBackendError carries it as `Last error:`
    ("nvls-fabric-manager",
     "gpu-node-7:88120:88171 [3] transport/nvls.cc:291 NCCL WARN Failed to bind NVLink SHARP (NVLS) "
     "Multicast memory of size 1610612736 : CUDA error 1 'invalid argument'.\n"
     "This is usually caused by a system or configuration error in the Fabric Manager or NVSwitches.\n"
     "Do not force-enable NVLS (NCCL_NVLS_ENABLE=1) if you wish to avoid this error in the future.\n"
     "gpu-node-7:88120:88171 [3] NCCL INFO transport/nvls.cc:410 -> 1",
     "nccl-errors:nvls-fabric-manager", "cause"),
    ("nvls-fabric-manager",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
     "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.28.9\n"
     "ncclUnhandledCudaError: Call to CUDA function failed.\n"
     "Last error:\n"
     "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 4194304 : CUDA error 401 'the operation "
     "cannot be performed in the present state'.\n"
     "This is usually caused by a system or configuration error in the Fabric Manager or NVSwitches.\n"
     "Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future.",
     "nccl-errors:nvls-fabric-manager", "cause"),
    # NCCL 2.17-2.26 transport/nvls.cc: only CUCHECK's `Cuda failure %d '%s'` (src/include/cudawrap.h) on
    # cuMulticastCreate / cuMulticastAddDevice / cuMulticastBindMem, with the driver's code
    ("nvls-fabric-manager",
     "dgx-a3:30211:30260 [6] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'\n"
     "dgx-a3:30211:30260 [6] NCCL INFO transport/nvls.cc:394 -> 1\n"
     "dgx-a3:30211:30260 [6] NCCL INFO init.cc:1196 -> 1\n"
     "dgx-a3:30211:30260 [6] NCCL INFO group.cc:75 -> 1 [Async thread]",
     "nccl-errors:nvls-fabric-manager", "cause"),
    ("nvls-fabric-manager",
     "[2025-07-21 19:05:29] hgx-14:27907:27907 [1] transport/nvls.cc:254 NCCL WARN Cuda failure 401 'the "
     "operation cannot be performed in the present state'\n"
     "hgx-14:27907:27907 [1] NCCL INFO transport/nvls.cc:409 -> 1",
     "nccl-errors:nvls-fabric-manager", "cause"),
    # 802 at nvls.cc: the fabric manager had not (yet) formed the multicast team; CUDA itself started
    ("nvls-fabric-manager",
     "b200-12:4410:4480 [5] transport/nvls.cc:251 NCCL WARN Cuda failure 802 'system not yet initialized'\n"
     "b200-12:4410:4480 [5] NCCL INFO transport/nvls.cc:409 -> 1",
     "nccl-errors:nvls-fabric-manager", "cause"),
    # open-gpu-kernel-modules kernel_rc.c: Xid 45 (ROBUST_CHANNEL_PREEMPTIVE_REMOVAL) with its root cause
    # (`NVRM: Xid (%s): %d, pid=%s, name=%s, %s caused by previous Xid %d`), read as the earlier Xid
    ("xid45-caused-by",
     "kernel: NVRM: Xid (PCI:0000:3b:00): 45, pid=2211, name=python, Ch 00000008 caused by previous Xid 149",
     "gpu-hardware:nvlink-error", "cause"),
    ("xid45-caused-by",
     "kernel: NVRM: Xid (PCI:0000:3b:00): 45, pid=2211, name=python, Ch 00000008 caused by previous Xid 74",
     "gpu-hardware:nvlink-error", "cause"),
    # ... also as MIG attributes it (`PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u`)
    ("xid45-caused-by",
     "kernel: NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:00): 45, pid=2211, name=python, Ch 00000008 caused "
     "by previous Xid 145",
     "gpu-hardware:nvlink-error", "cause"),
    ("xid45-caused-by",
     "kernel: NVRM: Xid (PCI:0000:ca:00): 45, pid=9120, name=pt_main_thread, Ch 00000010 caused by previous "
     "Xid 79",
     "gpu-driver-hang:gpu-fell-off-bus", "cause"),
    ("xid45-caused-by",
     "kernel: NVRM: Xid (PCI:0000:ca:00): 45, pid=9120, name=pt_main_thread, Ch 00000010 caused by previous "
     "Xid 95",
     "gpu-driver-hang:gpu-ecc-error", "cause"),
    ("xid45-caused-by",
     "kernel: NVRM: Xid (PCI:0000:ca:00): 45, pid=9120, name=pt_main_thread, Ch 00000010 caused by previous "
     "Xid 63",
     "gpu-hardware:ecc-contained", "cause"),
    ("xid45-caused-by",
     "kernel: NVRM: Xid (PCI:0000:ca:00): 45, pid=9120, name=pt_main_thread, Ch 00000010 caused by previous "
     "Xid 64",
     "gpu-hardware:remap-failed", "cause"),
    ("xid45-caused-by",
     "kernel: NVRM: Xid (PCI:0000:ca:00): 45, pid=9120, name=pt_main_thread, Ch 00000010 caused by previous "
     "Xid 119",
     "gpu-hardware:gsp-error", "cause"),
    # MIG-attributed Xids themselves (kernel_rc.c XID_PRINT_WITH_ATTR)
    ("xid-mig-attributed",
     "kernel: NVRM: Xid (PCI:0000:3b:00 GPU-I:02 GPU-CI:00): 74, pid=4410, name=python3, NVLink: fatal error "
     "detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
     "gpu-hardware:nvlink-error", "cause"),
    ("xid-mig-attributed",
     "kernel: NVRM: Xid (PCI:0000:3b:00 GPU-I:02): 79, pid=4410, name=python3, GPU has fallen off the bus.",
     "gpu-driver-hang:gpu-fell-off-bus", "cause"),
    # vLLM executor/ray_utils.py initialize_ray_cluster with no current placement group: the Ray cluster has
    # fewer GPUs than tensor x pipeline parallel; newer vLLM warn through the logger and wait ...
    ("vllm-ray-gpus-short",
     "WARNING 04-01 02:45:50 ray_utils.py:320] The number of required GPUs exceeds the total number of "
     "available GPUs in the placement group.",
     "ray-hang:infeasible-resources", "cause"),
    ("vllm-ray-gpus-short",
     "(EngineCore_0 pid=812) WARNING 05-12 10:01:00 [ray_utils.py:320] The number of required GPUs exceeds "
     "the total number of available GPUs in the placement group.\n"
     "(EngineCore_0 pid=812) INFO 05-12 10:01:10 [ray_utils.py:214] Waiting for creating a placement "
     "group of specs for 10 seconds. specs=[{'GPU': 1.0, 'node:10.0.0.4': 0.001}, {'GPU': 1.0}]. Check "
     "`ray status` to see if you have enough resources.",
     "ray-hang:infeasible-resources", "cause"),
    # ... the oldest raised it naming the cluster
    ("vllm-ray-gpus-short",
     '  File "/usr/local/lib/python3.10/site-packages/vllm/engine/ray_utils.py", line 98, in '
     "initialize_cluster\n"
     "ValueError: The number of required GPUs exceeds the total number of available GPUs in the cluster.",
     "ray-hang:infeasible-resources", "cause"),
    # NCCL's CUCHECK on a driver call that ran out of GPU memory (the NVLS buffers, cuMemCreate)
    ("nccl-cucheck-oom",
     "node1:1200:1250 [0] transport/nvls.cc:236 NCCL WARN Cuda failure 2 'out of memory'\n"
     "node1:1200:1250 [0] NCCL INFO transport/nvls.cc:409 -> 1",
     "cuda-oom:oom-batch-or-model", "cause"),
    ("nccl-cucheck-oom",
     "trainer-3:551:610 [2] transport/p2p.cc:198 NCCL WARN Cuda failure 2 'out of memory'\n"
     "trainer-3:551:610 [2] NCCL INFO transport/p2p.cc:250 -> 1",
     "cuda-oom:oom-batch-or-model", "cause"),
    # Ray's worker-died block (exceptions.py ActorDiedError + node_manager.cc's exit detail) whose own text
    # names the OOM killer's SIGKILL first: the kill is the cause, the ActorDiedError its knock-on
    ("ray-worker-died-oom-hint",
     "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
     "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict\n"
     "\tactor_id: 0a1b2c3d4e5f\n"
     "\tpid: 5123\n"
     "The actor is dead because its worker process has died. " + RAY_EXIT_DETAIL,
     "host-faults:killed-likely-oom", "cause"),
    ("ray-worker-died-oom-hint",
     "(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
     "troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffff Worker ID: 1a2b Node "
     "ID: 3c4d Worker IP address: 10.0.0.9 Worker port: 10021 Worker PID: 7781 " + RAY_EXIT_DETAIL,
     "host-faults:killed-likely-oom", "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, the conclusion that must not come first, the one that must, or None)
NEAR_MISSES = [
    # NCCL 2.27's INFO twin: NVLS off, the communicator initialised (not an error of the job)
    ("nvls-fabric-manager",
     "gpu-node-7:88120:88171 [3] NCCL INFO Failed to bind NVLink SHARP (NVLS) Multicast memory of size "
     "1610612736 : CUDA error 1 'invalid argument'. Proceeding without NVLS support.\n"
     "gpu-node-7:88120:88171 [3] NCCL INFO ncclCommInitRank comm 0x55d rank 3 nranks 8 cudaDev 3 nvmlDev 3 "
     "busId 9b000 commId 0x1c - Init COMPLETE",
     "nccl-errors:nvls-fabric-manager", None),
    # out of memory at nvls.cc is the GPU's memory, not the fabric manager
    ("nvls-fabric-manager",
     "node1:1200:1250 [0] transport/nvls.cc:236 NCCL WARN Cuda failure 2 'out of memory'",
     "nccl-errors:nvls-fabric-manager", "cuda-oom:oom-batch-or-model"),
    # `invalid argument` in another NCCL file is no NVLS failure
    ("nvls-fabric-manager",
     "node1:1200:1250 [0] transport/p2p.cc:272 NCCL WARN Cuda failure 1 'invalid argument'",
     "nccl-errors:nvls-fabric-manager", None),
    # Xid 45 alone stays what it was: an unnamed Xid, with the driver's clean-up a knock-on
    ("xid45-caused-by",
     "kernel: NVRM: Xid (PCI:0000:3b:00): 45, pid=2211, name=python, Ch 00000008",
     "gpu-hardware:nvlink-error", "gpu-hardware:xid-other"),
    # an application Xid as the cause is not read as hardware: the program's own fault (gpu-hardware 1.4.6)
    ("xid45-caused-by",
     "kernel: NVRM: Xid (PCI:0000:3b:00): 45, pid=2211, name=python, Ch 00000008 caused by previous Xid 13",
     "gpu-hardware:nvlink-error", "gpu-hardware:xid-application"),
    # the placement group the caller passed in has too few GPU bundles: its own configuration (the ValueError,
    # with or without vLLM's `Required number of devices` tail)
    ("vllm-ray-gpus-short",
     "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement "
     "group.Required number of devices: 8. Total number of devices: 4.",
     "ray-hang:infeasible-resources", "ddp-errors:world-size-mismatch"),
    ("vllm-ray-gpus-short",
     "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement "
     "group.",
     "ray-hang:infeasible-resources", "ddp-errors:world-size-mismatch"),
    # a worker that exited for another reason Ray names (not the OOM killer's hint)
    ("ray-worker-died-oom-hint",
     "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
     "detail: The leased worker has unrecoverable failure. Worker is requested to be destroyed when it is "
     "returned.",
     "host-faults:killed-likely-oom", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
