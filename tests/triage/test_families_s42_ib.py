"""Message family of session 42's ib-unused: NCCL setting its channels between ranks up over its socket
transport, so the traffic between nodes goes over TCP (nccl-errors:ib-unused). The wording is NCCL's own
(src/transport/net.cc, sendSetup/recvSetup): `Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s`
from 2.19 (`%d[%lx]`, the bus id, 2.12-2.18; `Channel %02d : ...` 2.5-2.11; `Ring %02d : %d -> %d [send] via
NET/%s/%d%s` before), `[receive]` on the other side, `/Shared` for shared p2p buffers. A channel over the
network transport is one between nodes: within a node NCCL uses P2P or SHM.

What the family does not read, single lines that single-node jobs print too: `NET/IB : No device found.`
(transport/net_ib.cc), `NET/Socket : Using [0]eth0:...` (transport/net_socket.cc), `Using network Socket`
(init.cc). A signature is one line, so "no IB device on a multi-node job" cannot be asked of RE2; the node
walk reads them with the node's ACTIVE ports. Public logs with these lines: AReaL#639, NVIDIA/nccl#952,
vllm-project/vllm#42075."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

IB_UNUSED = "nccl-errors:ib-unused"

# NCCL 2.19+ start-up on a node whose container has no /dev/infiniband: IB finds nothing, sockets carry it
NO_DEVICE_THEN_SOCKET = (
    "gpu-node-2:41207:41207 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>\n"
    "gpu-node-2:41207:41207 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    "gpu-node-2:41207:41410 [0] NCCL INFO NET/IB : No device found.\n"
    "gpu-node-2:41207:41410 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\n"
    "gpu-node-2:41207:41410 [0] NCCL INFO Using network Socket\n"
    "gpu-node-2:41207:41410 [0] NCCL INFO comm 0x55d0c1a0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 "
    "MNNVL 0\n"
    "gpu-node-2:41207:41410 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n"
    "gpu-node-2:41207:41410 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n"
    "gpu-node-2:41207:41410 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0")

# (family, text, conclusion, role of the first match)
CASES = [
    ("socket-channel", NO_DEVICE_THEN_SOCKET, IB_UNUSED, "cause"),
    # 2.23+: the IB plugin is tried and dropped, the socket plugin assigned (plugin/net.cc)
    ("socket-channel",
     "node7:3310:3388 [3] NCCL INFO Failed to initialize NET plugin IB\n"
     "node7:3310:3388 [3] NCCL INFO NET/Socket : Using [0]bond0:200.8.184.7<0>\n"
     "node7:3310:3388 [3] NCCL INFO Initialized NET plugin Socket\n"
     "node7:3310:3388 [3] NCCL INFO Assigned NET plugin Socket to comm\n"
     "node7:3310:3388 [3] NCCL INFO Channel 02/0 : 27[3] -> 3[3] [receive] via NET/Socket/0\n"
     "node7:3310:3388 [3] NCCL INFO Channel 02/0 : 3[3] -> 11[3] [send] via NET/Socket/0",
     IB_UNUSED, "cause"),
    # NCCL_IB_DISABLE=1 left set: NCCL says so, then sockets between the nodes
    ("socket-channel",
     "trainer-0:88:412 [1] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
     "trainer-0:88:412 [1] NCCL INFO NET/Socket : Using [0]ens5:172.31.4.37<0>\n"
     "trainer-0:88:412 [1] NCCL INFO Using network Socket\n"
     "trainer-0:88:412 [1] NCCL INFO Channel 01/0 : 1[1] -> 9[1] [send] via NET/Socket/0",
     IB_UNUSED, "cause"),
    # the send line alone, 2.19+ (nvmlDev in brackets) and its receive twin
    ("socket-channel",
     "gpu-node-2:41207:41410 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
     IB_UNUSED, "cause"),
    ("socket-channel",
     "gpu-node-3:51200:51377 [0] NCCL INFO Channel 03/0 : 8[0] -> 0[0] [receive] via NET/Socket/0",
     IB_UNUSED, "cause"),
    # 2.12-2.18: the bus id in brackets; shared p2p buffers
    ("socket-channel",
     "dgx-a2:2211:2275 [4] NCCL INFO Channel 00/0 : 4[b7000] -> 12[b7000] [send] via NET/Socket/1",
     IB_UNUSED, "cause"),
    ("socket-channel",
     "dgx-a2:2211:2275 [4] NCCL INFO Channel 05/1 : 12[b7000] -> 4[b7000] [receive] via NET/Socket/1/Shared",
     IB_UNUSED, "cause"),
    # 2.5-2.11: no connection index
    ("socket-channel",
     "server1:117953:118010 [7] NCCL INFO Channel 00 : 7[b1000] -> 8[1a000] [send] via NET/Socket/0",
     IB_UNUSED, "cause"),
    ("socket-channel",
     "server3:15223:15290 [0] NCCL INFO Channel 01 : 15[b1000] -> 0[1a000] [receive] via NET/Socket/0",
     IB_UNUSED, "cause"),
    # before 2.5: rings
    ("socket-channel",
     "ip-172-31-1-93:45294:45320 [0] NCCL INFO Ring 00 : 7 -> 8 [send] via NET/Socket/0",
     IB_UNUSED, "cause"),
    ("socket-channel",
     "ip-172-31-1-93:45294:45320 [0] NCCL INFO Ring 01 : 15 -> 0 [receive] via NET/Socket/0",
     IB_UNUSED, "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, the conclusion that must not come first, the one that must, or None)
NEAR_MISSES = [
    # a single-node job: NCCL initialises its network (IB finds nothing, sockets) but never uses it
    ("socket-channel",
     "ubuntu:2061:2061 [0] NCCL INFO Bootstrap : Using eno1:172.22.116.89<0>\n"
     "ubuntu:2061:2061 [0] NCCL INFO NCCL version 2.22.3+cuda12.5\n"
     "ubuntu:2061:2061 [0] NCCL INFO NET/IB : No device found.\n"
     "ubuntu:2061:2061 [0] NCCL INFO NET/Socket : Using [0]eno1:172.22.116.89<0>\n"
     "ubuntu:2061:2061 [0] NCCL INFO Using network Socket\n"
     "ubuntu:2061:2061 [0] NCCL INFO ncclCommInitRank comm 0x564300ddbb50 rank 0 nranks 1 cudaDev 0 "
     "nvmlDev 0 busId 1000 commId 0x506d690a4886b5c5 - Init START",
     IB_UNUSED, None),
    # ... eight GPUs of one node: P2P and SHM channels only
    ("socket-channel",
     "node1:900:960 [0] NCCL INFO NET/IB : No device found.\n"
     "node1:900:960 [0] NCCL INFO Using network Socket\n"
     "node1:900:960 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
     "node1:900:960 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via SHM/direct/direct",
     IB_UNUSED, None),
    # AReaL#639's only NCCL line: the socket transport's start-up, printed by a single-node job as well
    # (the narrower rule: no line of it says the job spans nodes)
    ("socket-channel", "NCCL INFO NET/Socket : Using [0]bond0:200.8.184.2<0>", IB_UNUSED, None),
    # NCCL_IB_DISABLE=1 read from the environment says nothing of other nodes
    ("socket-channel", "trainer-0:88:412 [1] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
     IB_UNUSED, None),
    # channels over InfiniBand are the transport working
    ("socket-channel",
     "gpu-node-2:41207:41410 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; "
     "OOB eth0:10.0.0.5<0>\n"
     "gpu-node-2:41207:41410 [0] NCCL INFO Using network IB\n"
     "gpu-node-2:41207:41410 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] "
     "via NET/IB/0/GDRDMA",
     IB_UNUSED, None),
    # the socket transport on Docker's bridge is the interface, whatever carries it
    ("socket-channel",
     "node1:1200:1250 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>",
     IB_UNUSED, "nccl-errors:socket-ifname-wrong"),
    # a socket error names the network's failure, not the transport choice
    ("socket-channel",
     "node1:1200:1250 [0] NCCL WARN NET/Socket : socket progress error",
     IB_UNUSED, "nccl-errors:network-errors-in-log"),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
