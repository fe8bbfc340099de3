"""Message families of session 43's ncclrel: NCCL releases with a bug their maintainers confirmed, read by
the bug's own line (nccl-errors:nccl-release-bug; the walk matches the release against the known_issues
table). NCCL 2.18.1-2.18.5 and 2.19.1 failing P2P setup at transport.cc:153/154/173/174 (`Cuda failure
'invalid argument'`, NVIDIA/nccl#957), NCCL 2.24-2.26's NIC fusion losing the tree fallback's NET/0 (`Could
not find NET with id 0`, NVIDIA/nccl#1748) and NCCL 2.25.1's shared memory on recent Blackwell GPUs
(`ncclMaxSharedMem N exceeds device/fn maxSharedMem N`, NVIDIA/nccl-tests#287). Two or more messages of
each family read to their conclusion, and near misses in similar words that must read otherwise: the same
CUDA error in another NCCL file, the newer releases' wording, a version banner alone. The wordings are
NCCL's own (the source file is named beside each family)."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss, assert_never_cause

RELEASE_BUG = "nccl-errors:nccl-release-bug"

# (family, text, conclusion, role of the first match)
CASES = [
    # NCCL 2.18.1-2.18.5, 2.19.1 src/transport.cc ncclTransportP2pSetup:
    # CUDACHECKGOTO(cudaMemcpyAsync(&addr, ...)) at lines 153/154 (send) and 173/174 (recv), WARN("Cuda
    # failure '%s'") of src/include/checks.h; as mpirun
    # prefixes it (NVIDIA/nccl#957) and as NCCL prints it alone (#846)
    ("nccl-2.18-p2p-setup",
     "Fri Aug 11 12:31:45 2023[1,0]<stdout>:tomte401:1850301:1881341 [0] transport.cc:154 NCCL WARN Cuda "
     "failure 'invalid argument'\n"
     "Fri Aug 11 12:31:45 2023[1,0]<stdout>:tomte401:1850301:1881358 [0] proxy.cc:1485 NCCL WARN [Service "
     "thread] Error encountered progressing operation=Connect, res=3, closing connection",
     RELEASE_BUG, "cause"),
    ("nccl-2.18-p2p-setup",
     "worker-3:5120:5188 [2] transport.cc:154 NCCL WARN Cuda failure 'invalid argument'\n"
     "worker-3:5120:5188 [2] NCCL INFO init.cc:1089 -> 1\n"
     "worker-3:5120:5188 [2] NCCL INFO init.cc:1358 -> 1\n"
     "worker-3:5120:5188 [2] NCCL INFO group.cc:65 -> 1 [Async thread]",
     RELEASE_BUG, "cause"),
    ("nccl-2.18-p2p-setup",
     "(RayWorkerVllm pid=4028901) gpu-a:4028901:4029337 [1] transport.cc:173 NCCL WARN Cuda failure 'invalid "
     "argument'",
     RELEASE_BUG, "cause"),
    # NCCL 2.24-2.26 src/graph/topo.h: WARN("Could not find NET with id %lx", id), the hardcoded NET/0 of
    # the tree search's fallback after NIC fusion (NVIDIA/nccl#1748; topo.h:230 in 2.25.1, topo.h:234 in
    # 2.26.2; NVIDIA-NeMo/Run#266, NVIDIA-NeMo/Speech#13996)
    ("nccl-nic-fusion-net-id-0",
     "graph/search.cc:1135 NCCL WARN Could not find a path for pattern 1, falling back to simple order\n"
     "graph/topo.h:230 NCCL WARN Could not find NET with id 0\n"
     "torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/"
     "ProcessGroupNCCL.cpp:3376, internal error - please report this issue to the NCCL developers, NCCL "
     "version 2.25.1",
     RELEASE_BUG, "cause"),
    ("nccl-nic-fusion-net-id-0",
     "[rank4]:node-012:88410:88650 [4] graph/topo.h:234 NCCL WARN Could not find NET with id 0\n"
     "[rank4]:node-012:88410:88650 [4] NCCL INFO graph/search.cc:1136 -> 3\n"
     "[rank4]:node-012:88410:88650 [4] NCCL INFO init.cc:1025 -> 3",
     RELEASE_BUG, "cause"),
    # NCCL 2.25.1 src/enqueue.cc: INFO(NCCL_INIT, "ncclMaxSharedMem %d exceeds device/fn maxSharedMem %zu") on
    # sm_120 GPUs (NVIDIA/nccl-tests#287, #291, NVIDIA/nccl#1637; fixed in 2.26.2)
    ("nccl-2.25.1-blackwell-smem",
     "test:259034:259034 [0] NCCL INFO NCCL version 2.25.1+cuda12.8\n"
     "test:259034:259124 [0] NCCL INFO ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856\n"
     "test:259034:259126 [2] NCCL INFO ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856",
     RELEASE_BUG, "cause"),
    ("nccl-2.25.1-blackwell-smem",
     "localhost:11344:11344 [1] NCCL INFO ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856\n"
     "localhost:11344:11344 [1] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network "
     "plugin.",
     RELEASE_BUG, "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, the conclusion that must not come first, the one that must, or None)
NEAR_MISSES = [
    # the same CUDA error at transport/nvls.cc (NVIDIA/nccl#976, NCCL 2.18.5): the fabric manager, not the
    # P2P bug
    ("nccl-2.18-p2p-setup",
     "node7:4411:4470 [3] transport/nvls.cc:165 NCCL WARN Cuda failure 'invalid argument'\n"
     "node7:4411:4470 [3] NCCL INFO transport/nvls.cc:324 -> 1",
     RELEASE_BUG, "nccl-errors:nccl-error-unexplained"),
    # ... at transport/p2p.cc's legacy CUDA IPC (NVIDIA-NeMo/RL#564, NCCL 2.26.2)
    ("nccl-2.18-p2p-setup",
     "gpu-4:901:1022 [0] transport/p2p.cc:298 NCCL WARN Cuda failure 'invalid argument'",
     RELEASE_BUG, "nccl-errors:nccl-error-unexplained"),
    # ... another CUDA error at transport.cc:154
    ("nccl-2.18-p2p-setup",
     "gpu-4:901:1022 [0] transport.cc:154 NCCL WARN Cuda failure 'out of memory'",
     RELEASE_BUG, None),
    # the tree search's fallback alone (2.27+ print it as INFO): no failure
    ("nccl-nic-fusion-net-id-0",
     "graph/search.cc:1135 NCCL WARN Could not find a path for pattern 1, falling back to simple order",
     RELEASE_BUG, None),
    # NCCL 2.26+'s WARN (`cudaArch N ncclMaxSharedMem ...`) is not 2.25.1's bug
    ("nccl-2.25.1-blackwell-smem",
     "gpu-0:7781:7781 [0] enqueue.cc:50 NCCL WARN cudaArch 1200 ncclMaxSharedMem 82240 exceeds device/fn "
     "maxSharedMem 79856",
     RELEASE_BUG, None),
    # a version banner alone is no error, whatever the release
    ("nccl-release-banner",
     "gpu-0:7781:7781 [0] NCCL INFO NCCL version 2.25.1+cuda12.8\n"
     "gpu-0:7781:7781 [0] NCCL INFO cudaDriverVersion 12080",
     RELEASE_BUG, None),
    ("nccl-release-banner",
     "NCCL version 2.18.1+cuda12.1",
     RELEASE_BUG, None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)


@pytest.mark.parametrize("banner", [
    "NCCL version 2.18.1+cuda12.1",
    "gpu-0:7781:7781 [0] NCCL INFO NCCL version 2.25.1+cuda12.8",
    "hgx-2:311:311 [0] NCCL INFO NCCL version 2.20.3+cuda12.3",
])
def test_a_release_banner_is_never_a_release_bug(banner: str) -> None:
    assert_never_cause(banner, "nccl-release-banner", RELEASE_BUG)
