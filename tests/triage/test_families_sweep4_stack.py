"""Message families of the stack's round four (fine-tuning and RL stacks, Ascend, Chinese threads, the
packaging of compiled extensions): lines of each family written from the library's template (its source
file named) or as users pasted them (the thread's URL beside them), read as the conclusion an engineer
would name from those lines alone; and near misses of the same shape that must not read so."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_never_cause

CASES = [
    # Ascend torch_npu's caching allocator (torch_npu/csrc/core/npu/NPUCachingAllocator.cpp), the NPU's
    # `CUDA out of memory`
    ("https://github.com/hiyouga/LlamaFactory/issues/5491",
     "RuntimeError: NPU out of memory. Tried to allocate 386.00 MiB (NPU 2; 60.97 GiB total "
     "capacity; 59.57 GiB "
     "already allocated; 59.57 GiB current active; 16.54 MiB free; 60.06 GiB reserved in total by "
     "PyTorch) If "
     "reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.",
     "cuda-oom:oom-batch-or-model"),
    ("https://github.com/xingchensong/TouchNet/issues/100",
     "RuntimeError: NPU out of memory. Tried to allocate 5.03 GiB (NPU 3; 60.96 GiB total "
     "capacity; 49.47 GiB "
     "already allocated; 49.47 GiB current active; 1.32 GiB free; 57.55 GiB reserved in total by "
     "PyTorch)",
     "cuda-oom:oom-batch-or-model"),
    ("torch_npu NPUCachingAllocator.cpp",
     "(Worker_TP0 pid=812) ERROR 03-02 10:11:12 [multiproc_executor.py:671] RuntimeError: NPU out "
     "of memory. "
     "Tried to allocate 1.00 GiB (NPU 0; 29.50 GiB total capacity; 27.80 GiB already allocated)",
     "cuda-oom:oom-batch-or-model"),
    # Chinese threads' own words for a GPU out of memory
    ("Chinese threads (爆显存 / 显存溢出)", "用 LLaMA-Factory 做 full sft，8 卡 A100 一开始训练就爆显存了",
     "cuda-oom:oom-batch-or-model"),
    ("Chinese threads (爆显存 / 显存溢出)", "ms-swift 跑 GRPO 的时候显存溢出，怎么调参数",
     "cuda-oom:oom-batch-or-model"),
    # the loss or the gradients reported NaN/Inf in Chinese, a reported gradient explosion
    ("Chinese threads (loss 为 nan)", "训练到第 300 步以后 loss 为 nan", "nan-loss:loss-diverged"),
    ("Chinese threads (loss 为 nan)", "用 deepspeed zero3 训练，loss变成nan了", "nan-loss:loss-diverged"),
    ("Chinese threads (loss 为 nan)", "开了 fp16 之后 loss 一直是 nan", "nan-loss:loss-diverged"),
    ("Chinese threads (grad_norm 为 nan)", "第二个 epoch 开始 grad_norm 为 nan", "nan-loss:loss-diverged"),
    ("Chinese threads (梯度为nan)", "反向传播之后梯度为nan", "nan-loss:loss-diverged"),
    ("Chinese threads (梯度爆炸)", "训练时出现梯度爆炸，loss 越来越大", "nan-loss:loss-diverged"),
    ("Chinese threads (梯度爆炸)", "学习率调大以后梯度爆炸了", "nan-loss:loss-diverged"),
    # torch.distributed.checkpoint's reader opening a directory without its `.metadata`
    # (torch/distributed/checkpoint/filesystem.py FileSystemReader.read_metadata)
    ("pytorch torch/distributed/checkpoint/filesystem.py",
     "[rank3]: FileNotFoundError: [Errno 2] No such file or directory: "
     "'/ckpt/global_step_200/actor/.metadata'",
     "checkpoint-problems:checkpoint-missing"),
    ("pytorch torch/distributed/checkpoint/filesystem.py",
     "FileNotFoundError: [Errno 2] No such file or directory: "
     "'outputs/step-1000/pytorch_model_fsdp_0/.metadata'",
     "checkpoint-problems:checkpoint-missing"),
    # a prebuilt library needs a newer glibc / libstdc++ than the one loaded (the dynamic loader's wording)
    ("https://github.com/Dao-AILab/flash-attention/issues/1708",
     "ImportError: /lib64/libc.so.6: version `GLIBC_2.32' not found (required by "
     "venvs/conda/openrlhf/lib/python3.12/site-packages/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so)",
     "extension-errors:system-libc-too-old"),
    ("https://github.com/bitsandbytes-foundation/bitsandbytes/issues/1663",
     "Could not load bitsandbytes native library: /lib/x86_64-linux-gnu/libstdc++.so.6: version "
     "`GLIBCXX_3.4.32' "
     "not found (required by "
     "/root/venv/lib/python3.10/site-packages/bitsandbytes/libbitsandbytes_cpu.so)",
     "extension-errors:system-libc-too-old"),
    ("https://github.com/kvcache-ai/ktransformers/issues/439",
     "ImportError: /home/ubuntu/anaconda3/envs/kt/bin/../lib/libstdc++.so.6: version "
     "`GLIBCXX_3.4.32' not found "
     "(required by "
     "/home/ubuntu/anaconda3/envs/kt/lib/python3.11/site-packages/KTransformersOps.cpython-311-"
     "x86_64-linux-gnu.so)",
     "extension-errors:system-libc-too-old"),
    ("glibc/libstdc++ symbol versioning (ld.so)",
     "OSError: /usr/lib64/libstdc++.so.6: version `CXXABI_1.3.13' not found (required by "
     "/opt/conda/lib/python3.10/site-packages/transformer_engine/libtransformer_engine.so)",
     "extension-errors:system-libc-too-old"),
    # torchvision built for another torch or CUDA (torchvision/extension.py _check_cuda_version; without its
    # _C, torchvision/_meta_registrations.py finds no `torchvision::nms` operator)
    ("https://github.com/fudan-generative-vision/hallo/issues/98",
     "  File \"/usr/local/lib/python3.10/dist-packages/torch/_library/abstract_impl.py\", line 30, "
     "in register\n"
     "    if torch._C._dispatch_has_kernel_for_dispatch_key(self.qualname, \"Meta\"):\n"
     "RuntimeError: operator torchvision::nms does not exist",
     "extension-errors:extension-abi-mismatch"),
    ("torchvision torchvision/extension.py _check_cuda_version",
     "RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA major "
     "versions. "
     "PyTorch has CUDA Version=12.8 and torchvision has CUDA Version=13.0. Please reinstall the "
     "torchvision "
     "that matches your PyTorch install.",
     "extension-errors:extension-abi-mismatch"),
    # bitsandbytes with no binary for this CUDA (bitsandbytes/cextension.py get_native_library)
    ("bitsandbytes bitsandbytes/cextension.py",
     "Could not find the bitsandbytes CUDA binary at "
     "PosixPath('/usr/local/lib/python3.12/dist-packages/bitsandbytes/libbitsandbytes_cuda129.so')\n"
     "The installed version of bitsandbytes was compiled without GPU support. 8-bit optimizers, "
     "8-bit "
     "multiplication, and GPU quantization are unavailable.",
     "extension-errors:extension-abi-mismatch"),
    ("bitsandbytes bitsandbytes/cextension.py",
     "WARNING:bitsandbytes.cextension:Could not find the bitsandbytes CUDA binary at "
     "PosixPath('/opt/env/lib/python3.11/site-packages/bitsandbytes/libbitsandbytes_cuda130.so')",
     "extension-errors:extension-abi-mismatch"),
    # apex's and flash-attn's source builds checking nvcc (apex setup.py
    # check_cuda_torch_binary_vs_bare_metal, flash-attn setup.py)
    ("apex setup.py check_cuda_torch_binary_vs_bare_metal",
     "RuntimeError: Cuda extensions are being compiled with a version of Cuda that does not match "
     "the version "
     "used to compile Pytorch binaries.  Pytorch binaries were compiled with Cuda 12.1.",
     "extension-errors:extension-cuda-mismatch"),
    ("flash-attention setup.py",
     "RuntimeError: FlashAttention is only supported on CUDA 11.7 and above.  Note: make sure nvcc "
     "has a "
     "supported version by running nvcc -V.",
     "extension-errors:extension-cuda-mismatch"),
    ("flash-attention setup.py (2023)",
     "RuntimeError: FlashAttention is only supported on CUDA 11.6 and above",
     "extension-errors:extension-cuda-mismatch"),
    # axolotl's config check of bf16 against the GPU (axolotl utils/schemas/config.py check_bf16)
    ("axolotl utils/schemas/config.py",
     "ValueError: bf16 requested, but AMP is not supported on this GPU. Requires Ampere series or "
     "above.",
     "extension-errors:gpu-arch-too-old"),
    ("axolotl utils/config/models/input/v0_4_1/__init__.py",
     "pydantic_core._pydantic_core.ValidationError: 1 validation error for "
     "AxolotlConfigWCapabilities\n"
     "  Value error, bf16 requested, but AMP is not supported on this GPU. Requires Ampere series "
     "or above.",
     "extension-errors:gpu-arch-too-old"),
    # Hugging Face's parser given a YAML/JSON config with keys it does not know (transformers
    # hf_argparser.py parse_dict, as LLaMA-Factory's and TRL's YAML configs meet it)
    ("transformers hf_argparser.py parse_dict",
     "ValueError: Some keys are not used by the HfArgumentParser: ['max_sample', 'lora_rnk']",
     "cli-args:unknown-option"),
    ("transformers hf_argparser.py parse_dict",
     "  File \"/opt/LLaMA-Factory/src/llamafactory/hparams/parser.py\", line 72, in _parse_args\n"
     "    return parser.parse_dict(args)\n"
     "ValueError: Some keys are not used by the HfArgumentParser: ['use_fast_tokenzier']",
     "cli-args:unknown-option"),
    # ms-swift's parse of the rest of argv (swift/llm/base.py, swift/utils/run_utils.py)
    ("ms-swift swift/llm/base.py", "ValueError: remaining_argv: ['--lora_rankk', '8']",
     "cli-args:unknown-option"),
    ("ms-swift swift/utils/run_utils.py",
     "    raise ValueError(f'remaining_argv: {remaining_argv}')\nValueError: remaining_argv: "
     "['--max_len', '4096']",
     "cli-args:unknown-option"),
]


@pytest.mark.parametrize(("source", "line", "conclusion"), CASES,
                         ids=[f"{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(source: str, line: str, conclusion: str) -> None:
    assert_first(line, source, conclusion)


# Lines of these stacks that already read right before this round: kept so that they stay so
ALREADY = [
    # vLLM V1 sizing its KV cache (vllm/v1/core/kv_cache_utils.py)
    ("vllm v1/core/kv_cache_utils.py",
     "(EngineCore_0 pid=4121) ValueError: No available memory for the cache blocks. Try increasing "
     "`gpu_memory_utilization` when initializing the engine.",
     "cuda-oom:kv-cache-too-small"),
    # SGLang's CUDA-graph capture running out of memory (model_runner.py / cuda_graph_runner.py)
    ("sglang srt/model_executor/cuda_graph_runner.py",
     "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 20.00 MiB\n"
     "Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
     "cuda-oom:oom-batch-or-model"),
    # the same allocator on Ascend raising torch's OutOfMemoryError class
    ("torch_npu", "torch.OutOfMemoryError: NPU out of memory. Tried to allocate 674.00 MiB",
     "cuda-oom:oom-batch-or-model"),
    # DeepSpeed's fp16 loss scaler at its floor (deepspeed/runtime/fp16/loss_scaler.py)
    ("deepspeed runtime/fp16/loss_scaler.py",
     "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting "
     "run.",
     "nan-loss:fp16-overflow"),
    # a CUDA-12 wheel's module under another torch (vllm, transformer-engine): undefined libtorch symbol
    ("transformer-engine transformer_engine_torch",
     "ImportError: "
     "/usr/local/lib/python3.10/dist-packages/transformer_engine_torch.cpython-310-x86_64-linux-gnu.so:"
     " undefined symbol: _ZN3c106detail14torchCheckFailEPKcS2_jRKSs",
     "extension-errors:extension-abi-mismatch"),
    # DeepSpeed's op builder comparing nvcc with torch's CUDA (op_builder/builder.py)
    ("deepspeed op_builder/builder.py",
     "deepspeed.ops.op_builder.builder.CUDAMismatchException: >- DeepSpeed Op Builder: Installed "
     "CUDA version 12.4 "
     "does not match the version torch was compiled with 12.1, unable to compile cuda/cpp "
     "extensions without a "
     "matching cuda version.",
     "extension-errors:extension-cuda-mismatch"),
]


@pytest.mark.parametrize(("source", "line", "conclusion"), ALREADY,
                         ids=[f"{c[2]}-{i}" for i, c in enumerate(ALREADY)])
def test_a_line_already_read_right_stays_so(source: str, line: str, conclusion: str) -> None:
    assert_first(line, source, conclusion)


# Near misses: the same shape or the same words, another failure (or none)
NEAR_MISSES = [
    # Ascend's wrapper line follows every failure; EL0004 is also a pinned host allocation (rtsMallocHost)
    ("torch_npu ERR99999",
     "[ERROR] 2025-07-02-12:55:54 (PID:1922331, Device:0, RankID:-1) ERR99999 UNKNOWN application "
     "exception",
     "cuda-oom:oom-batch-or-model"),
    ("CANN runtime EL0004",
     "EL0004: [PID: 4242] 2025-10-15-16:32:16.417.528 Failed to allocate memory.\n"
     "        Possible Cause: Available memory is insufficient.\n"
     "        rtsMallocHost execution failed, reason=driver error:out of memory",
     "cuda-oom:oom-batch-or-model"),
    ("npu-smi", "显存占用: 30GB / 64GB", "cuda-oom:oom-batch-or-model"),
    # a denial, a finite value, a config comment
    ("Chinese threads", "loss 不是 nan，但是一直不下降", "nan-loss:loss-diverged"),
    ("Chinese threads", "INFO: loss 为 0.532，grad_norm 为 1.21", "nan-loss:loss-diverged"),
    ("a pasted config", "max_grad_norm: 1.0  # 梯度裁剪，防止梯度爆炸", "nan-loss:loss-diverged"),
    # the Trainer resuming fine; a missing file that is not a DCP checkpoint's metadata; the Trainer's
    # refusal of a directory, which is as often an adapter-only or weights-only directory as a wrong path
    # (transformers trainer.py _load_from_checkpoint), names no one cause
    ("transformers trainer.py", "[INFO|trainer.py:2200] Loading model from /out/checkpoint-500.",
     "checkpoint-problems:checkpoint-missing"),
    ("a run's own file", "FileNotFoundError: [Errno 2] No such file or directory: '/data/run/metadata.json'",
     "checkpoint-problems:checkpoint-missing"),
    ("transformers trainer.py _load_from_checkpoint",
     "ValueError: Can't find a valid checkpoint at outputs/qwen-sft/checkpoint-500",
     "checkpoint-problems:checkpoint-missing"),
    # a listing of what libstdc++ provides, not the loader's refusal
    ("binutils strings",
     "strings /usr/lib/x86_64-linux-gnu/libstdc++.so.6 | grep GLIBCXX_3.4.30\nGLIBCXX_3.4.30",
     "extension-errors:system-libc-too-old"),
    # transformers' bf16 refusal also fires on a CPU-only torch or with no GPU visible: no one cause
    ("transformers training_args.py",
     "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with "
     "cuda>=11.0",
     "extension-errors:gpu-arch-too-old"),
    # ms-swift told to ignore unknown arguments warns and runs on
    ("ms-swift swift/llm/base.py", "[WARNING:swift] remaining_argv: ['--foo', 'bar']",
     "cli-args:unknown-option"),
]


@pytest.mark.parametrize(("source", "line", "not_this"), NEAR_MISSES,
                         ids=[f"not-{c[2]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_is_not_read_as_the_family(source: str, line: str, not_this: str) -> None:
    assert_never_cause(line, source, not_this)
