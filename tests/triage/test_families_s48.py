"""Message families of session 48 (the lead's). nccl-errors: NCCL's shared-memory transport refused
by /dev/shm's permissions, not its size: `Call to shm_open failed : Permission denied` (include/shm.h
before NCCL 2.12) and `Error while creating shared memory segment PATH (size N), error: Permission
denied (13)` (misc/shmutils.cc since), read as shm-permission-denied even when the older size line
follows; the same line with ENOSPC stays /dev/shm too small. Stack dumps: a thread whose innermost
frame is one of DeepSpeed ZeRO's gathers or reductions (runtime/zero/partition_parameters.py,
stage_1_and_2.py) waits in that collective, as py-spy shows no frame for the C++ call below it.
cuda-oom: PaddlePaddle's allocators' `Out of memory error on GPU N. Cannot allocate X memory on GPU N, [Y
memory has been allocated and] available memory is only Z` (paddle/fluid/memory/allocation/).
ddp-errors: horovodrun's ssh check before launch (horovod/runner/launch.py, `ssh not successful for host
HOST:`), c10d's socket wait that timed out in torch 2.4's words (c10d/socket.cpp waitForInput), and tvm_ffi's
SIGSEGV banner (tvm_ffi/src/ffi/backtrace.cc), FlashInfer's runtime in vLLM and SGLang.
ray-startup: gRPC's `failed to connect to all addresses; last error: ...: Too many open files` in Ray's RPC
errors is the open-files limit, before Ray not answering. nccl-errors: NVLS's `Cuda failure 999 'unknown
error'` (transport/nvls.cc) is the fabric manager; a socket connect to 127.x (socketStartConnect) is the
wrong interface. cuda-oom: torch_memory_saver's `CUresult error result=2` (cuMemCreate's OOM)."""

from __future__ import annotations

import pytest

from runbook.checks.facts import stackframes
from runbook.triage.readings.series import describe_reading
from runbook.triage.result import triage_text
from tests.triage.families import assert_first, assert_near_miss, library

SHM_OLD = "node08:27106:27302 [0] include/shm.h:{line} NCCL WARN {text}"
SHM_NEW = "3d3e22c3066f:168:168 [0] misc/shmutils.cc:113 NCCL WARN {text}"

