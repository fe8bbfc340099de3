"""Message families of session 47 (cuda-oom, cli-args): Ray's memory monitor error wrapped before
`running low on memory` (python/ray/exceptions.py OutOfMemoryError, raylet's `N worker(s) were killed due to
the node ...` / `Task was killed due to the node ...`); SGLang's warning that the --max-total-tokens asked
for is larger than the profiled KV-cache budget when that budget is zero or negative (model_runner.py
`max_total_tokens=%s is larger than the profiled value %s. Use the profiled value instead.`, followed by
`Not enough memory` for a budget <= 0); a launcher's own option after the script, as argparse's rejection of
one of torchrun's options and as a torchrun / torch.distributed.launch / paddle.distributed.launch command
line that puts the launcher's option after the script (everything after it goes to the script). Two
messages of each family read to their conclusion, and near misses in similar words that must read
otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion)
CASES = [
    ("sglang-profiled-negative",
     "[2025-03-11 10:02:14 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, "
     "avail mem=3.10 GB, mem usage=74.52 GB.\n"
     "[2025-03-11 10:02:15 TP0] max_total_tokens=65536 is larger than the profiled value -20480. Use the "
     "profiled value instead.",
     "cuda-oom:kv-cache-too-small"),
    ("sglang-profiled-negative",
     "[2026-01-20 08:15:40 DP1 TP1] max_total_tokens=200000 is larger than the profiled value -7. Use the "
     "profiled value instead.\n"
     "[2026-01-20 08:15:40 DP3 TP3] max_total_tokens=200000 is larger than the profiled value -7. Use the "
     "profiled value instead.",
     "cuda-oom:kv-cache-too-small"),
    ("sglang-profiled-negative",
     "[2025-09-02 14:40:01] max_total_tokens=8192 is larger than the profiled value 0. Use the profiled "
     "value instead.",
     "cuda-oom:kv-cache-too-small"),
    ("ray-oom-wrapped",
     "ray.exceptions.OutOfMemoryError: 3 worker(s) were killed due to the node\n"
     "running low on memory. Memory on the node (IP: 10.0.4.12) was\n"
     "60.81GB / 63.99GB (0.950311)",
     "cuda-oom:ray-memory-monitor"),
    ("ray-oom-wrapped",
     "(raylet) Task was killed due to the node\n"
     "(raylet) running low on memory. Memory on the node (IP: 172.16.2.9, ID: 9ab1) where the task "
     "was running",
     "cuda-oom:ray-memory-monitor"),
    ("launcher-option-rejected",
     "usage: finetune.py [-h] [--model MODEL] [--epochs EPOCHS]\n"
     "finetune.py: error: unrecognized arguments: --nproc_per_node=4 --master_port 29501",
     "cli-args:launcher-args-misplaced"),
    ("launcher-option-rejected",
     "[rank1]: usage: pretrain.py [-h] [--config CONFIG]\n"
     "[rank1]: pretrain.py: error: unrecognized arguments: --rdzv-endpoint=node0:29400",
     "cli-args:launcher-args-misplaced"),
    ("launcher-option-after-script",
     "$ python -m paddle.distributed.launch train.py --selected_gpus=0,1 --config configs/rec.yml\n"
     "train.py: error: unrecognized arguments: --selected_gpus=0,1",
     "cli-args:launcher-args-misplaced"),
    ("launcher-option-after-script",
     "+ torchrun --standalone scripts/train_lm.py --batch-size 16 --nnodes 2 --node_rank 0\n"
     "train_lm.py: error: unrecognized arguments: --nnodes 2 --node_rank 0",
     "cli-args:launcher-args-misplaced"),
    ("launcher-option-after-script",
     "python -m torch.distributed.launch --use_env tools/train_net.py --cfg cfg.yaml --master_port=29600",
     "cli-args:launcher-args-misplaced"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    assert_first(text, family, conclusion)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # a positive profiled budget below the cap asked for is only the cap not binding
    ("sglang-profiled-negative",
     "[2025-03-11 10:02:15 TP0] max_total_tokens=131072 is larger than the profiled value 50756. Use the "
     "profiled value instead.",
     "cuda-oom:kv-cache-too-small", None),
    # torch's own OOM inside a Ray actor, re-raised by ray.get, is the GPU's memory, not Ray's monitor
    ("ray-oom-wrapped",
     "ray.exceptions.RayTaskError(OutOfMemoryError): ray::Worker.train_step() (pid=8812, ip=10.0.4.12)\n"
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
     "79.14 GiB of which 1.02 GiB is free.",
     "cuda-oom:ray-memory-monitor", None),
    # an option the program does not know that no launcher has is an unknown option
    ("launcher-option-rejected",
     "train.py: error: unrecognized arguments: --num-epochs 3",
     "cli-args:launcher-args-misplaced", "cli-args:unknown-option"),
    # an option that only looks like a launcher's (a longer name) is the program's
    ("launcher-option-rejected",
     "eval.py: error: unrecognized arguments: --master_port_eval 7000",
     "cli-args:launcher-args-misplaced", "cli-args:unknown-option"),
    # launcher options before the script are where they belong
    ("launcher-option-after-script",
     "python -m paddle.distributed.launch --gpus 0,1,2,3 tools/train.py -c configs/det/db.yml\n"
     "torchrun --nnodes 1 --nproc_per_node 8 --master_port 29500 train.py --lr 1e-4",
     "cli-args:launcher-args-misplaced", None),
    # torchrun has no --gpus: after the script it is the program's own option
    ("launcher-option-after-script",
     "torchrun --nproc_per_node 2 main.py --gpus 0,1 --epochs 10",
     "cli-args:launcher-args-misplaced", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
