"""Message families of session 47 (ddp-errors): a rank that cannot fetch the NCCL unique id of a new
communicator from the c10d store (ProcessGroupNCCL.cpp's broadcastUniqueNCCLID: `[N] is setting up NCCL
communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key 'K', but
store->get('K') got error: ...`), in torch 1.x's and 2.0's spelling (`retreiving`) and with the store
error of each release: `Socket Timeout`, `Timeout waiting for key: ... after`, and TCPStore.cpp doWait's
`wait timeout after Nms, keys: ...` (torch 2.3 and later). A timeout is the ranks waiting for rank 0 to
reach that communicator's first collective; a connection the store's host dropped is a rank that failed
first. Messages of each wording read to their conclusion, and near misses in similar words that must
read otherwise."""

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
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
