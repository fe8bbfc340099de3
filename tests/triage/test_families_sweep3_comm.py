"""Message families that users paste in public threads (torchrun's agent stopped by a signal, srun's and
torch.multiprocessing.spawn's report of a rank that exited, NCCL's own CUDA checks and ncclInvalidArgument),
each with the thread it was read from beside its lines: two or more messages of the family read to their
conclusion, and a near miss in similar words that must read otherwise. The wordings are the libraries' own
(the source file is named beside each family)."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion, role of the first match)
CASES = [
    # torch/distributed/elastic/agent/server/api.py (`Received %s death signal, shutting down workers`) and
    # elastic/multiprocessing/api.py (SignalException `Process %d got signal: %d`, `Sending process %s closing
    # signal %s`): the agent got SIGHUP when the terminal it ran in closed, nohup or not
    # https://github.com/keyu-tian/SparK/issues/19 (fixed by tmux), https://github.com/FlagOpen/FlagEmbedding/issues/695
    ("launcher-signalled",
     "torch.distributed.elastic.multiprocessing.api.SignalException: Process 792735 got signal: 1",
     "ddp-errors:launcher-signalled", "cause"),
    # https://github.com/OpenMOSS/MOSS/issues/237, https://github.com/open-mmlab/mmrotate/issues/210
    ("launcher-signalled",
     "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers",
     "ddp-errors:launcher-signalled", "cause"),
    # https://github.com/pytorch/pytorch/issues/67538, https://github.com/hiyouga/LlamaFactory/issues/3036
    ("launcher-signalled",
     "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 102241 closing signal SIGHUP\n"
     "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 102242 closing signal SIGHUP",
     "ddp-errors:launcher-signalled", "cause"),
    ("launcher-signalled",
     "[2024-06-01 10:00:00,000] torch.distributed.elastic.agent.server.api: [INFO] Received 15 death signal, "
     "shutting down workers",
     "ddp-errors:launcher-signalled", "cause"),
    # Slurm's srun task-exit report (_task_finish in launch_slurm.c, src/srun/launch.c in newer releases:
    # `%s: task(s) %s: Exited with exit code %d`): a rank that exited with an error of its own; its output
    # above holds the cause
    # https://github.com/facebookresearch/ParlAI/issues/3084
    ("srun-task-exit",
     "srun: error: slurm-job-compute-0-0: tasks 2-7: Exited with exit code 1",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("srun-task-exit",
     "srun: error: gpu-node-3: task 5: Exited with exit code 1",
     "ddp-errors:rank-failed-first", "knock-on"),
    # ... and the rank's own error, when pasted with it, comes first
    ("srun-task-exit",
     "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/../c10d/NCCLUtils.hpp:82, invalid argument, NCCL "
     "version 2.4.8\n"
     "srun: error: slurm-job-compute-0-1: tasks 8-13,15: Exited with exit code 1",
     "nccl-errors:nccl-error-unexplained", "cause"),
    # torch/multiprocessing/spawn.py ProcessExitedException (`process %d terminated with exit code %d`)
    # https://github.com/Plachtaa/VITS-fast-fine-tuning/issues/399, https://github.com/MCG-NKU/E2FGVI/issues/56
    ("spawn-exit",
     "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 1",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("spawn-exit",
     "torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with exit code 1",
     "ddp-errors:rank-failed-first", "knock-on"),
    # ncclGetErrorString for ncclInvalidArgument as torch prints it (ProcessGroupNCCL / NCCLUtils.hpp)
    ("nccl-invalid-argument",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
     "invalid argument (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5\n"
     "ncclInvalidArgument: Invalid value for an argument.",
     "nccl-errors:nccl-error-unexplained", "cause"),
    # https://github.com/facebookresearch/maskrcnn-benchmark/issues/699 (older torch's spelling)
    ("nccl-invalid-argument",
     "RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1549635019666/work/torch/lib/c10d/"
     "ProcessGroupNCCL.cpp:388, invalid argument",
     "nccl-errors:nccl-error-unexplained", "cause"),
    # NCCL's CUDACHECK / CUCHECK on its WARN line (src/include/checks.h, cudawrap.h) with no `-> N` chain
    # pasted: NVLS/multicast, cuMem, a driver call inside NCCL failed
    # (at transport/nvls.cc with the codes of a fabric manager down or restarted: NVLS's own conclusion)
    # https://github.com/NVIDIA/nccl/issues/1672
    ("nccl-cuda-failure",
     "[2025-04-06 22:31:56] ccw-gpu-128:3485254:3487188 [0] transport/nvls.cc:598 NCCL WARN Cuda failure 1 "
     "'invalid argument'",
     "nccl-errors:nvls-fabric-manager", "cause"),
    # https://github.com/NVIDIA/nccl/issues/1788
    ("nccl-cuda-failure",
     "[2025-07-21 19:05:29] node004:27907:27907 [1] transport/nvls.cc:254 NCCL WARN Cuda failure 401 'the "
     "operation cannot be performed in the present state'",
     "nccl-errors:nvls-fabric-manager", "cause"),
    # https://github.com/NVIDIA/nccl/issues/955 (a driver older than the runtime NCCL was built for)
    ("nccl-cuda-failure",
     "dl-pod:205826:205907 [0] NCCL WARN Cuda failure 'API call is not supported in the installed CUDA "
     "driver'",
     "nccl-errors:nccl-error-unexplained", "cause"),
    # src/mnnvl.cc: multi-node NVLink announced but its IMEX channels do not work
    # https://github.com/NVIDIA/nccl/issues/1925
    ("nccl-cuda-failure",
     "[2025-11-30 05:55:16] pod:3769901:3769901 [1] mnnvl.cc:67 NCCL WARN MNNVL (cliqueSize 8) is available "
     "but not working on this system. Check the IMEX channel configuration "
     "(/dev/nvidia-caps-imex-channels). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.",
     "nccl-errors:nccl-error-unexplained", "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, conclusion it must not be first, what must be first instead or None)
NEAR_MISSES = [
    # the agent's SIGTERM to its own workers after one of them failed is no signal from outside
    ("launcher-signalled",
     "W0521 18:06:31.916000 2915962 site-packages/torch/distributed/elastic/multiprocessing/api.py:897] "
     "Sending process 2916307 closing signal SIGTERM",
     "ddp-errors:launcher-signalled", None),
    # a worker killed by SIGKILL is the OOM killer's family (host-faults), not the agent's signal
    ("launcher-signalled",
     "torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal: 9",
     "ddp-errors:launcher-signalled", None),
    # srun's report of tasks killed for memory is the step's OOM, not a rank's own error
    ("srun-task-exit",
     "srun: error: gpu-node-3: task 5: Out Of Memory",
     "ddp-errors:rank-failed-first", "slurm-job:step-oom-killed"),
    # a step that ended cleanly is no failure
    ("spawn-exit",
     "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 0",
     "ddp-errors:rank-failed-first", None),
    # NCCL's CUDA failure that names its cause keeps its own conclusion
    ("nccl-cuda-failure",
     "host:1:2 [3] misc/utils.cc:12 NCCL WARN Cuda failure 'invalid device ordinal'",
     "nccl-errors:nccl-error-unexplained", "ddp-errors:world-size-mismatch"),
    ("nccl-cuda-failure",
     "node:1:2 [0] enqueue.cc:1556 NCCL WARN Cuda failure 'no kernel image is available for execution on the "
     "device'",
     "nccl-errors:nccl-error-unexplained", "nccl-errors:torch-nccl-mismatch"),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
