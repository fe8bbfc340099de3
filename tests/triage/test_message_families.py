"""Message families read by their own words, each checked on a line copied from a public thread
(the URL beside it): what an engineer reading the line would conclude, not the string of one
thread. The corpus measures accuracy; these pin one family each."""

from __future__ import annotations

import pytest

from runbook.library.runbooks import load_library
from runbook.triage.result import triage_text

LIBRARY = load_library()

CASES = [
    # vLLM's KV cache cannot hold one request of max_model_len: its own conclusion, not "batch too big"
    ("https://github.com/vllm-project/vllm/issues/2418",
     "ValueError: The model's max seq len (4096) is larger than the maximum number of tokens that can be "
     "stored in KV cache (3664). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
     "when initializing the engine.",
     "cuda-oom:kv-cache-too-small"),
    # less free at start-up than gpu_memory_utilization asks for: something else holds the GPU
    ("https://github.com/pytorch/pytorch/issues/175666",
     "[2026-02-24T20:21:58Z] (EngineCore_DP0 pid=6940) ValueError: Free memory on device cuda:1 "
     "(19.77/22.05 GiB) on startup is less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease "
     "GPU memory utilization or reduce GPU memory used by other processes.",
     "cuda-oom:gpu-held-by-other-process"),
    # CUDA error 802 in two torch versions' words: an NVSwitch system without its fabric manager
    ("https://github.com/huggingface/huggingface_hub/issues/4134",
     "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
     "calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized",
     "gpu-driver-hang:gpu-unavailable"),
    ("https://github.com/pytorch/pytorch/issues/35710",
     "RuntimeError: cuda runtime error (802) : system not yet initialized at "
     "/opt/conda/conda-bld/pytorch_1579022034529/work/aten/src/THC/THCGeneral.cpp:50",
     "gpu-driver-hang:gpu-unavailable"),
    # InfiniBand pins its buffers: a verbs call that cannot allocate memory is `ulimit -l` (the thread's fix)
    ("https://github.com/NVIDIA/nccl-tests/issues/206",
     "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
     "nccl-errors:resource-limit"),
    # the DataLoader's own timeout: the main thread waited that long for a batch
    ("https://github.com/pytorch/pytorch/issues/68643",
     "RuntimeError: DataLoader timed out after 5 seconds",
     "training-hang:dataloader-worker-stuck"),
    # an OOM's own numbers: 22 GiB of the card in use outside this process's 9.46 GiB (no process named)
    ("https://github.com/QwenLM/Qwen/issues/715",
     " CUDA out of memory. Tried to allocate 96.00 MiB (GPU 3; 31.74 GiB total capacity; 9.44 GiB already "
     "allocated; 11.38 MiB free; 9.46 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
     "memory try setting max_split_size_mb to avoid fragmentation.",
     "cuda-oom:gpu-held-by-other-process"),
    # load_state_dict's keys differ by DataParallel's `module.` only: the prefix, not the model
    ("https://github.com/aks2203/deep-thinking/issues/5",
     "RuntimeError: Error(s) in loading state_dict for DTNet:\n"
     '\tMissing key(s) in state_dict: "projection.0.weight", "head.0.weight", "head.2.weight". \n'
     '\tUnexpected key(s) in state_dict: "module.projection.0.weight", "module.head.0.weight", '
     '"module.head.2.weight".',
     "checkpoint-problems:prefix-mismatch"),
    # ... and keys renamed between saving and loading are the model's config, not a prefix
    ("https://github.com/hou-yz/MVDet/issues/7",
     'Missing key(s) in state_dict: "map_classifier.0.weight", "map_classifier.0.bias". \n'
     'Unexpected key(s) in state_dict: "world_classifier.0.weight", "world_classifier.0.bias".',
     "checkpoint-problems:config-mismatch"),
    # TCPStore's own timeouts: the rendezvous never completed
    ("https://github.com/hiyouga/LlamaFactory/issues/5587",
     "torch.distributed.DistStoreError: Socket Timeout",
     "ddp-errors:rendezvous-incomplete"),
    ("https://github.com/modelscope/ms-swift/issues/3343",
     "[W228 18:45:15.741177013 socket.cpp:487] [c10d] waitForInput: socket SocketImpl(fd=11, "
     "addr=[xxxxxx.com]:38674, remote=[::ffff:33.148.62.162]:23456) timed out after 900000ms",
     "ddp-errors:rendezvous-incomplete"),
    # torchrun's SIGKILL report: killed from outside, probably the OOM killer (no kernel record here)
    ("https://github.com/hiyouga/LlamaFactory/issues/9609",
     "E1212 20:01:21.662000 115287 torch/distributed/elastic/multiprocessing/api.py:882] failed "
     "(exitcode: -9) local_rank: 7 (pid: 115533) of binary: /usr/bin/python3",
     "host-faults:killed-likely-oom"),
    # ... and a small card where what is not PyTorch's is the CUDA context: the job's own size
    ("https://github.com/JDAI-CV/centerX/issues/51",
     "whyCUDA out of memory. Tried to allocate 130.00 MiB (GPU 1; 7.80 GiB total capacity; 5.91 GiB already "
     "allocated; 33.56 MiB free; 6.09 GiB reserved in total by PyTorch)",
     "cuda-oom:oom-batch-or-model"),
    # The CUDA driver's CUDA_ERROR_OUT_OF_MEMORY as C++ extensions' check macros print it: vLLM's
    # cumem allocator (csrc/cumem_allocator.cpp, `CUDA Error: %s at %s:%d`) when sleep mode's
    # wake_up maps back the memory it gave away ...
    ("https://github.com/TideDra/lmm-r1/issues/43",
     "(ActorModelRayActor pid=348952) RuntimeError: CUDA Error: out of memory at "
     "/workspace/csrc/cumem_allocator.cpp:62",
     "cuda-oom:oom-batch-or-model"),
    ("https://github.com/hiyouga/EasyR1",
     "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
     "cuda-oom:oom-batch-or-model"),
    # ... and SGLang's torch_memory_saver (`CUresult error: <code> (<cuGetErrorString>)`) when
    # resume_memory_occupation takes its memory back
    ("https://github.com/sgl-project/sglang/issues/14092",
     "(SGLangHttpServer pid=250977) [torch_memory_saver.cpp] CUresult error: 2 (out of memory)  "
     "file=csrc/utils.h func=cu_mem_create line=194",
     "cuda-oom:oom-batch-or-model"),
]


