"""Message families of the communication, launch and checkpoint runbooks, read by their own words:
each family pinned by lines of its kind (copied from public threads, the URL beside them, or
written as the library's source prints them) and by a near miss that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first
from tests.triage.families import found as _found

CASES = [
    # NCCL's shared memory: shm_open refused (EACCES) is the segment's permissions, not its size
    ("https://github.com/pytorch/pytorch/issues/37004",
     "node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied",
     "nccl-errors:shm-permission-denied"),
    # ... the same in the newer shmutils.cc's words (its `fail:` label prints the errno)
    ("nccl src/misc/shmutils.cc",
     "host1:2201:2290 [3] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Ab12Cd "
     "(size 9637888), error: Permission denied (13)",
     "nccl-errors:shm-permission-denied"),
    # torch's own library misses an NCCL symbol: the libnccl loaded is not the one torch was built for
    ("https://github.com/rwth-i6/returnn/issues/1802",
     "ImportError: /home/runner/.local/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so: "
     "undefined symbol: ncclMemFree",
     "nccl-errors:torch-nccl-mismatch"),
    ("https://github.com/THU-MIG/yolov10/issues/306",
     "ImportError: /root/.local/conda/envs/yolov10/lib/python3.9/site-packages/torch/lib/libtorch_cuda.so: "
     "undefined symbol: ncclCommRegister",
     "nccl-errors:torch-nccl-mismatch"),
    # TCPStore's client could not connect to the store's address: it does not answer from here
    ("https://github.com/pytorch/pytorch/issues/107021",
     "[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to "
     "192.0.0.1:1234",
     "ddp-errors:master-unreachable"),
    ("https://github.com/AILab-CVC/YOLO-World/issues/163",
     "[E socket.cpp:957] [c10d] The client socket has timed out after 600s while trying to connect to "
     "(127.0.0.1, 3333).",
     "ddp-errors:master-unreachable"),
    ("https://github.com/pytorch/pytorch/issues/107021",
     "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store "
     "has failed. See inner exception for details.",
     "ddp-errors:master-unreachable"),
    # torch/csrc/distributed/c10d/socket.cpp, when no address of the host accepts the connection
    ("pytorch torch/csrc/distributed/c10d/socket.cpp",
     "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address "
     "of (node-0, 29500).",
     "ddp-errors:master-unreachable"),
    # cudaErrorInvalidDevice in old torch's words (THC), like the newer `CUDA error: invalid device ordinal`
    ("https://github.com/wenwenyu/PICK-pytorch/issues/14",
     "RuntimeError: cuda runtime error (101) : invalid device ordinal at "
     "/pytorch/torch/csrc/cuda/Module.cpp:59",
     "ddp-errors:world-size-mismatch"),
    ("https://github.com/mlcommons/training_results_v0.5/issues/9",
     "THCudaCheck FAIL file=torch/csrc/cuda/Module.cpp line=34 error=10 : invalid device ordinal",
     "ddp-errors:world-size-mismatch"),
    # a weight or bias of no element in a listing: the placeholder of a ZeRO-3 (or FSDP) shard, not gathered
    ("https://github.com/ssbuild/chatglm_finetuning/issues/212",
     "transformer.transformer.word_embeddings.weight : torch.Size([0])",
     "checkpoint-problems:zero3-not-gathered"),
    ("https://github.com/deepspeedai/DeepSpeedExamples/issues/820",
     "name=rwtransformer.layers.25.self_attn.q_proj.weight, param=torch.Size([0])",
     "checkpoint-problems:zero3-not-gathered"),
]


@pytest.mark.parametrize(("url", "line", "conclusion"), CASES, ids=[c[2] + "@" + c[0] for c in CASES])
def test_a_family_is_read_by_its_words(url: str, line: str, conclusion: str) -> None:
    assert_first(line, url, conclusion)


NEAR_MISSES = [
    # posix_fallocate out of space is the size of /dev/shm, not a permission
    ("https://github.com/pytorch/pytorch/pull/40622",
     "5135fc87695d:126319:126336 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space "
     "left on device",
     "nccl-errors:system-error-unexplained", "nccl-errors:shm-too-small"),
    ("nccl src/misc/shmutils.cc",
     "host1:2201:2290 [3] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-WU88OE "
     "(size 9637888), error: No space left on device (28)",
     "nccl-errors:system-error-unexplained", "nccl-errors:shm-too-small"),
    # a torch symbol (mangled C++) missing from torch's own build is no NCCL mismatch
    ("https://github.com/pytorch/pytorch/issues/32638",
     "ImportError: /usr/lib/python3.8/site-packages/torch/lib/libtorch_python.so: undefined symbol: "
     "_ZN5torch4cuda4nccl6detail16throw_nccl_errorE12ncclResult_t",
     "nccl-errors:torch-nccl-mismatch", None),
    # the store answered and waited for clients that never came: not an address that does not answer
    ("pytorch torch/csrc/distributed/c10d/TCPStore.cpp",
     "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
     "ddp-errors:master-unreachable", "ddp-errors:rendezvous-incomplete"),
    # an invalid device *function* (in the same old THC words) is a kernel built for another GPU, no index
    ("https://github.com/pytorch/pytorch/issues/1557",
     "RuntimeError: cuda runtime error (8) : invalid device function at "
     "/gpfsnyu/home/ks3286/pytorch/torch/lib/THC/generated/../generic/THCTensorMathPointwise.cu:247",
     "ddp-errors:world-size-mismatch", None),
    ("https://github.com/pytorch/pytorch/issues/1557",
     "THCudaCheck FAIL file=/gpfsnyu/home/ks3286/pytorch/torch/lib/THC/generated/../generic/"
     "THCTensorMathPointwise.cu line=247 error=8 : invalid device function",
     "ddp-errors:world-size-mismatch", None),
    # shapes of gathered weights, and an empty batch, are no shard placeholders
    ("https://github.com/huggingface/peft/issues/83",
     "base_model.model.transformer.word_embeddings.weight     torch.Size([250880, 4096])",
     "checkpoint-problems:zero3-not-gathered", None),
    ("empty batch",
     "input_ids torch.Size([0])",
     "checkpoint-problems:zero3-not-gathered", None),
]


@pytest.mark.parametrize(("url", "line", "not_first", "first"), NEAR_MISSES,
                         ids=[c[2] + "@" + c[0] for c in NEAR_MISSES])
def test_a_near_miss_reads_otherwise(url: str, line: str, not_first: str, first: str | None) -> None:
    found = _found(line, url)
    assert not found or found[0][0] != not_first, found
    if first is not None:
        assert found and found[0][0] == first, found


@pytest.mark.parametrize("line", [
    # Windows' and IPv6's address warnings before a connection that then works: noise
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to [WIN-57PDHSNQNT2]:28133 "
    "(system error: 10049 - The requested address is not valid in its context.).",
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 "
    "(errno: 97 - Address family not supported by protocol).",
])
def test_address_warnings_of_a_client_socket_are_no_failure(line: str) -> None:
    # https://github.com/hiyouga/LlamaFactory/issues/7127 (no signature reads it; text may resemble one)
    found = [conclusion for conclusion, role in _found(line) if role != "similar"]
    assert "ddp-errors:master-unreachable" not in found
    assert "ddp-errors:rendezvous-incomplete" not in found
