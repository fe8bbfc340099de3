"""Near-misses of the memory message families (cuda-oom): lines of the same shape as the ones
tests/triage/test_message_families.py reads as running out of memory, that must not read so."""

from __future__ import annotations

import pytest

from runbook.library.runbooks import load_library
from runbook.triage.result import triage_text

LIBRARY = load_library()


# the C++ check macros of vLLM's cumem allocator and SGLang's torch_memory_saver with another
# driver error than out of memory: not the GPU's memory running out
NEAR_MISSES = [
    ("https://github.com/vllm-project/vllm/blob/main/csrc/cumem_allocator.cpp",
     "RuntimeError: CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:62"),
    ("https://github.com/sgl-project/sglang/issues/14092",
     "[torch_memory_saver.cpp] CUresult error: 1 (invalid argument) file=csrc/utils.h "
     "func=cu_mem_create line=169"),
]


@pytest.mark.parametrize(("url", "line"), NEAR_MISSES,
                         ids=[f"{c[0].split('github.com/')[1]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_is_not_read_as_running_out_of_memory(url: str, line: str) -> None:
    result = triage_text(LIBRARY, None, line + "\n", url)
    signed = [m for m in result.matches if m.role != "similar"]
    assert not [m for m in signed if "oom.gpu" in m.taxonomy], [(m.runbook, m.conclusion) for m in signed]