@pytest.mark.parametrize(("url", "line", "conclusion"), CASES,
                         ids=[c[0].split("github.com/")[1] for c in CASES])
def test_a_family_is_read_by_its_words(url: str, line: str, conclusion: str) -> None:
    result = triage_text(LIBRARY, None, line + "\n", url)
    first = result.matches[0]
    assert f"{first.runbook}:{first.conclusion}" == conclusion, [
        (m.runbook, m.conclusion, m.role) for m in result.matches]
    assert result.verdict == "cause"


def test_enotconn_on_a_socket_is_no_dead_mount() -> None:
    # https://github.com/hiyouga/LlamaFactory/issues/9609: NCCL's socket to a killed peer
    line = ("[2025-12-12 20:00:58] H-server03:115530:115931 [0] misc/socket.cc:936 NCCL WARN Call to "
            "shutdown failed: Transport endpoint is not connected")
    result = triage_text(LIBRARY, None, line + "\n", "nccl")
    assert "host-faults:storage-hung" not in [f"{m.runbook}:{m.conclusion}" for m in result.matches]
    # a FUSE mount that died under the job: the file command names the path
    dead = "ls: cannot access '/mnt/s3/ckpt': Transport endpoint is not connected"
    first = triage_text(LIBRARY, None, dead + "\n", "fuse").matches[0]
    assert f"{first.runbook}:{first.conclusion}" == "host-faults:storage-hung"


def test_the_watchdog_seen_only_in_its_cpp_frames() -> None:
    # https://github.com/jpata/particleflow/issues/390: the paste kept the frames, not the message
    frames = ("frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::"
              "duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in "
              "/envs/mlpf/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so)\n"
              "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x1554e9e16333 in "
              "/envs/mlpf/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so)\n")
    result = triage_text(LIBRARY, None, frames, "frames")
    first = result.matches[0]
    assert (f"{first.runbook}:{first.conclusion}", first.role) == (
        "training-hang:crashed-collective-timeout", "knock-on")
