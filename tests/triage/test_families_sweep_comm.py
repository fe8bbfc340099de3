"""Message families of torch.distributed, NCCL, Slurm and Horovod, written from the libraries' own
source (the file is named beside each family): each family read by its own words in two or more
of its spellings, and a near miss in similar words that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion, role of the first match)
CASES = [
    # torch/csrc/distributed/c10d/reducer.cpp, ensure_prior_reduction_finished: a parameter got no gradient
    ("ddp-unused",
     "[rank1]: RuntimeError: Expected to have finished reduction in the prior iteration before starting a "
     "new "
     "one. This error indicates that your module has parameters that were not used in producing loss. You "
     "can "
     "enable unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
     "`torch.nn.parallel.DistributedDataParallel`, and by\n"
     "[rank1]: making sure all `forward` function outputs participate in calculating loss.",
     "ddp-errors:unused-parameters", "cause"),
    ("ddp-unused",
     "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. "
     "This "
     "error indicates that your training graph has changed in this iteration, e.g., one parameter is used in "
     "first iteration, but then got unused in the second iteration. this is not compatible with static_graph "
     "set to True.",
     "ddp-errors:unused-parameters", "cause"),
    ("ddp-unused",
     "Parameter indices which did not receive grad for rank 3: 412 413 414",
     "ddp-errors:unused-parameters", "cause"),
    # reducer.cpp, mark_variable_ready: a gradient hook fired twice for one parameter in one backward
    ("ddp-ready-twice",
     "RuntimeError: Expected to mark a variable ready only once. This error is caused by one of the "
     "following "
     "reasons: 1) Use of a module parameter outside the `forward` function. Please make sure model "
     "parameters "
     "are not shared across multiple concurrent forward-backward passes. or try to use _set_static_graph() "
     "as a "
     "workaround if this module graph does not change during training loop.2) Reused parameters in multiple "
     "reentrant backward passes.",
     "ddp-errors:parameter-ready-twice", "cause"),
    ("ddp-ready-twice",
     "Parameter at index 195 with name model.layers.11.mlp.lora_B.weight has been marked as ready twice. "
     "This "
     "means that multiple autograd engine  hooks have fired for this particular parameter during this "
     "iteration.",
     "ddp-errors:parameter-ready-twice", "cause"),
    # third_party/gloo/gloo/transport/tcp/pair.cc: the peer rank's process went away
    ("gloo-peer-gone",
     "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
     "[10.0.0.2]:46313",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("gloo-peer-gone",
     "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:525] Read error [127.0.0.1]:55523: "
     "Connection reset by peer",
     "ddp-errors:rank-failed-first", "knock-on"),
    # c10d TCPStore client: its server (the agent or rank 0) hung up
    ("tcpstore-peer-gone",
     "torch.distributed.DistNetworkError: Connection reset by peer",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("tcpstore-peer-gone",
     "[rank5]: torch.distributed.DistNetworkError: Connection reset by peer",
     "ddp-errors:rank-failed-first", "knock-on"),
    # horovod/common/common.h SHUT_DOWN_ERROR: an exception on one rank stopped them all
    ("horovod-shutdown",
     "horovod.common.exceptions.HorovodInternalError: Horovod has been shut down. This was caused by an "
     "exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of "
     "the ranks finished execution.",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("horovod-shutdown",
     "tensorflow.python.framework.errors_impl.UnknownError: Horovod has been shut down. This was caused by "
     "an "
     "exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of "
     "the ranks finished execution. If the shutdown was caused by an exception, you should see the exception "
     "in the log before the first shutdown message.",
     "ddp-errors:rank-failed-first", "knock-on"),
    # horovod/common/stall_inspector.cc: the stall inspector gives up on the ranks it waits for
    ("horovod-stall",
     'One or more rank (marked by "!") is stalled for longer than 600 seconds. Will shutdown.',
     "ddp-errors:ranks-wait-for-peer", "knock-on"),
    ("horovod-stall",
     "[2024-03-01 10:00:00.000000: E /tmp/pip-req-build/horovod/common/stall_inspector.cc:105] "
     'One or more rank (marked by "!") is stalled for longer than 120 seconds. Will shutdown.',
     "ddp-errors:ranks-wait-for-peer", "knock-on"),
    # c10d TCPStore.cpp wait(): keys other ranks should have written never came
    ("store-wait-timeout",
     "torch.distributed.DistStoreError: wait timeout after 900000ms, keys: /none/torchelastic/role_info/0, "
     "/none/torchelastic/role_info/1",
     "ddp-errors:rendezvous-incomplete", "cause"),
    ("store-wait-timeout",
     "torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: /default_pg/0//cuda//0",
     "ddp-errors:rendezvous-incomplete", "cause"),
    ("store-wait-timeout",
     "RuntimeError: Socket Timeout",
     "ddp-errors:rendezvous-incomplete", "cause"),
    # NCCL's socket layer (include/socket.h to 2.10, misc/socket.cc, os/linux.cc): the peer went away
    ("nccl-socket-peer-gone",
     "node3:771:820 [1] misc/socket.cc:538 NCCL WARN socketProgressOpt: Call to recv from 10.0.0.5<60222> "
     "failed : Connection reset by peer",
     "nccl-errors:network-errors-in-log", "knock-on"),
    ("nccl-socket-peer-gone",
     "node3:771:820 [1] NCCL WARN Net : Call to recv from 10.0.0.5<60222> failed : Connection reset by peer",
     "nccl-errors:network-errors-in-log", "knock-on"),
    ("nccl-socket-peer-gone",
     "node3:771:820 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer "
     "node4.cluster<41210>",
     "nccl-errors:network-errors-in-log", "knock-on"),
    ("nccl-socket-peer-gone",
     "node3:771:820 [1] os/linux.cc:362 NCCL WARN ncclOsSocketProgressOpt: Call to send to 10.0.0.5<60222> "
     "failed : Broken pipe",
     "nccl-errors:network-errors-in-log", "knock-on"),
    # misc/socket.cc (2.15+): NCCL's connect retried until it gave up
    ("nccl-connect-gave-up",
     "node3:771:771 [1] misc/socket.cc:484 NCCL WARN socketStartConnect: exceeded timeouts (20)",
     "nccl-errors:network-errors-in-log", "cause"),
    ("nccl-connect-gave-up",
     "node3:771:771 [1] misc/socket.cc:527 NCCL WARN socketPollConnect: exceeded timeouts (20)",
     "nccl-errors:network-errors-in-log", "cause"),
    # misc/socket.cc / include/socket.h: a socket NCCL could not open or accept for lack of descriptors
    ("nccl-open-files",
     "node3:771:771 [1] misc/socket.cc:407 NCCL WARN Net : Socket creation failed : Too many open files",
     "nccl-errors:resource-limit", "cause"),
    ("nccl-open-files",
     "node3:771:771 [1] misc/socket.cc:726 NCCL WARN ncclSocketInit: Socket creation failed : Too many open "
     "files",
     "nccl-errors:resource-limit", "cause"),
    ("nccl-open-files",
     "node3:771:902 [1] misc/socket.cc:415 NCCL WARN socketTryAccept: Accept failed: Too many open files",
     "nccl-errors:resource-limit", "cause"),
    # transport/net_socket.cc and bootstrap.cc (2.23+): no interface NCCL may use
    ("nccl-no-interface",
     "node1:123:123 [0] transport/net_socket.cc:46 NCCL WARN NET/Socket : no interface found",
     "nccl-errors:socket-ifname-wrong", "cause"),
    ("nccl-no-interface",
     "node1:123:123 [0] bootstrap.cc:577 NCCL WARN no device found matching eth1, verify NCCL_OOB_NET_IFNAME",
     "nccl-errors:socket-ifname-wrong", "cause"),
    # torch/distributed/distributed_c10d.py: the wheel has no NCCL backend
    ("torch-without-nccl",
     "RuntimeError: Distributed package doesn't have NCCL built in",
     "nccl-errors:torch-without-nccl", "cause"),
    ("torch-without-nccl",
     "[rank0]: RuntimeError: Distributed package doesn't have NCCL built in",
     "nccl-errors:torch-without-nccl", "cause"),
    # ncclGetErrorString (src/init.cc) for ncclUnhandledCudaError and ncclInvalidUsage, as torch prints it
    ("nccl-result-by-name",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
     "1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n"
     "ncclUnhandledCudaError: Call to CUDA function failed.",
     "nccl-errors:nccl-error-unexplained", "cause"),
    ("nccl-result-by-name",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
     "1691, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.19.3\n"
     "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
     "nccl-errors:nccl-error-unexplained", "cause"),
    ("nccl-result-by-name",
     "RuntimeError: NCCL Error 1: unhandled cuda error",
     "nccl-errors:nccl-error-unexplained", "cause"),
    # NCCL's CUDACHECK (`Cuda failure '%s'`) and CUCHECK (`Cuda failure %d '%s'`, cudawrap.h) in the
    # `Last error:` torch prints: the CUDA call inside NCCL ran out of GPU memory
    ("nccl-last-error-oom",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
     "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
     "ncclUnhandledCudaError: Call to CUDA function failed.\n"
     "Last error:\n"
     "Cuda failure 'out of memory'",
     "training-hang:crashed-cuda-oom", "cause"),
    ("nccl-last-error-oom",
     "ncclUnhandledCudaError: Call to CUDA function failed.\n"
     "Last error:\n"
     "Cuda failure 2 'out of memory'",
     "training-hang:crashed-cuda-oom", "cause"),
    # ... and a device index past the visible GPUs
    ("nccl-invalid-ordinal",
     "node1:123:140 [0] init.cc:1741 NCCL WARN Cuda failure 'invalid device ordinal'",
     "ddp-errors:world-size-mismatch", "cause"),
    ("nccl-invalid-ordinal",
     "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 101 'invalid device "
     "ordinal'",
     "ddp-errors:world-size-mismatch", "cause"),
    # ProcessGroupNCCL.cpp: the watchdog's teardown on the ranks told of another rank's timeout
    ("watchdog-teardown",
     "[rank5]:[E1018 03:11:10.443122 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
     "Received a global timeout from another rank and will start to dump the debug info. Last enqueued NCCL "
     "work: 4311, last completed NCCL work: 4310.",
     "training-hang:crashed-collective-timeout", "knock-on"),
    ("watchdog-teardown",
     "[rank1]:[E703 19:54:01.084925105 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
     "Received a dump signal due to a collective timeout from  rank 7 and we will try our best to dump the "
     "debug info. Last enqueued NCCL work: 56116, last completed NCCL work: 56116.",
     "training-hang:crashed-collective-timeout", "knock-on"),
    ("watchdog-teardown",
     "[rank1]:[E703 19:54:01.084753215 ProcessGroupNCCL.cpp:1922] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
     "Observed flight recorder dump signal from another rank via TCPStore.",
     "training-hang:crashed-collective-timeout", "knock-on"),
    ("watchdog-teardown",
     "[rank0]:[E ProcessGroupNCCL.cpp:564] [Rank 0] Some NCCL operations have failed or timed out. Due to "
     "the "
     "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
     "training-hang:crashed-collective-timeout", "knock-on"),
    # Slurm interfaces/jobacct_gather.c (`%ps exceeded memory limit`; `Step`/`Job` before 20.11) and the
    # older task/cgroup's `Exceeded step memory limit at some point.`
    ("slurm-memory-limit",
     "slurmstepd: error: StepId=4242.0 exceeded memory limit (68719476736 > 64424509440), being killed",
     "slurm-job:step-oom-killed", "cause"),
    ("slurm-memory-limit",
     "slurmstepd: error: Step 4242.0 exceeded memory limit (68719476736 > 64424509440), being killed",
     "slurm-job:step-oom-killed", "cause"),
    ("slurm-memory-limit",
     "slurmstepd: error: Job 4242 exceeded memory limit (68719476736 > 64424509440), being killed",
     "slurm-job:step-oom-killed", "cause"),
    ("slurm-memory-limit",
     "slurmstepd: error: Exceeded step memory limit at some point.",
     "slurm-job:step-oom-killed", "cause"),
    # Slurm srun/launch.c: the step's memory is held by another step of the job
    ("slurm-step-memory",
     "srun: error: Unable to create step for job 4242: Memory required by task is not available",
     "slurm-job:step-creation-blocked", "cause"),
    ("slurm-step-memory",
     "srun: Job 4242 step creation still disabled, retrying (Requested nodes are busy)\n"
     "srun: error: Unable to create step for job 4242: Memory required by task is not available",
     "slurm-job:step-creation-blocked", "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, conclusion it must not be first, what must be first instead or None)
NEAR_MISSES = [
    # DDP's performance warning: the flag is on and nothing was unused; no error
    ("ddp-unused",
     "[W reducer.cpp:1300] Warning: find_unused_parameters=True was specified in DDP constructor, but did "
     "not "
     "find any unused parameters in the forward pass. This flag results in an extra traversal of the "
     "autograd "
     "graph every iteration,  which can adversely affect performance.",
     "ddp-errors:unused-parameters", None),
    # DeepSpeed ZeRO's own check of a gradient computed twice is not DDP's reducer
    ("ddp-ready-twice",
     "AssertionError: The parameter 412 has already been reduced. Gradient computed twice for this "
     "partition. "
     "Multiple gradient reduction is currently not supported",
     "ddp-errors:parameter-ready-twice", None),
    # gloo's own timeout: the peer is alive and elsewhere, not gone
    ("gloo-peer-gone",
     "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
     "1800000ms for recv operation to complete",
     "ddp-errors:rank-failed-first", "ddp-errors:ranks-wait-for-peer"),
    # the store's server socket that cannot bind is a port in use, not a peer gone
    ("tcpstore-peer-gone",
     "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
     "address. "
     "port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
     "ddp-errors:rank-failed-first", "ddp-errors:port-in-use"),
    ("horovod-shutdown",
     "ValueError: Horovod has not been initialized; use hvd.init().",
     "ddp-errors:rank-failed-first", None),
    # the store's client that never reached the store's address: unreachable, not a rendezvous waiting
    ("store-wait-timeout",
     "[E socket.cpp:957] [c10d] The client socket has timed out after 600s while trying to connect to "
     "(127.0.0.1, 3333).",
     "ddp-errors:rendezvous-incomplete", "ddp-errors:master-unreachable"),
    # NCCL's recv that would block is no peer gone
    ("nccl-socket-peer-gone",
     "node3:771:820 [1] NCCL WARN Net : Call to recv from 10.0.0.5<60222> failed : Resource temporarily "
     "unavailable",
     "nccl-errors:network-errors-in-log", None),
    # Python's own EMFILE (a DataLoader's file descriptors) is not NCCL's
    ("nccl-open-files",
     "OSError: [Errno 24] Too many open files",
     "nccl-errors:resource-limit", None),
    # another backend missing from the build
    ("torch-without-nccl",
     "RuntimeError: Distributed package doesn't have MPI built in. MPI is only included if you build PyTorch "
     "from source on a host that has MPI installed.",
     "nccl-errors:torch-without-nccl", None),
    # the `Last error:` that names the cause wins over the result's name
    ("nccl-result-by-name",
     "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\n"
     "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000",
     "nccl-errors:nccl-error-unexplained", "nccl-errors:duplicate-gpu"),
    ("nccl-last-error-oom",
     "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
     "Cuda failure 'an illegal memory access was encountered'",
     "training-hang:crashed-cuda-oom", "nccl-errors:nccl-error-unexplained"),
    # torch's heartbeat monitor is the watchdog itself stuck, its own conclusion
    ("watchdog-teardown",
     "[rank2]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 2] Heartbeat monitor timed out! Process will be "
     "terminated after dumping debug info. workMetaList_.size()=0",
     "training-hang:crashed-collective-timeout", "nccl-errors:watchdog-regression"),
    # a time limit is not a memory limit
    ("slurm-memory-limit",
     "slurmstepd: error: *** JOB 4242 ON gpu-07 CANCELLED AT 2025-01-01T03:00:00 DUE TO TIME LIMIT ***",
     "slurm-job:step-oom-killed", "slurm-job:job-time-limit"),
    # a step that asks for nodes outside the allocation is not blocked by another step
    ("slurm-step-memory",
     "srun: error: Unable to create step for job 4242: Requested node configuration is not available",
     "slurm-job:step-creation-blocked", "slurm-job:step-node-options"),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
