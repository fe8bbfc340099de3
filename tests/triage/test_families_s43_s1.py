"""Message families of session 43's sweep s1: torch's monitored barrier naming the ranks that never reached
it, and a torch.OutOfMemoryError raised inside a Ray task or actor as the caller's ray.get re-raises it. Two
or more messages of each family read to their conclusion, and near misses in similar words that must read
otherwise. The wordings are the libraries' own (the source file is named beside each family); a stack dump of
a rank in a CUDA synchronize is pinned where it stands (its reading is the engine's, see the last test)."""

from __future__ import annotations

import pytest

from runbook.checks.facts import stackframes
from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion, role of the first match)
CASES = [
    # torch/csrc/distributed/c10d/ProcessGroupGloo.cpp monitoredBarrier, rank 0: with wait_all_ranks (what
    # ProcessGroupWrapper uses before each collective under TORCH_DISTRIBUTED_DEBUG=DETAIL) every rank that
    # did not answer, `[Rank 0]: Ranks N, M failed to pass monitoredBarrier in T ms`
    ("monitored-barrier",
     "[rank0]:   File \"/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py\", "
     "line 2050, in all_reduce\n"
     "[rank0]:     work = group.allreduce([tensor], opts)\n"
     "[rank0]: RuntimeError: [Rank 0]: Ranks 3, 5 failed to pass monitoredBarrier in 1800000 ms",
     "training-hang:rank-behind", "cause"),
    # ... without wait_all_ranks (dist.monitored_barrier's default) the first one, with gloo's own exception
    ("monitored-barrier",
     "Traceback (most recent call last):\n"
     "  File \"train.py\", line 88, in <module>\n"
     "    dist.monitored_barrier(group=gloo_group, timeout=timedelta(seconds=30))\n"
     "RuntimeError: [Rank 0]: Rank 2 failed to pass monitoredBarrier in 30000 ms\n"
     " Original exception: \n"
     "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 30000ms for recv "
     "operation to complete",
     "training-hang:rank-behind", "cause"),
    # ... as glog's LOG(ERROR) prints it (logAndThrow logs before it throws)
    ("monitored-barrier",
     "E0412 10:11:12.123456 140221 ProcessGroupGloo.cpp:144] [Rank 0]: Rank 7 failed to pass "
     "monitoredBarrier in 600000 ms",
     "training-hang:rank-behind", "cause"),
    # ... the wrapper's own frame around it (ProcessGroupWrapper.cpp runCollectiveChecks)
    ("monitored-barrier",
     "RuntimeError: ProcessGroupWrapper: Monitored Barrier encountered error running collective: "
     "CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[20, 10], TensorDtypes=Float). "
     "Error: \n"
     "[Rank 0]: Ranks 1 failed to pass monitoredBarrier in 1800000 ms",
     "training-hang:rank-behind", "cause"),
    # checkRemainingTime: rank 0 ran out of time before every rank had answered
    ("monitored-barrier",
     "RuntimeError: Rank 0 timed out in monitoredBarrier after 60000 ms.\n"
     "Successfully processed ranks: 1, 2, 3",
     "training-hang:rank-behind", "cause"),
    # the ranks that did reach it: their send/recv with rank 0 failed when rank 0 gave up; rank 0's log names
    # the rank that fell behind
    ("monitored-barrier",
     "RuntimeError: Rank 3 successfully reached monitoredBarrier, but received errors while waiting for "
     "send/recv from rank 0. Please check rank 0 logs for faulty rank.\n"
     " Original exception: \n"
     "[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.5]:29871",
     "training-hang:rank-behind", "knock-on"),
    # python/ray/exceptions.py RayTaskError.as_instanceof_cause: an exception raised in a task or actor is
    # re-raised by ray.get as a class named `RayTaskError(<cause's class>)`; torch.OutOfMemoryError's class
    # name is OutOfMemoryError (torch.cuda.OutOfMemoryError before 2.5), the header line of the task's frame
    ("ray-wrapped-torch-oom",
     "  File \"/usr/local/lib/python3.11/site-packages/ray/_private/worker.py\", line 930, in get_objects\n"
     "    raise value.as_instanceof_cause()\n"
     "ray.exceptions.RayTaskError(OutOfMemoryError): ray::TaskRunner.run() (pid=21877, ip=172.16.3.9, "
     "actor_id=9f0c1e2d3a4b5c6d7e8f901201000000, repr=<main.TaskRunner object at 0x7f2c3c1d5e10>)",
     "cuda-oom:oom-batch-or-model", "cause"),
    ("ray-wrapped-torch-oom",
     "RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_compute_log_prob() (pid=90211, "
     "ip=10.0.0.12, actor_id=aa11bb22, repr=<WorkerDict object at 0x7f0>)\n"
     "  File \"/opt/app/single_controller/ray/base.py\", line 663, in func\n"
     "    return getattr(self.worker_dict[key], name)(*args, **kwargs)",
     "cuda-oom:oom-batch-or-model", "cause"),
    # ... with torch's own message after it, which still decides (another process holds the memory)
    ("ray-wrapped-torch-oom",
     "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor() "
     "(pid=5521, ip=10.0.0.7, actor_id=ab12, repr=<WorkerDict object at 0x7f>)\n"
     "  File \"/opt/app/workers/fsdp_workers.py\", line 540, in update_actor\n"
     "    metrics = self.actor.update_policy(data=data)\n"
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of "
     "79.15 GiB of which 1.02 GiB is free. Process 4411 has 30.12 GiB memory in use. Including non-PyTorch "
     "memory, this process has 48.00 GiB memory in use. Of the allocated memory 44.10 GiB is allocated by "
     "PyTorch, and 2.20 GiB is reserved by PyTorch but unallocated.",
     "cuda-oom:gpu-held-by-other-process", "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, must not be first, first or None)
NEAR_MISSES = [
    # the call itself in a traceback or a script is no report of a rank behind
    ("monitored-barrier", "    dist.monitored_barrier(group=gloo_group, timeout=timedelta(seconds=30), "
     "wait_all_ranks=True)", "training-hang:rank-behind", None),
    # the wrapper's other check: ranks issued different collectives
    ("monitored-barrier",
     "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
     "CollectiveFingerPrint(SequenceNumber=4, OpType=ALLREDUCE), but Rank 1 is running collective: "
     "CollectiveFingerPrint(SequenceNumber=4, OpType=BROADCAST).",
     "training-hang:rank-behind", "training-hang:collective-mismatch"),
    # Ray's own memory monitor (a RayError, never wrapped as RayTaskError(...)): the host's memory
    ("ray-wrapped-torch-oom",
     "ray.exceptions.RayTaskError: ray::main_task() (pid=1201, ip=10.0.0.3)\n"
     "  File \"/opt/app/main.py\", line 99, in main_task\n"
     "    ray.get(futures)\n"
     "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
     "Memory on the node (IP: 10.0.0.3, ID: 5e1f) where the task (task ID: 16310a0f, name=work, pid=1288, "
     "memory used=1.61GB) was running was 7.46GB / 7.77GB (0.960208), which exceeds the memory usage "
     "threshold of 0.95. Ray killed this worker (ID: 1f1ed4) because it was the most recently scheduled task",
     "cuda-oom:oom-batch-or-model", "cuda-oom:ray-memory-monitor"),
    ("ray-wrapped-torch-oom",
     "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
     "cuda-oom:oom-batch-or-model", None),
    # another cause class in the same wrapper
    ("ray-wrapped-torch-oom",
     "ray.exceptions.RayTaskError(OutOfDiskError): ray::write_shard() (pid=4412, ip=10.0.0.9)",
     "cuda-oom:oom-batch-or-model", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)


def test_a_zero3_parameter_fetch_in_a_stream_synchronize_is_a_cuda_sync() -> None:
    # DeepSpeed ZeRO-3 (deepspeed/runtime/zero/partitioned_param_coordinator.py fetch_sub_module) waits on
    # the event of a parameter all-gather it issued: the host waits for the GPU. The stack rules say so; the
    # conclusion a cuda-sync reading names is the engine's (triage/readings/stacks.py WAIT_CONCLUSIONS).
    zero = "deepspeed/runtime/zero/"
    frames = [{"filename": "torch/cuda/streams.py", "name": "synchronize", "line": 224},
              {"filename": f"{zero}partitioned_param_coordinator.py", "name": "fetch_sub_module"},
              {"filename": f"{zero}parameter_offload.py", "name": "pre_sub_module_forward_function"}]
    assert stackframes.classify(frames) == ("cuda-sync", "synchronize")