# (family, text, conclusion)
CASES = [
    ("shm-permission-denied",
     SHM_OLD.format(line=27, text="Call to shm_open failed : Permission denied") + "\n"
     "node08:27106:27302 [0] NCCL INFO include/shm.h:41 -> 2\n"
     + SHM_OLD.format(line=48,
                      text="Error while creating shared memory segment nccl-shm-recv-0-3-0 (size 4460544)")
     + "\nRuntimeError: NCCL error in: ProcessGroupNCCL.cpp:784, unhandled system error, NCCL version 2.7.8",
     "nccl-errors:shm-permission-denied"),
    ("paddle-oom",
     "ResourceExhaustedError: \n\nOut of memory error on GPU 3. Cannot allocate 1.250000GB memory on GPU 3, "
     "38.992188GB memory has been allocated and available memory is only 512.375000MB.\n\n"
     "Please check whether there is any other process using GPU 3.\n"
     "1. If yes, please stop them, or start PaddlePaddle on another GPU.\n"
     "2. If no, please decrease the batch size of your model.\n"
     " (at /paddle/paddle/fluid/memory/allocation/cuda_allocator.cc:86)",
     "cuda-oom:oom-batch-or-model"),
    ("paddle-oom",  # Paddle 1.x: no allocated amount
     "Out of memory error on GPU 0. Cannot allocate 768.000244MB memory on GPU 0, available memory is only "
     "301.562500MB.",
     "cuda-oom:oom-batch-or-model"),
    ("horovod-ssh-check",
     "Filtering local host names.\nRemote host found: node2 node3\nChecking ssh on all remote hosts.\n"
     "ssh not successful for host node3:\nssh: connect to host node3 port 22: Connection timed out",
     "ddp-errors:launcher-ssh-failed"),
    ("c10d-wait-for-input",
     "[rank3]:[W410 21:36:52.177160212 socket.cpp:485] [c10d] waitForInput: socket timed out after 300000ms",
     "ddp-errors:rendezvous-incomplete"),
    ("tvm-ffi-segfault",
     "INFO 10-04 08:58:40 [model.py:699] Resolved architecture: Qwen2ForCausalLM\n"
     "!!!!!!! Segfault encountered !!!!!!!\n"
     "  File \"<unknown>\", line 0, in gsignal\n"
     "  File \"<unknown>\", line 0, in ucs_topo_cleanup\n"
     "  File \"<unknown>\", line 0, in ucs_init",
     "ddp-errors:rank-native-crash"),
    ("nvls-999",
     "gpu47:4962:5097 [1] transport/nvls.cc:223 NCCL WARN Cuda failure 999 'unknown error'\n"
     "gpu47:4962:5097 [1] NCCL INFO transport/nvls.cc:350 -> 1",
     "nccl-errors:nvls-fabric-manager"),
    ("socket-loopback",
     "node2:812:1043 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 127.0.0.1<45069> "
     "failed : Software caused connection abort\n"
     "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1691, unhandled system error "
     "(run with NCCL_DEBUG=INFO for details), NCCL version 2.18.5",
     "nccl-errors:socket-ifname-wrong"),
    ("memory-saver-oom",
     "(WorkerDict pid=60511) [torch_memory_saver.cpp] CUresult error  result=2 "
     "file=csrc/torch_memory_saver.cpp func=cu_mem_create line=103\n"
     "(WorkerDict pid=60510) [rank3]:[E509 17:37:47.665 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught "
     "collective operation timeout: WorkNCCL(SeqNum=1420, OpType=COALESCED, NumelIn=4866, NumelOut=77856, "
     "Timeout(ms)=1800000) ran for 1800085 milliseconds before timing out.",
     "cuda-oom:oom-batch-or-model"),
    ("grpc-emfile",
     "(raylet) [2025-08-25 22:33:45,833 E 4164820 4164820] (raylet) worker_pool.cc:1239: Failed to send exit "
     "request: RpcError: RPC Error message: failed to connect to all addresses; last error: UNKNOWN: "
     "ipv4:10.0.0.4:41233: Too many open files; RPC Error details:",
     "ray-startup:open-files-limit"),
    ("shm-permission-denied",
     SHM_NEW.format(text="Error while creating shared memory segment /dev/shm/nccl-UbzKZ9 (size 9637888), "
                         "error: Permission denied (13)") + "\n"
     "3d3e22c3066f:168:168 [0] NCCL INFO transport/shm.cc:114 -> 2\n"
     "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:94, unhandled system error "
     "(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
     "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
     "nccl-errors:shm-permission-denied"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    assert_first(text, family, conclusion)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # the same line with ENOSPC: the segment did not fit, a size problem
    ("shm-permission-denied",
     SHM_NEW.format(text="Error while creating shared memory segment /dev/shm/nccl-cjY8K5 (size 10617216), "
                         "error: No space left on device (28)"),
     "nccl-errors:shm-permission-denied", "nccl-errors:shm-too-small"),
    # ssh's own refusal without horovod's check is no launcher's ssh check
    ("horovod-ssh-check",
     "ssh not successful: see the log\nroot@10.0.0.7: Permission denied (publickey,password).",
     "ddp-errors:launcher-ssh-failed", None),
    # the same gRPC failure for a peer that is gone is no descriptor limit
    ("grpc-emfile",
     "(raylet) worker_pool.cc:1239: Failed to send exit request: RpcError: RPC Error message: failed to "
     "connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.4:41233: Failed to connect to remote host: "
     "Connection refused",
     "ray-startup:open-files-limit", "ray-hang:ray-unresponsive"),
    # torch_memory_saver's other CUresults are no OOM (1: invalid value)
    ("memory-saver-oom",
     "[torch_memory_saver.cpp] CUresult error  result=1 file=csrc/torch_memory_saver.cpp "
     "func=cu_mem_map line=121",
     "cuda-oom:oom-batch-or-model", None),
    # a permission error on another file is no /dev/shm mode
    ("shm-permission-denied",
     "PermissionError: [Errno 13] Permission denied: '/dev/shm/cache/tokenizer.json'",
     "nccl-errors:shm-permission-denied", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)


@pytest.mark.parametrize(("path", "func"), [
    ("deepspeed/runtime/zero/partition_parameters.py", "_allgather_params"),
    ("deepspeed/runtime/zero/partition_parameters.py", "_allgather_params_coalesced"),
    ("deepspeed/runtime/zero/stage_1_and_2.py", "allreduce_bucket"),
])
def test_a_zero_gather_or_reduction_is_a_collective_wait(path: str, func: str) -> None:
    frames = [{"filename": path, "name": func, "line": 1948},
              {"filename": "deepspeed/utils/nvtx.py", "name": "wrapped_fn", "line": 15},
              {"filename": "swift/utils/torch_utils.py", "name": "get_n_params_grads", "line": 45}]
    assert stackframes.classify(frames) == ("collective", func)


def test_another_zero_function_is_not_a_collective() -> None:
    frames = [{"filename": "deepspeed/runtime/zero/partition_parameters.py",
               "name": "_convert_to_deepspeed_param"}]
    assert stackframes.classify(frames) == ("running", None)


def step_spikes(lines: list[str]) -> list[dict]:
    """The step-spikes readings of the lines pasted as one excerpt."""
    readings = triage_text(library(), None, "\n".join(lines) + "\n", "paste").readings
    return [r for r in readings if r["reading"] == "step-spikes"]


def test_time_per_step_is_read_as_the_step_time() -> None:
    """CLIP4Clip's `Time/step: N` (main_task_retrieval.py's log line): one slow step in every four is
    the loader falling behind (step-spikes), as for any other step-time format."""
    lines = [f"02/09/2022 12:{k:02d}:25 - INFO - Epoch: 1/30, Step: {k}/951, Lr: 0.0001, Loss: 3.25, "
             f"Time/step: {44.2 if k % 4 == 0 else 4.5}" for k in range(1, 21)]
    spikes = step_spikes(lines)
    assert spikes and spikes[0]["conclusion"] == "slow-training:input-bound", spikes


def test_every_other_step_slow_is_the_input_pipeline() -> None:
    """clip4clip#58's shape: after two warm-up steps, one step in two takes ten times the other; half
    the steps are slow, so the spike is measured against the fast steps (the lower quartile)."""
    times = [1466.6, 67.3] + [44.0 if k % 2 == 0 else 4.2 for k in range(10)]
    lines = [f"step {k + 1} | loss 3.25 | Time/step: {t}" for k, t in enumerate(times)]
    [reading] = step_spikes(lines)
    facts = reading["facts"]
    assert (facts["every"], facts["spike"], facts["median"]) == (2, 44.0, 4.2)
    assert "against a median of 4.2 s for the others (5 of 12 steps)" in describe_reading(reading)


def test_steps_that_slow_down_for_good_are_no_periodic_stall() -> None:
    times = [1.0] * 6 + [3.0] * 6  # a run that became slower once (another job arrived), not every k-th step
    lines = [f"step {k + 1} | loss 3.25 | Time/step: {t}" for k, t in enumerate(times)]
    assert step_spikes(lines) == []
