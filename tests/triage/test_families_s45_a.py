"""Message families of session 45 (nccl-errors): Gloo's TCP device that finds no address for the
interface it was given (gloo/transport/tcp/device.cc, `Unable to find address for: `), aws-ofi-nccl's
fi_getinfo that finds no EFA device (`OFI fi_getinfo() call failed: No data available`), an older
libnccl refusing a newer caller's undefined config value (NCCL init.cc, `Invalid config %s attribute
value -2147483648`), the proxy service's Connect ending in a remote error (NCCL proxy.cc, `[Proxy
Service %d] Failed to execute operation Connect from rank %d, retcode 6`) and nccl-tests' summary of a
run whose results all checked out (`# Out of bounds values : 0 OK`). Two messages of each family read
to their conclusion, and near misses in similar words that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

PROXY_CHAIN = (
    "node-b:4411:4502 [2] NCCL INFO transport/net.cc:402 -> 6\n"
    "node-b:4411:4502 [2] NCCL INFO transport.cc:165 -> 6\n"
    "node-b:4411:4502 [2] NCCL INFO init.cc:1222 -> 6\n"
    "node-b:4411:4502 [2] NCCL INFO group.cc:64 -> 6 [Async thread]\n"
    "node-b:4411:4411 [2] NCCL INFO group.cc:418 -> 3\n"
    "node-b:4411:4411 [2] NCCL INFO group.cc:95 -> 3")

# (family, text, conclusion)
CASES = [
    ("gloo-no-address",
     "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] "
     "ifa != nullptr. Unable to find address for: eth0",
     "nccl-errors:socket-ifname-wrong"),
    ("gloo-no-address",
     "(RayWorkerWrapper pid=5120) ERROR worker_base.py:620 RuntimeError: [../third_party/gloo/gloo/"
     "transport/tcp/device.cc:84] ifa != nullptr. Unable to find address for: ens5f0np0",
     "nccl-errors:socket-ifname-wrong"),
    ("ofi-no-efa-device",
     "gpu-st-p5-1:3310:3390 [4] nccl_net_ofi_rdma_init:7737 NCCL WARN NET/OFI OFI fi_getinfo() call failed: "
     "No data available",
     "nccl-errors:ib-unused"),
    ("ofi-no-efa-device",
     "[1,3]<stdout>:compute-dy-p4d-2:912:960 [3] nccl_net_ofi_init:1421 NCCL WARN NET/OFI OFI fi_getinfo() "
     "call failed: No data available\n"
     "[1,3]<stdout>:compute-dy-p4d-2:912:960 [3] NCCL INFO NET/IB : No device found.\n"
     "[1,3]<stdout>:compute-dy-p4d-2:912:960 [3] NCCL INFO NET/Socket : Using [0]eth0:10.0.4.17<0>",
     "nccl-errors:ib-unused"),
    ("config-undef-refused",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, "
     "invalid argument, NCCL version 2.14.3\n"
     "ncclInvalidArgument: Invalid value for an argument.\n"
     "Last error:\n"
     "Invalid config blocking attribute value -2147483648",
     "nccl-errors:torch-nccl-mismatch"),
    ("config-undef-refused",
     "trainer-0:771:771 [0] init.cc:1650 NCCL WARN Invalid config cgaClusterSize attribute value "
     "-2147483648\n"
     "trainer-0:771:771 [0] NCCL INFO init.cc:1729 -> 4",
     "nccl-errors:torch-nccl-mismatch"),
    ("proxy-connect-remote-error",
     "node-b:4411:4530 [2] proxy.cc:1460 NCCL WARN [Proxy Service 6] Failed to execute operation Connect "
     "from rank 6, retcode 6\n" + PROXY_CHAIN,
     "nccl-errors:network-errors-in-log"),
    ("proxy-connect-remote-error",
     "[rank3]: host7:2201:2260 [3] proxy.cc:1523 NCCL WARN [Proxy Service 3] Failed to execute operation "
     "Connect from rank 3, retcode 6\n"
     "[rank3]: host7:2201:2259 [3] proxy.cc:1064 NCCL WARN Proxy Call to rank 3 failed (Connect)\n"
     + PROXY_CHAIN,
     "nccl-errors:network-errors-in-log"),
    ("nccl-tests-passed",
     "   268435456      67108864     float     sum      -1   2280.4  117.71  220.71      0   2279.8  117.75  "
     "220.77      0\n"
     "# Out of bounds values : 0 OK\n"
     "# Avg bus bandwidth    : 98.2431 \n"
     "#",
     "nccl-errors:no-nccl-fault-found"),
    ("nccl-tests-passed",
     "node1:1001:1001 [0] NCCL INFO comm 0x5581a0 rank 0 nranks 8 cudaDev 0 busId 18000 - Destroy COMPLETE\n"
     "# Out of bounds values : 0 OK",
     "nccl-errors:no-nccl-fault-found"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    assert_first(text, family, conclusion)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # Gloo's pair that lost its peer has an address: the peer went away, not the interface
    ("gloo-no-address",
     "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
     "[10.1.0.7]:40112",
     "nccl-errors:socket-ifname-wrong", None),
    # fi_getinfo failing for another reason is not a missing EFA device
    ("ofi-no-efa-device",
     "ip-10-0-1-5:88:120 [0] nccl_net_ofi_rdma_init:7737 NCCL WARN NET/OFI OFI fi_getinfo() call failed: "
     "Function not implemented",
     "nccl-errors:ib-unused", None),
    # a blocking value the caller set itself is the caller's error, not another NCCL
    ("config-undef-refused",
     "n0:5:5 [0] init.cc:1650 NCCL WARN Invalid config blocking attribute value 5",
     "nccl-errors:torch-nccl-mismatch", None),
    # the proxy's set-up of a local transport that failed with a system error
    ("proxy-connect-remote-error",
     "n0:12:40 [0] proxy.cc:1460 NCCL WARN [Proxy Service 0] Failed to execute operation Setup from rank 0, "
     "retcode 2",
     "nccl-errors:network-errors-in-log", None),
    # wrong results are a fault
    ("nccl-tests-passed",
     "# Out of bounds values : 24 FAILED\n# Avg bus bandwidth    : 41.0075",
     "nccl-errors:no-nccl-fault-found", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
