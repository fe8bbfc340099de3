"""Message families of session 47 (ddp-errors): a rank that cannot fetch the NCCL unique id of a new
communicator from the c10d store (ProcessGroupNCCL.cpp's broadcastUniqueNCCLID: `[N] is setting up NCCL
communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key 'K', but
store->get('K') got error: ...`), in torch 1.x's and 2.0's spelling (`retreiving`) and with the store
error of each release: `Socket Timeout`, `Timeout waiting for key: ... after`, and TCPStore.cpp doWait's
`wait timeout after Nms, keys: ...` (torch 2.3 and later). A timeout is the ranks waiting for rank 0 to
reach that communicator's first collective; a connection the store's host dropped is a rank that failed
first. A rank's stack in the barrier that ends Lightning's `Trainer.save_checkpoint`
(`self.strategy.barrier("Trainer.save_checkpoint")`, trainer.py), which every rank must reach: the save ran
on some ranks only. Messages of each wording read to their conclusion, and near misses in similar words
that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion, role)
CASES = [
    ("nccl-id-store-timeout",
     "[rank3]:   File \"/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py\", "
     "line 2288, in all_reduce\n"
     "[rank3]:     work = group.allreduce([tensor], opts)\n"
     "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving "
     "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait "
     "timeout after 1800000ms, keys: /default_pg/0//cuda//0\n"
     "[rank3]: Exception raised from doWait at /pytorch/torch/csrc/distributed/c10d/TCPStore.cpp:569 "
     "(most recent call first):",
     "ddp-errors:ranks-wait-for-peer", "knock-on"),
    ("nccl-id-store-timeout",
     "torch.distributed.DistBackendError: [5] is setting up NCCL communicator and retrieving ncclUniqueId "
     "from [0] via c10d key-value store by key '1', but store->get('1') got error: wait timeout after "
     "600000ms, keys: /default_pg/1//cuda//1. This may indicate a possible application crash on rank 0 "
     "or a network set up issue.",
     "ddp-errors:ranks-wait-for-peer", "knock-on"),
    ("nccl-id-store-timeout-old-spelling",
     "Traceback (most recent call last):\n"
     "  File \"train.py\", line 88, in <module>\n"
     "    model = DDP(model, device_ids=[local_rank])\n"
     "RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d "
     "key-value store by key '0', but store->get('0') got error: Socket Timeout\n"
     "Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:580 (most recent "
     "call first):",
     "ddp-errors:ranks-wait-for-peer", "knock-on"),
    ("nccl-id-store-timeout-old-spelling",
     "RuntimeError: [2] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d "
     "key-value store by key '0', but store->get('0') got error: Timeout waiting for key: default_pg/0/0 "
     "after 1800000 ms",
     "ddp-errors:ranks-wait-for-peer", "knock-on"),
    ("nccl-id-store-reset-old-spelling",
     "RuntimeError: [7] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d "
     "key-value store by key '0', but store->get('0') got error: Connection reset by peer\n"
     "Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:604 (most recent "
     "call first):",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("nccl-id-store-reset-old-spelling",
     "RuntimeError: [4] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d "
     "key-value store by key '2', but store->get('2') got error: Broken pipe",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("lightning-save-checkpoint-barrier",
     "Traceback (most recent call last):\n"
     "  File \"/work/train.py\", line 141, in on_train_end\n"
     "    trainer.save_checkpoint(os.path.join(out_dir, \"final.ckpt\"))\n"
     "  File \"/env/lib/python3.11/site-packages/lightning/pytorch/trainer/trainer.py\", line 1369, in "
     "save_checkpoint\n"
     "    self.strategy.barrier(\"Trainer.save_checkpoint\")\n"
     "  File \"/env/site-packages/lightning/pytorch/strategies/ddp.py\", line 302, in barrier\n"
     "    torch.distributed.barrier(device_ids=self.determine_ddp_device_ids())\n"
     "KeyboardInterrupt",
     "ddp-errors:code-path-mismatch", "knock-on"),
    ("lightning-save-checkpoint-barrier",
     "[rank1]:   File \"/opt/conda/lib/site-packages/pytorch_lightning/callbacks/model_checkpoint.py\", "
     "line 390, in _save_checkpoint\n"
     "[rank1]:     trainer.save_checkpoint(filepath, self.save_weights_only)\n"
     "[rank1]:   File \"/opt/conda/lib/site-packages/pytorch_lightning/trainer/trainer.py\", line 1365, "
     "in save_checkpoint\n"
     "[rank1]:     self.strategy.barrier(\"Trainer.save_checkpoint\")\n"
     "[rank1]:   File \"/opt/conda/lib/site-packages/torch/distributed/distributed_c10d.py\", line 4159, "
     "in barrier\n"
     "[rank1]:     work = group.barrier(opts=opts)",
     "ddp-errors:code-path-mismatch", "knock-on"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # the store's host hung up on the rank: rank 0 went away, not a wait for a live peer
    ("nccl-id-store-reset",
     "torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId "
     "from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer",
     "ddp-errors:ranks-wait-for-peer", "ddp-errors:rank-failed-first"),
    # the same store timeout on the rendezvous's own keys is no communicator set-up
    ("store-timeout-rendezvous",
     "torch.distributed.DistStoreError: wait timeout after 900000ms, keys: "
     "/torch.elastic.rendezvous.job-7/0/assigned_ranks",
     "ddp-errors:ranks-wait-for-peer", None),
    # a barrier the script calls itself names no checkpoint save that only some ranks ran
    ("plain-barrier",
     "  File \"/work/train.py\", line 77, in main\n"
     "    torch.distributed.barrier()\n"
     "  File \"/env/lib/python3.11/site-packages/torch/distributed/c10d_logger.py\", line 81, in wrapper\n"
     "    return func(*args, **kwargs)",
     "ddp-errors:code-path-mismatch", None),
    # a rank whose save ran out of GPU memory: its own error comes before the peers' wait in the barrier
    ("lightning-save-checkpoint-barrier-after-oom",
     "[rank1]:     self.strategy.barrier(\"Trainer.save_checkpoint\")\n"
     "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 79.15 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has "
     "78.11 GiB memory in use. Of the allocated memory 74.20 GiB is allocated by PyTorch, and 2.31 GiB is "
     "reserved by PyTorch but unallocated.",
     "ddp-errors:code-path-mismatch", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
