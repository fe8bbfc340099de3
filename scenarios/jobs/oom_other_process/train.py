#!/usr/bin/env python3
"""Scenario `oom_other_process`: a job that fits the GPU dies of CUDA OOM because another process holds it.

Needs `torch`; no GPU. The job is the `cuda_oom` job (cuda_oom/train.py: a nanoGPT-style GPT of
1.3B parameters run on torch's meta device under a model of the CUDA caching allocator of an 80 GB
H100, 79.11 GiB) at `--batch-size 4`, a configuration that fits an empty device (peak about 36
GiB). But the device is not empty: before the job, the launcher started a "stale notebook"
(stale_notebook.py, the registry's `bystander`): a `python3 -c "import os, sys, time ..."` process
that imported torch, holds 70 GiB of GPU 0 and idles, in a session of its own, with no RANK in its
environment and its output in WORKDIR/bystander.log, not in the job's log. The job sees it as a
real one sees such a process: in the GPU's list of running processes (WORKDIR/gpu0-processes,
what NVML reports), so only about 8.6 GiB is left to it. Its first forward pass fails on a small
request, and PyTorch's message names the other process first:

    torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total
    capacity of 79.11 GiB of which 287.94 MiB is free. Process 4049 has 70.00 GiB memory in use.
    Including non-PyTorch memory, this process has 8.83 GiB memory in use. Of the allocated ...

The job exits 1 a few seconds after start; the notebook runs on until the scenario is stopped
(`stop` kills it too). Without the notebook (run cuda_oom/train.py --batch-size 4) the same job
trains.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA_OOM = os.path.join(HERE, "..", "cuda_oom", "train.py")
GPU_PROCESSES = "gpu0-processes"  # in the working directory (the scenario's WORKDIR), as stale_notebook.py
BATCH_SIZE = 4  # fits an empty 80 GB device


def load_cuda_oom() -> ModuleType:
    """cuda_oom/train.py as a module (both jobs are called train.py, so by path, not by name)."""
    spec = importlib.util.spec_from_file_location("cuda_oom_train", os.path.normpath(CUDA_OOM))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list | None = None) -> int:
    """The cuda_oom job at batch 4 on a device shared with the processes in GPU_PROCESSES."""
    args = ["--batch-size", str(BATCH_SIZE), "--gpu-processes", os.path.abspath(GPU_PROCESSES)]
    return load_cuda_oom().main(args + list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
