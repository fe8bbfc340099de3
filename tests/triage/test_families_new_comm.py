"""Message families of a job that never got to train because of how it was launched (a script started without
a launcher, a CPU tensor handed to NCCL, DeepSpeed's multi-node launcher that cannot ssh to its hosts): two or
more messages of each family read to their conclusion, and near misses in similar words that must read
otherwise. The wordings are the libraries' own (the source file is named beside each family)."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion, role of the first match)
CASES = [
    # torch/distributed/rendezvous.py `_env_rendezvous_handler` (`_env_error`: `Error initializing
    # torch.distributed using env:// rendezvous: environment variable %s expected, but not set`), for RANK,
    # WORLD_SIZE, MASTER_ADDR and MASTER_PORT: no launcher exported them
    ("no-launcher",
     '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/rendezvous.py", line 232, in '
     "_env_rendezvous_handler\n"
     '    rank = int(_get_env_or_raise("RANK"))\n'
     "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK "
     "expected, but not set",
     "ddp-errors:no-launcher", "cause"),
    ("no-launcher",
     "[rank3]: ValueError: Error initializing torch.distributed using env:// rendezvous: environment "
     "variable WORLD_SIZE expected, but not set",
     "ddp-errors:no-launcher", "cause"),
    ("no-launcher",
     "RuntimeError: Error initializing torch.distributed using env:// rendezvous: environment variable "
     "MASTER_PORT expected, but not set",
     "ddp-errors:no-launcher", "cause"),
    # torch/distributed/distributed_c10d.py `_get_default_group` (ValueError in torch 2.x, RuntimeError
    # before) and torch 1.x's `_check_default_pg` assertion: a collective or get_rank() with no process group
    ("no-launcher",
     '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py", line 1008, in '
     "_get_default_group\n"
     "    raise ValueError(\n"
     "ValueError: Default process group has not been initialized, please make sure to call "
     "init_process_group.",
     "ddp-errors:no-launcher", "cause"),
    ("no-launcher",
     "RuntimeError: Default process group has not been initialized, please make sure to call "
     "init_process_group.",
     "ddp-errors:no-launcher", "cause"),
    ("no-launcher",
     "AssertionError: Default process group is not initialized",
     "ddp-errors:no-launcher", "cause"),
    # ... and the message after an error of the process group's own init reads as that error first
    ("no-launcher",
     "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/2 clients "
     "joined.\n"
     "RuntimeError: Default process group has not been initialized, please make sure to call "
     "init_process_group.",
     "ddp-errors:rendezvous-incomplete", "cause"),
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp `check_gpu_single_tensor` (`Tensors must be CUDA and
    # dense`: RuntimeError, C10_THROW_ERROR(ValueError, ...) in newer torch)
    ("tensor-not-on-gpu",
     '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py", line 2050, in '
     "all_reduce\n"
     "    work = group.allreduce([tensor], opts)\n"
     "ValueError: Tensors must be CUDA and dense",
     "ddp-errors:tensor-not-on-gpu", "cause"),
    ("tensor-not-on-gpu",
     "[rank0]: RuntimeError: Tensors must be CUDA and dense",
     "ddp-errors:tensor-not-on-gpu", "cause"),
    # torch/csrc/distributed/c10d/ProcessGroup.hpp `getBackend` (`No backend type associated with device
    # type ` and the device type), an NCCL-only group given a CPU tensor from torch 2.0 on
    ("tensor-not-on-gpu",
     "    work = group.broadcast([tensor], opts)\n"
     "RuntimeError: No backend type associated with device type cpu",
     "ddp-errors:tensor-not-on-gpu", "cause"),
    # DeepSpeed deepspeed/launcher/runner.py: the passwordless-ssh check of the first host (`ssh -o
    # PasswordAuthentication=no HOST hostname` through subprocess.check_call, a list or a shell string by
    # version, then `Using hostfile at %s but host=%s was not reachable via ssh. ...`) and the master-address
    # lookup (`ssh HOST hostname -I`); 255 is ssh's own failure
    ("launcher-ssh-failed",
     "subprocess.CalledProcessError: Command '['ssh', '-o', 'PasswordAuthentication=no', 'worker-1', "
     "'hostname']' returned non-zero exit status 255.\n\n"
     "During handling of the above exception, another exception occurred:\n\n"
     "RuntimeError: Using hostfile at /job/hostfile but host=worker-1 was not reachable via ssh. If you "
     "are running with a single node please remove /job/hostfile or setup passwordless ssh.",
     "ddp-errors:launcher-ssh-failed", "cause"),
    ("launcher-ssh-failed",
     "subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no node-1 hostname' returned "
     "non-zero exit status 255.",
     "ddp-errors:launcher-ssh-failed", "cause"),
    ("launcher-ssh-failed",
     "subprocess.CalledProcessError: Command '['ssh worker-1 hostname -I']' returned non-zero exit "
     "status 255.",
     "ddp-errors:launcher-ssh-failed", "cause"),
    # pdsh src/modules/sshcmd.c (`%p: %s: ssh exited with exit code %d`), as DeepSpeed's default launcher
    # runs it
    ("launcher-ssh-failed",
     "node-1: Host key verification failed.\n"
     "pdsh@node-0: node-1: ssh exited with exit code 255",
     "ddp-errors:launcher-ssh-failed", "cause"),
    ("launcher-ssh-failed",
     "gpu-b: Permission denied (publickey).\n"
     "pdsh@gpu-a: gpu-b: ssh exited with exit code 255",
     "ddp-errors:launcher-ssh-failed", "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, conclusion it must not be first, what must be first instead or None)
NEAR_MISSES = [
    # the tcp:// init method's own complaint is no missing launcher
    ("no-launcher",
     "RuntimeError: Error initializing torch.distributed using tcp:// rendezvous: port number missing",
     "ddp-errors:no-launcher", None),
    # an application's variable of its own in the same words
    ("no-launcher",
     "ValueError: Environment variable HF_HOME expected, but not set",
     "ddp-errors:no-launcher", None),
    # the launcher's store that waits for ranks: the variables were there
    ("no-launcher",
     "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/2 clients "
     "joined.",
     "ddp-errors:no-launcher", "ddp-errors:rendezvous-incomplete"),
    # the same lookup for another device (an XPU tensor on a gloo group) is no CPU tensor on NCCL
    ("tensor-not-on-gpu",
     "RuntimeError: No backend type associated with device type xpu",
     "ddp-errors:tensor-not-on-gpu", None),
    # the next check of the same function: the tensor is on the GPU, but not contiguous
    ("tensor-not-on-gpu",
     "ValueError: Tensors must be contiguous",
     "ddp-errors:tensor-not-on-gpu", None),
    # pdsh reached the host: the command run there failed (exit code 1), ssh did not
    ("launcher-ssh-failed",
     "pdsh@node-0: node-1: ssh exited with exit code 1",
     "ddp-errors:launcher-ssh-failed", None),
    # ssh worked; `hostname -I` failed on the host
    ("launcher-ssh-failed",
     "subprocess.CalledProcessError: Command '['ssh', 'node-1', 'hostname', '-I']' returned non-zero "
     "exit status 1.",
     "ddp-errors:launcher-ssh-failed", None),
    # another program's exit status 255
    ("launcher-ssh-failed",
     "subprocess.CalledProcessError: Command '['git', 'fetch', 'origin']' returned non-zero exit status 255.",
     "ddp-errors:launcher-ssh-failed", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
