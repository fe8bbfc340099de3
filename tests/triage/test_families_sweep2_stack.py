"""Message families of the GPU driver, DCGM, the kernel and file systems, Kubernetes, the CUDA
extensions and the training frameworks' finite checks (round two of the stack's sweep), each written
as the source prints it (the file named beside it), read as the conclusion an engineer would name
from that message alone; and near misses of the same shape that must not read so."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_never_cause
from tests.triage.families import found as _found

CASES = [
    # the driver's GSP RPC lines (open-gpu-kernel-modules src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c):
    # the Xid 119 banner, the sanity check that fails while it waits, the rate limiter after repeats
    ("nvidia kernel_gsp.c _kgspLogXid119",
     "NVRM: _kgspLogXid119: ********************************* GSP Timeout **********************************",
     "gpu-hardware:gsp-error"),
    ("nvidia kernel_gsp.c _kgspLogRpcSanityCheckFailure",
     "NVRM: _kgspLogRpcSanityCheckFailure: GPU1 sanity check failed 0xf waiting for RPC response from GSP. "
     "Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
     "gpu-hardware:gsp-error"),
    ("nvidia kernel_gsp.c _kgspRpcIncrementTimeoutCountAndRateLimitPrints",
     "NVRM: Rate limiting GSP RPC error prints for GPU at PCI:0000:3b:00 (printing 1 of every 30).  The GPU "
     "likely needs to be reset.",
     "gpu-hardware:gsp-error"),
    # Xid 140, an unrecovered ECC error (NVIDIA's Xid catalog): reset the GPU, as for 48 and 95
    ("NVIDIA Xid catalog",
     "NVRM: Xid (PCI:0000:9b:00): 140, pid='<unknown>', name=<unknown>, Unrecovered ECC Error",
     "gpu-driver-hang:gpu-ecc-error"),
    ("NVIDIA Xid catalog",
     "[Tue Jun  3 02:11:40 2025] NVRM: Xid (PCI:0000:1b:00): 140, pid=88121, name=python3, An uncorrectable "
     "ECC error detected (possible firmware handling failure) DRAM:-1840691462, LTC:0, MMU:0, PCIE:0",
     "gpu-driver-hang:gpu-ecc-error"),
    # the driver could not bring a GPU up (RmInitAdapter): nvidia-smi then lists one GPU fewer
    ("nvidia osinit.c RmInitAdapter",
     "NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x23:0xffff:1401)",
     "gpu-driver-hang:gpu-missing"),
    ("nvidia nv.c rm_init_adapter",
     "[    8.600674] NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0",
     "gpu-driver-hang:gpu-missing"),
    # DCGM diagnostics (dcgmlib/dcgm_errors.h DCGM_FR_*_MSG) and nvidia-smi -q's Remapped Rows
    ("dcgm DCGM_FR_ROW_REMAP_FAILURE_MSG",
     "| Memory                    | Fail - GPU: 2 | Error: GPU 2 had uncorrectable memory errors and row "
     "remapping failed.",
     "gpu-hardware:remap-failed"),
    ("nvidia-smi -q", "        Remapping Failure Occurred        : Yes", "gpu-hardware:remap-failed"),
    ("dcgm DCGM_FR_PENDING_ROW_REMAP_MSG", "GPU 5 had memory errors and row remappings are pending",
     "gpu-hardware:remap-pending"),
    ("dcgm DCGM_FR_PENDING_PAGE_RETIREMENTS_MSG", "A pending retired page has been detected in GPU 3.",
     "gpu-hardware:remap-pending"),
    ("nvidia-smi -q",
     "    Remapped Rows\n        Correctable Error                 : 0\n"
     "        Uncorrectable Error               : 1\n        Pending                           : Yes\n"
     "        Remapping Failure Occurred        : No",
     "gpu-hardware:remap-pending"),
    ("dcgm DCGM_FR_VOLATILE_DBE_DETECTED_MSG", "Detected 2 volatile double-bit ECC error(s) in GPU 1.",
     "gpu-hardware:uncorrectable-ecc"),
    ("dcgm DCGM_FR_UNCONTAINED_ERROR_MSG", "Warning: GPU had an uncontained error (XID 95)",
     "gpu-hardware:uncorrectable-ecc"),
    ("dcgm DCGM_FR_CUDA_DBE_MSG",
     "CUDA APIs have indicated that a double-bit ECC error has occured on GPU 4.",
     "gpu-hardware:uncorrectable-ecc"),
    ("dcgm DCGM_FR_NVLINK_ERROR_CRITICAL_MSG",
     "Detected 12 CRC Data NvLink errors on GPU 3's NVLink (should be 0)", "gpu-hardware:nvlink-error"),
    ("dcgm DCGM_FR_NVLINK_DOWN_MSG", "GPU 3's NvLink link 7 is currently down", "gpu-hardware:nvlink-error"),
    ("CUDA runtime cudaErrorNvlinkUncorrectable",
     "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
     "gpu-hardware:nvlink-error"),
    ("dcgm DCGM_FR_THERMAL_VIOLATIONS_TS_MSG",
     "Thermal violations totaling 13.4 seconds started at 2.1 seconds into the test for GPU 4",
     "gpu-hardware:thermal-throttling"),
    ("dcgm DCGM_FR_CLOCK_THROTTLE_THERMAL_MSG",
     "Detected clock throttling due to thermal violation in GPU 0.",
     "gpu-hardware:thermal-throttling"),
    ("dcgm DCGM_FR_PCIE_WIDTH_MSG",
     "GPU 0 is running at PCI link width 8X, which is below the minimum allowed link generation of 16 "
     "(parameter 'pcie.min_pci_width')",
     "gpu-hardware:pcie-degraded"),
    ("dcgm DCGM_FR_PCI_REPLAY_RATE_MSG", "Detected more than 8 PCIe replays per minute for GPU 2 : 41",
     "gpu-hardware:pcie-degraded"),
    ("dcgm DCGM_FR_MEMORY_MISMATCH_MSG",
     "A memory mismatch was detected on GPU 6, but no error was reported by CUDA or NVML.",
     "gpu-hardware:sdc-suspected"),
    # Triton's launcher (third_party/nvidia/backend/driver.c `Triton Error [CUDA]: %s`) with CUDA's words
    ("triton backend/driver.c",
     "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered",
     "gpu-hardware:xid-application"),
    ("triton backend/driver.c", "RuntimeError: Triton Error [CUDA]: out of memory",
     "cuda-oom:oom-batch-or-model"),
    # Lustre (ptlrpc/import.c, the LustreError prefix of CERROR), ext4, XFS and the block layer
    ("lustre ptlrpc/import.c",
     "Lustre: scratch-MDT0000-mdc-ffff9a6b2e8c1000: Connection to scratch-MDT0000 (at 10.1.2.3@o2ib) was "
     "lost; in progress operations using this service will wait for recovery to complete",
     "host-faults:storage-hung"),
    ("lustre ptlrpc/import.c",
     "LustreError: 167-0: scratch-OST0004-osc-ffff8f2a3c4e9000: This client was evicted by scratch-OST0004; "
     "in progress operations using this service will fail.",
     "host-faults:storage-errors"),
    ("lustre osc",
     "LustreError: 11-0: scratch-OST0012-osc-ffff8f2a3c4e9000: operation ost_read to node 10.1.2.3@o2ib "
     "failed: rc = -107",
     "host-faults:storage-errors"),
    ("linux fs/ext4/super.c",
     "EXT4-fs error (device nvme0n1p2): ext4_find_entry:1455: inode #2: comm python: reading directory "
     "lblock 0",
     "host-faults:storage-errors"),
    ("linux fs/ext4/super.c", "EXT4-fs (nvme0n1p2): Remounting filesystem read-only",
     "host-faults:storage-errors"),
    ("linux fs/xfs",
     'XFS (md0): metadata I/O error in "xfs_imap_to_bp+0x5c/0xa0 [xfs]" at daddr 0x1e0 len 32 error 5',
     "host-faults:storage-errors"),
    ("linux block/blk-core.c",
     "blk_update_request: I/O error, dev nvme1n1, sector 123456 op 0x0:(READ) flags 0x80700 phys_seg 1 prio "
     "class 0",
     "host-faults:storage-errors"),
    # the kernel's hung-task watchdog (kernel/hung_task.c): a task in D state that long
    ("linux kernel/hung_task.c",
     "[48211.120443] INFO: task python:48211 blocked for more than 120 seconds.\n"
     "      Not tainted 5.15.0-91-generic #101-Ubuntu",
     "host-faults:d-state-other"),
    ("linux kernel/hung_task.c", "INFO: task pt_main_thread:8812 blocked for more than 245 seconds.",
     "host-faults:d-state-other"),
    # the kubelet's evictions (pkg/kubelet/eviction/helpers.go: nodeLowMessageFmt,
    # podEphemeralStorageMessageFmt)
    ("kubernetes pkg/kubelet/eviction/helpers.go",
     "  Reason:  Evicted\n  Message: The node was low on resource: memory. Container trainer was using "
     "251432Ki, which exceeds its request of 0.",
     "host-faults:memory-pressure"),
    ("kubernetes pkg/kubelet/eviction/helpers.go",
     "Message: The node was low on resource: ephemeral-storage. Container trainer was using 112Gi, which "
     "exceeds its request of 0.",
     "host-faults:disk-full"),
    ("kubernetes pkg/kubelet/eviction/helpers.go",
     "Pod ephemeral local storage usage exceeds the total limit of containers 20Gi.",
     "host-faults:disk-full"),
    # a container's exit by SIGKILL (128 + 9), as kubectl describe and kubectl exec report it
    ("kubectl describe", "      Exit Code:    137", "host-faults:killed-likely-oom"),
    ("kubectl exec", "command terminated with exit code 137", "host-faults:killed-likely-oom"),
    # the kernel's OOM kill inside a cgroup (mm/memcontrol.c) and the container runtimes' record of it
    ("linux mm/memcontrol.c",
     "Memory cgroup out of memory: Killed process 48211 (python) total-vm:123456kB, anon-rss:98765kB",
     "cuda-oom:container-memory-limit"),
    ("kubectl describe",
     "    State:          Terminated\n      Reason:       OOMKilled\n      Exit Code:    137",
     "cuda-oom:container-memory-limit"),
    ("kubectl get pods", "trainer-0   0/1     OOMKilled   3 (2m ago)   14m",
     "cuda-oom:container-memory-limit"),
    ("docker inspect", '            "OOMKilled": true,', "cuda-oom:container-memory-limit"),
    # a CUDA package's build that does not fit this torch, Python or CUDA: xFormers' own check
    # (xformers/_cpp_lib.py), a compiled module not there (flash-attn's setup.py ext_modules, apex's
    # --cuda_ext), a runtime of another CUDA major
    ("xformers _cpp_lib.py",
     "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
     "    PyTorch 2.1.0+cu121 with CUDA 1201 (you have 2.3.0+cu121)",
     "extension-errors:extension-abi-mismatch"),
    ("flash-attn setup.py", "ModuleNotFoundError: No module named 'flash_attn_2_cuda'",
     "extension-errors:extension-abi-mismatch"),
    ("apex setup.py --cuda_ext", "ModuleNotFoundError: No module named 'amp_C'",
     "extension-errors:extension-abi-mismatch"),
    ("apex setup.py --cuda_ext", "    import fused_layer_norm_cuda\nNo module named 'fused_layer_norm_cuda'",
     "extension-errors:extension-abi-mismatch"),
    ("glibc ld.so",
     "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory",
     "extension-errors:extension-abi-mismatch"),
    # the frameworks' own finite checks: Megatron (pretrain_gpt.py loss_func, training.py training_log),
    # Lightning (loops/utilities.py _check_finite_loss, callbacks/early_stopping.py), transformers
    # (debug_utils.py DebugUnderflowOverflow), fairseq (trainer.py, nan_detector.py)
    ("megatron pretrain_gpt.py",
     "RuntimeError: Rank 0, node n1, device 0, iteration 77: Unexpected result inf (message='found Inf in "
     "local forward loss calculation')",
     "nan-loss:loss-diverged"),
    ("megatron pretrain_gpt.py (older)",
     "AssertionError: Rank 12: found NaN in local forward loss calculation. Device: 4, node: gpu-21",
     "nan-loss:loss-diverged"),
    ("megatron training.py training_log",
     " iteration     1300/  500000 | consumed samples:       166400 | learning rate: 2.999E-04 | "
     "global batch size:   128 | loss scale: 1.0 | number of skipped iterations:   0 | "
     "number of nan iterations:  12 |",
     "nan-loss:loss-diverged"),
    ("lightning loops/utilities.py", "ValueError: The loss returned in `training_step` is nan.",
     "nan-loss:loss-diverged"),
    ("lightning loops/utilities.py",
     "ValueError: The loss returned in `training_step` is tensor(nan, device='cuda:0', "
     "grad_fn=<NllLossBackward0>).",
     "nan-loss:loss-diverged"),
    ("lightning callbacks/early_stopping.py",
     "Monitored metric val_loss = nan is not finite. Previous best value was 2.311. "
     "Signaling Trainer to stop.",
     "nan-loss:loss-diverged"),
    ("transformers debug_utils.py",
     "Detected inf/nan during batch_number=0\nLast 21 forward frames:\nabs min  abs max  metadata",
     "nan-loss:loss-diverged"),
    ("fairseq trainer.py", "FloatingPointError: gradients are Nan/Inf", "nan-loss:loss-diverged"),
    ("fairseq nan_detector.py",
     "2023-01-01 10:00:00 | WARNING | fairseq.nan_detector | NaN detected in output of "
     "decoder.layers.11.self_attn, shape: torch.Size([128, 8, 1024]), forward",
     "nan-loss:loss-diverged"),
    # Megatron's spiky-loss check (--check-for-spiky-loss): a loss spike, as "loss spike" reads
    ("megatron rerun_state_machine.py",
     "Rank 5, node gpu-3, device 5, iteration 4000: Unexpected result 41.27 (message='Spiky loss')",
     "nan-loss:lr-too-high"),
    # torch/_dynamo/convert_frame.py: the accumulated limit over all frames, in both its names
    ("pytorch torch/_dynamo/convert_frame.py",
     "W0312 10:01:02.123000 140000 torch/_dynamo/convert_frame.py:906] torch._dynamo hit "
     "config.accumulated_recompile_limit (256)",
     "slow-training:recompiles"),
    ("pytorch torch/_dynamo/convert_frame.py (2.3)",
     "torch._dynamo hit config.accumulated_cache_size_limit (64)",
     "slow-training:recompiles"),
    # Ray Train's wait for its placement group (train/_internal/backend_executor.py, ray.util.sgd)
    ("ray train/_internal/backend_executor.py",
     "TimeoutError: Placement group creation timed out. Make sure your cluster either has enough "
     "resources or use an autoscaling cluster. If you are running on a cluster, make sure you specify "
     "an address in `ray.init()`, for example, `ray.init(\"auto\")`.",
     "ray-hang:infeasible-resources"),
    ("ray util/sgd",
     "TimeoutError: Placement group creation timed out. Make sure cluster either has enough resources or use "
     "an autoscaling cluster. Current resources available: {'CPU': 8.0}, resources requested by the "
     "placement group: [{'GPU': 1}]",
     "ray-hang:infeasible-resources"),
]


# ray.get(timeout=...) ran out (src/ray/core_worker/store_provider/memory_store/memory_store.cc): the work
# did not return in time, for a reason that is elsewhere
@pytest.mark.parametrize("line", [
    "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.",
    "(TaskRunner pid=2211) ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.",
], ids=["exception", "prefixed"])
def test_a_ray_get_timeout_is_a_knock_on(line: str) -> None:
    found = _found(line, "ray memory_store.cc")
    assert found[:1] == [("ray-hang:collect-never-returns", "knock-on")], found


@pytest.mark.parametrize(("source", "line", "conclusion"), CASES,
                         ids=[f"{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(source: str, line: str, conclusion: str) -> None:
    assert_first(line, source, conclusion)


# Near misses: the same shape or the same words, another failure (or none)
NEAR_MISSES = [
    # the driver's start-up line names its GSP firmware: no timeout
    ("nvidia kernel_gsp.c",
     "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build",
     "gpu-hardware:gsp-error"),
    # Xid 154 is the recovery action of the Xid before it, not an ECC error of its own
    ("NVIDIA Xid catalog",
     "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset "
     "Required)", "gpu-driver-hang:gpu-ecc-error"),
    # the driver loading, not failing to bring the GPU up
    ("nvidia nv.c", "nvidia: loading out-of-tree module taints kernel.", "gpu-driver-hang:gpu-missing"),
    # nvidia-smi -q on a healthy GPU: no failed remap, nothing pending; the ECC mode's Pending field
    ("nvidia-smi -q", "        Remapping Failure Occurred        : No", "gpu-hardware:remap-failed"),
    ("nvidia-smi -q",
     "    Ecc Mode\n        Current                           : Enabled\n        Pending                    "
     "       : Enabled\n    Remapped Rows\n        Pending                           : No",
     "gpu-hardware:remap-pending"),
    # a power violation is not the GPU overheating
    ("dcgm DCGM_FR_CLOCK_THROTTLE_POWER_MSG", "Detected clock throttling due to power violation in GPU 0.",
     "gpu-hardware:thermal-throttling"),
    # another driver error through Triton's launcher: not memory
    ("triton backend/driver.c", "RuntimeError: Triton Error [CUDA]: invalid argument",
     "cuda-oom:oom-batch-or-model"),
    # Lustre and ext4 reporting a mount or a restored connection
    ("lustre ptlrpc/import.c",
     "Lustre: scratch-MDT0000-mdc-ffff9a6b2e8c1000: Connection restored to 10.1.2.3@o2ib (at 10.1.2.3@o2ib)",
     "host-faults:storage-hung"),
    ("linux fs/ext4/super.c",
     "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
     "host-faults:storage-errors"),
    # the hung-task report's own footer, without the task
    ("linux kernel/hung_task.c",
     '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.',
     "host-faults:d-state-other"),
    # a node condition that is neither memory nor disk
    ("kubernetes pkg/kubelet/eviction/helpers.go", "Message: The node had condition: [PIDPressure].",
     "host-faults:memory-pressure"),
    ("kubernetes pkg/kubelet/eviction/helpers.go", "Message: The node had condition: [PIDPressure].",
     "host-faults:disk-full"),
    # a container that exited on its own
    ("kubectl describe", "      Exit Code:    1", "host-faults:killed-likely-oom"),
    # docker inspect of a container that was not OOM-killed
    ("docker inspect", '            "OOMKilled": false,', "cuda-oom:container-memory-limit"),
    # the machine's OOM killer, not a cgroup's
    ("linux mm/oom_kill.c",
     "Out of memory: Killed process 48211 (python) total-vm:123456kB, anon-rss:98765kB",
     "cuda-oom:container-memory-limit"),
    # the package itself is not installed: not a build that does not fit; nor a driver that is missing
    ("python import", "ModuleNotFoundError: No module named 'flash_attn'",
     "extension-errors:extension-abi-mismatch"),
    ("glibc ld.so", "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
     "extension-errors:extension-abi-mismatch"),
    # xFormers in use
    ("diffusers", "Using xFormers memory efficient attention.", "extension-errors:extension-abi-mismatch"),
    # Megatron's iteration line of a healthy run; its argument dump
    ("megatron training.py training_log",
     " number of skipped iterations:   0 | number of nan iterations:   0 |", "nan-loss:loss-diverged"),
    ("megatron arguments.py", "  check_for_spiky_loss ............................ True",
     "nan-loss:lr-too-high"),
    # EarlyStopping's progress
    ("lightning callbacks/early_stopping.py",
     "Metric val_loss improved by 0.012 >= min_delta = 0.0. New best score: 0.400", "nan-loss:loss-diverged"),
    # Ray Train's placement group that did start
    ("ray train/_internal/backend_executor.py", "Placement group has started.",
     "ray-hang:infeasible-resources"),
    # a user raising the limit is not dynamo hitting it
    ("user code", "torch._dynamo.config.accumulated_recompile_limit = 512", "slow-training:recompiles"),
]


@pytest.mark.parametrize(("source", "line", "not_this"), NEAR_MISSES,
                         ids=[f"not-{c[2]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_is_not_read_as_the_family(source: str, line: str, not_this: str) -> None:
    assert_never_cause(line, source, not_this)
