"""Message families of session 44: the peer a UCX InfiniBand/RoCE transport cannot build an address
handle for (openucx/ucx uct/ib/base/ib_device.c, `ibv_create_ah(...) for ... on DEV failed: %m`), and
torch 1.x's TCPStore that cannot resolve the master (`host not found: ` + gai_strerror). Two messages of
each family read to their conclusion, and near misses in similar words that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion)
CASES = [
    ("ucx-create-ah",
     "[1745563465.856286] [gpu-node1:1617 :0]       ib_device.c:1332 UCX  ERROR   ibv_create_ah(dlid=49152 "
     "sl=0 port=1 src_path_bits=0 dgid=::ffff:10.1.1.2 flow_label=0xffffffff sgid_index=3 traffic_class=106) "
     "for UD mlx5 connect on mlx5_3 failed: Connection timed out",
     "kv-transfer:peer-link-lost"),
    ("ucx-create-ah",
     "[1760000000.000001] [decode-7:88 :0]   ib_device.c:1290 UCX  ERROR ibv_create_ah(dlid=0 sl=0 port=1 "
     "src_path_bits=0 dgid=::ffff:192.168.8.4 sgid_index=3) for RC DCI on mlx5_0 failed: No route to host",
     "kv-transfer:peer-link-lost"),
    ("torch1-host-not-found",
     "    store = TCPStore(master_addr, master_port, start_daemon)\n"
     "ValueError: host not found: Name or service not known",
     "ddp-errors:master-unreachable"),
    ("torch1-host-not-found",
     "RuntimeError: host not found: Temporary failure in name resolution",
     "ddp-errors:master-unreachable"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    assert_first(text, family, conclusion)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # an address handle refused for a bad argument is a configuration matter, not a peer out of reach
    ("ucx-create-ah",
     "[1745563465.856286] [gpu-node1:1617 :0] ib_device.c:1332 UCX  ERROR ibv_create_ah(dlid=49152 sl=0 "
     "port=1) for UD mlx5 connect on mlx5_3 failed: Invalid argument",
     "kv-transfer:peer-link-lost", None),
    # a web client's lookup failure is not the master's
    ("torch1-host-not-found",
     "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries "
     "exceeded (Caused by NameResolutionError: Failed to resolve 'huggingface.co' ([Errno -2] Name or "
     "service not known))",
     "ddp-errors:master-unreachable", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
