"""Message families of session 46 (nccl-errors): a link-local address (169.254.0.0/16, fe80::/10) in
the list of interfaces NCCL uses (bootstrap.cc `Bootstrap : Using`, net_socket.cc `NET/Socket : Using
[N]name:addr<0> ...`, net_ib's `; OOB name:addr`) or as the address NCCL's connect failed to reach
(misc/socket.cc, os/linux.cc: `socketStartConnect: Connect to %s failed : %s` and the later releases'
words); NCCL's failed connect in those words and as torch's unprefixed `Last error:` line; NCCL 2.23+'s
version check at init (init.cc `Mismatched NCCL version detected : rank %d version %d rank %d version
%d`); NCCL 2.30's duplicate-GPU check (init.cc `Multiple Ranks are using the same GPU/Partition. Set
NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.`). Two messages of each family read to their
conclusion, and near misses in similar words that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

SYSTEM_ERROR = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
    "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
    "Last error:\n")

# (family, text, conclusion)
CASES = [
    ("link-local-interface",
     "gpu-a:2210:2210 [0] NCCL INFO Bootstrap : Using usb0:169.254.3.1<0>\n"
     "gpu-a:2210:2210 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so)\n"
     "gpu-a:2210:2210 [0] NCCL INFO cudaDriverVersion 12040",
     "nccl-errors:socket-ifname-wrong"),
    ("link-local-interface",
     "node7:518:518 [2] NCCL INFO NET/Socket : Using [0]ens3f0:10.20.0.7<0> [1]vethd41c2a9:"
     "fe80::a4c1:9bff:fe02:11%vethd41c2a9<0>\n"
     "node7:518:518 [2] NCCL INFO Using network Socket\n"
     "node7:518:518 [2] NCCL INFO P2P is disabled between connected GPUs 2 and 3. You can repress this "
     "message with NCCL_IGNORE_DISABLED_P2P=1.",
     "nccl-errors:socket-ifname-wrong"),
    ("link-local-interface",
     "ws-2:3120:3120 [0] NCCL INFO Bootstrap : Using eno1:avahi:169.254.40.7<0>",
     "nccl-errors:socket-ifname-wrong"),
    ("link-local-interface",
     "h100-3:77:77 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:"
     "fe80::e61d:2d03:f0:1a2b%ib0<0>",
     "nccl-errors:socket-ifname-wrong"),
    ("link-local-connect",
     SYSTEM_ERROR + "socketStartConnect: Connect to 169.254.12.8<35111> failed : Software caused "
     "connection abort",
     "nccl-errors:socket-ifname-wrong"),
    ("link-local-connect",
     "w2:9021:9102 [5] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
     "fe80::966d:ae03:a2:8cf0%ib1<17943> failed : Network is unreachable\n"
     "w2:9021:9102 [5] NCCL INFO misc/socket.cc:565 -> 2\n"
     "w2:9021:9102 [5] NCCL INFO bootstrap.cc:274 -> 2",
     "nccl-errors:socket-ifname-wrong"),
    ("link-local-connect",
     "[rank12]: n4:301:388 [4] os/linux.cc:302 NCCL WARN ncclOsSocketStartConnect: connect to "
     "169.254.0.2<40001> failed : No route to host",
     "nccl-errors:socket-ifname-wrong"),
    ("connect-failed",
     SYSTEM_ERROR + "socketStartConnect: Connect to 10.4.0.21<50113> failed : No route to host",
     "nccl-errors:network-errors-in-log"),
    ("connect-failed",
     "trainer-1:4410:4490 [3] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> "
     "returned 113(No route to host) errno 115(Operation now in progress)\n"
     "trainer-1:4410:4490 [3] NCCL INFO misc/socket.cc:570 -> 2",
     "nccl-errors:network-errors-in-log"),
    ("connect-failed",
     "g9:12:40 [1] misc/socket.cc:608 NCCL WARN socketPollConnect: connect to 192.168.8.3<44312> returned "
     "Connection refused, exceeded error retry count after 35 attempts",
     "nccl-errors:network-errors-in-log"),
    ("nccl-version-check",
     "node-2:8812:8890 [1] init.cc:901 NCCL WARN Mismatched NCCL version detected : rank 9 version 22005 "
     "rank 1 version 21903\n"
     "node-2:8812:8890 [1] NCCL INFO init.cc:1601 -> 5\n"
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
     "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5",
     "nccl-errors:nccl-version-differs-from-peers"),
    ("nccl-version-check",
     "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)\n"
     "Last error:\n"
     "Mismatched NCCL version detected : rank 0 version 22703 rank 3 version 22602",
     "nccl-errors:nccl-version-differs-from-peers"),
    ("multi-rank-gpu",
     "host-a:551:551 [0] init.cc:1057 NCCL WARN Multiple Ranks are using the same GPU/Partition. Set "
     "NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.\n"
     "host-a:551:551 [0] NCCL INFO init.cc:1843 -> 5",
     "nccl-errors:duplicate-gpu"),
    ("multi-rank-gpu",
     "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
     "Last error:\n"
     "Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this "
     "configuration.",
     "nccl-errors:duplicate-gpu"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    assert_first(text, family, conclusion)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # a routable address in the list of interfaces is no wrong interface by itself
    ("link-local-interface",
     "gpu-a:2210:2210 [0] NCCL INFO NET/Socket : Using [0]ens3f0:10.20.0.7<0> [1]ens3f1:10.21.0.7<0>\n"
     "gpu-a:2210:2210 [0] NCCL INFO Using network Socket",
     "nccl-errors:socket-ifname-wrong", None),
    # a link-local address in another program's line (a DNS cache, a metadata service) is not NCCL's
    ("link-local-connect",
     "urllib3.exceptions.MaxRetryError: HTTPConnectionPool(host='169.254.169.254', port=80): Max retries "
     "exceeded with url: /latest/meta-data/ (Caused by NewConnectionError('Failed to establish a new "
     "connection: [Errno 113] No route to host'))",
     "nccl-errors:socket-ifname-wrong", None),
    # a connect that is still being retried is no failure of its own
    ("connect-failed",
     "g9:12:40 [1] NCCL INFO socketPollConnect: connect to 192.168.8.3<44312> returned Connection refused, "
     "retrying (1/34) after sleep for 100 msec\n"
     "g9:12:40 [1] NCCL INFO Connected all rings",
     "nccl-errors:network-errors-in-log", None),
    # the XML topology's own version is not the peers' NCCL
    ("nccl-version-check",
     "n1:10:10 [0] graph/xml.cc:290 NCCL WARN XML Topology has wrong version 2, 1 needed",
     "nccl-errors:nccl-version-differs-from-peers", None),
    # a rank that asked for more ranks than the job has is not a duplicate GPU
    ("multi-rank-gpu",
     "n1:10:10 [0] init.cc:1730 NCCL WARN Invalid rank requested : 8/8",
     "nccl-errors:duplicate-gpu", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
