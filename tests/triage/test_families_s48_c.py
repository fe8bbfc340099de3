"""Message families of session 48 (c). checkpoint-problems: the shape mismatch of a sharded checkpoint,
torch.distributed.checkpoint's load plan (torch/distributed/checkpoint/default_planner.py
create_default_local_load_plan: `Size mismatch between saved {md.size} and current: {obj.size()} for {fqn}`)
and Megatron's dist-checkpointing (megatron/core/dist_checkpointing/strategies/torch.py, zarr.py,
tensorstore.py: `Global shape mismatch for loaded ({loaded}) and expected ({expected}) tensor for key {key}`).
extension-errors: any other error that the CUDACHECK of vLLM's custom all-reduce reports
(csrc/custom_all_reduce.cuh: printf("Failed: Cuda error %s:%d '%s'\\n", __FILE__, __LINE__,
cudaGetErrorString(e)); builds of 2024 without `Cuda error `) but `'out of memory'`, also a line cut inside
the file name: a knock-on, since a CUDA error surfaces at the next check and a cause named before it comes
first. Messages of each family read to their conclusion, and near misses in similar words that must read
otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion, role)
CASES = [
    ("dcp-size-mismatch",
     "[rank3]: Traceback (most recent call last):\n"
     "[rank3]:   File \"/opt/conda/lib/python3.11/site-packages/torch/distributed/checkpoint/utils.py\", "
     "line 163, in reduce_scatter\n"
     "[rank3]:     local_data = map_fun()\n"
     "[rank3]: ValueError: Size mismatch between saved torch.Size([32000, 4096]) and current: "
     "torch.Size([32064, 4096]) for model.embed_tokens.weight",
     "checkpoint-problems:shape-mismatch", "cause"),
    ("dcp-size-mismatch",
     "torch.distributed.checkpoint.api.CheckpointException: CheckpointException ranks:dict_keys([0, 1])\n"
     "Traceback (most recent call last): (RANK 0)\n"
     "ValueError: Size mismatch between saved torch.Size([16, 2048, 1024]) and current: "
     "torch.Size([64, 2048, 1024]) for optimizer.state.layers.3.mlp.experts.w1.exp_avg_sq",
     "checkpoint-problems:shape-mismatch", "cause"),
    ("dcp-size-mismatch",
     "ValueError: Size mismatch between saved [151936, 3584] and current: [152064, 3584] for lm_head.weight",
     "checkpoint-problems:shape-mismatch", "cause"),
    ("mcore-global-shape",
     "megatron.core.dist_checkpointing.core.CheckpointingException: Global shape mismatch for loaded "
     "(torch.Size([8192, 2048])) and expected ((4096, 2048)) tensor for key "
     "decoder.layers.self_attention.linear_qkv.weight",
     "checkpoint-problems:shape-mismatch", "cause"),
    ("mcore-global-shape",
     "CheckpointingException: Global shape mismatch for loaded ((50304, 1024)) and expected ((50688, 1024)) "
     "tensor for key embedding.word_embeddings.weight",
     "checkpoint-problems:shape-mismatch", "cause"),
    ("vllm-custom-ar-cudacheck",
     "(VllmWorker rank=1 pid=8812) INFO 03-02 10:11:12 [custom_all_reduce.py:196] Registering 2275 "
     "cuda graph addresses\n"
     "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:368 'an illegal memory access was "
     "encountered'",
     "extension-errors:custom-allreduce-unsupported", "knock-on"),
    ("vllm-custom-ar-cudacheck",
     "Failed: Cuda error /home/runner/work/vllm/csrc/custom_all_reduce.cuh:475 'operation not supported'",
     "extension-errors:custom-allreduce-unsupported", "knock-on"),
    ("vllm-custom-ar-cudacheck",
     "INFO:     10.0.0.7:51234 - \"POST /v1/completions HTTP/1.1\" 500 Internal Server Error\n"
     "Failed: /tmp/vllm/csrc/custom_all_reduce.cuh:329 'unspecified launch failure'",
     "extension-errors:custom-allreduce-unsupported", "knock-on"),
    # the two errors the kernel's own set-up gives stay causes
    ("vllm-custom-ar-cudacheck",
     "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 'invalid argument'",
     "extension-errors:custom-allreduce-unsupported", "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # a size mismatch of two tensors in an operation is no checkpoint's
    ("dcp-size-mismatch",
     "RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at non-singleton "
     "dimension 1",
     "checkpoint-problems:shape-mismatch", None),
    # DCP's missing key is a different model, not the same key with another shape
    ("dcp-size-mismatch",
     "RuntimeError: Missing key in checkpoint state_dict: optimizer.state.lm_head.weight.exp_avg.",
     "checkpoint-problems:shape-mismatch", "checkpoint-problems:config-mismatch"),
    # a shape check of Megatron's batch, not of a loaded tensor
    ("mcore-global-shape",
     "AssertionError: shape mismatch for expected (4, 2048) and got (4, 4096) in get_batch",
     "checkpoint-problems:shape-mismatch", None),
    # the same CUDACHECK in NCCL's tests or another program is no custom all-reduce
    ("vllm-custom-ar-cudacheck",
     "Failed: Cuda error /workspace/nccl-tests/src/common.cu:891 'invalid argument'",
     "extension-errors:custom-allreduce-unsupported", None),
    # pytest's failure line of vLLM's own test of the kernel
    ("vllm-custom-ar-cudacheck",
     "FAILED tests/distributed/test_custom_all_reduce.py::test_custom_allreduce[2-2-test_target0] - "
     "AssertionError: assert False",
     "extension-errors:custom-allreduce-unsupported", None),
    # the custom all-reduce's own out-of-memory is memory, not a platform it cannot run on
    ("vllm-custom-ar-cudacheck",
     "(VllmWorker rank=0 pid=4410) INFO 05-11 08:02:40 [custom_all_reduce.py:196] Registering 5307 "
     "cuda graph addresses\n"
     "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:475 'out of memory'",
     "extension-errors:custom-allreduce-unsupported", None),
    # an out-of-memory named before the custom all-reduce's check is the cause
    ("vllm-custom-ar-cudacheck",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
     "79.10 GiB of which 1.06 GiB is free.\n"
     "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:368 'out of memory'",
     "extension-errors:custom-allreduce-unsupported", "cuda-oom:oom-batch-or-model"),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
