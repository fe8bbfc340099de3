"""Memory message families read by their own words (cuda-oom, host-faults, memory-growth,
ray-startup), each on a line copied from a public thread or the library's own source (the URL
beside it), with near-misses of the same shape that must not read the same."""

from __future__ import annotations

import pytest

from runbook.library.runbooks import load_library
from runbook.triage.result import triage_text

LIBRARY = load_library()

CASES = [
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

# the same macros with another driver error: not the GPU's memory running out
NEAR_MISSES = [
    ("https://github.com/vllm-project/vllm/blob/main/csrc/cumem_allocator.cpp",
     "RuntimeError: CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:62"),
    ("https://github.com/sgl-project/sglang/issues/14092",
     "[torch_memory_saver.cpp] CUresult error: 1 (invalid argument) file=csrc/utils.h "
     "func=cu_mem_create line=169"),
]


@pytest.mark.parametrize(("url", "line", "conclusion"), CASES,
                         ids=[f"{c[0].split('github.com/')[1]}-{i}" for i, c in enumerate(CASES)])
def test_a_memory_family_is_read_by_its_words(url: str, line: str, conclusion: str) -> None:
    result = triage_text(LIBRARY, None, line + "\n", url)
    first = result.matches[0]
    assert f"{first.runbook}:{first.conclusion}" == conclusion, [
        (m.runbook, m.conclusion, m.role) for m in result.matches]
    assert result.verdict == "cause"


@pytest.mark.parametrize(("url", "line"), NEAR_MISSES,
                         ids=[f"{c[0].split('github.com/')[1]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_is_not_read_as_running_out_of_memory(url: str, line: str) -> None:
    result = triage_text(LIBRARY, None, line + "\n", url)
    signed = [m for m in result.matches if m.role != "similar"]
    assert not [m for m in signed if "oom.gpu" in m.taxonomy], [(m.runbook, m.conclusion) for m in signed]
