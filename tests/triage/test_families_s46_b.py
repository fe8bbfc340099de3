"""Message families of session 46 (training-hang): a rank's traceback through `torch_distributed_zero_first`
(transformers trainer_pt_utils.py, ultralytics and yolov5 utils/torch_utils.py), the older helper of the
set-up barrier `main_process_first` names, where the ranks that are not first wait while the first one
preprocesses; and the frame of vLLM V1's executor giving up on a worker's answer to a step
(v1/executor/multiproc_executor.py get_response: `status, result = mq.dequeue(timeout=dequeue_timeout)`),
kept when a paste cuts its `RPC call to execute_model timed out.` line. Two messages of each family read
to their conclusion, and near misses in similar words that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# the head of a traceback into the barrier, as torch 2.x prints it from distributed_c10d.py
C10D_BARRIER = (
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/c10d_logger.py", line 79, in wrapper\n'
    "    return func(*args, **kwargs)\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 3696, '
    "in barrier\n"
    "    work.wait()")

# (family, text, conclusion)
CASES = [
    ("zero-first-barrier",
     "Running tokenizer on dataset:  41%|####      | 412000/1000000 [31:02<44:17, 221.3 examples/s]"
     "Traceback (most recent call last):\n"
     '  File "train_clm.py", line 402, in <module>\n'
     "    main()\n"
     '  File "train_clm.py", line 288, in main\n'
     "    with torch_distributed_zero_first(args.local_rank):\n"
     '  File "/opt/conda/lib/python3.10/contextlib.py", line 135, in __enter__\n'
     "    return next(self.gen)\n"
     '  File "/opt/conda/lib/python3.10/site-packages/transformers/trainer_pt_utils.py", line 247, '
     "in torch_distributed_zero_first\n"
     "    dist.barrier()\n" + C10D_BARRIER,
     "training-hang:rank-busy-at-set-up"),
    ("zero-first-barrier",
     "[rank1]: Traceback (most recent call last):\n"
     '[rank1]:   File "/workspace/yolov5/train.py", line 121, in train\n'
     "[rank1]:     with torch_distributed_zero_first(LOCAL_RANK):\n"
     '[rank1]:   File "/usr/lib/python3.8/contextlib.py", line 113, in __enter__\n'
     "[rank1]:     return next(self.gen)\n"
     '[rank1]:   File "/workspace/yolov5/utils/torch_utils.py", line 96, in torch_distributed_zero_first\n'
     "[rank1]:     dist.barrier(device_ids=[local_rank])",
     "training-hang:rank-busy-at-set-up"),
    ("vllm-step-dequeue-timeout",
     '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 264, '
     "in get_response\n"
     "    status, result = mq.dequeue(timeout=dequeue_timeout)\n"
     "                     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
     '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_communicators/'
     'shm_broadcast.py", line 507, in dequeue\n'
     "    with self.acquire_read(timeout, cancel) as buf:\n"
     "TimeoutError\n"
     "\n"
     "The above exception was the direct cause of the following exception:\n"
     "\n"
     "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) "
     "for the root cause.",
     "training-hang:stuck-in-gpu-kernel"),
    ("vllm-step-dequeue-timeout",
     "(EngineCore_DP0 pid=4411) ERROR 05-12 03:14:15 [core.py:710] Traceback (most recent call last):\n"
     '(EngineCore_DP0 pid=4411) ERROR 05-12 03:14:15 [core.py:710]   File "/opt/venv/lib/python3.11/'
     'site-packages/vllm/v1/executor/multiproc_executor.py", line 241, in get_response\n'
     "(EngineCore_DP0 pid=4411) ERROR 05-12 03:14:15 [core.py:710]     status, result = w.worker_response_mq."
     "dequeue(timeout=dequeue_timeout)\n"
     "(EngineCore_DP0 pid=4411) ERROR 05-12 03:14:15 [core.py:710] TimeoutError",
     "training-hang:stuck-in-gpu-kernel"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_b_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    # both families are knock-ons: what the ranks or the executor saw of a cause elsewhere
    assert_first(text, family, conclusion, role="knock-on")


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # an error inside the block: the helper's frame is not in the traceback, only the caller's `with` line
    ("zero-first-barrier",
     "Traceback (most recent call last):\n"
     '  File "/workspace/yolov5/train.py", line 121, in train\n'
     "    with torch_distributed_zero_first(LOCAL_RANK):\n"
     '  File "/workspace/yolov5/utils/general.py", line 512, in check_dataset\n'
     "    raise Exception('Dataset not found')\n"
     "Exception: Dataset not found",
     "training-hang:rank-busy-at-set-up", None),
    # the releases whose dequeue also waits on a cancel event raise `cancelled` when the executor shuts
    # down after a worker died: not a step that timed out
    ("vllm-step-dequeue-timeout",
     '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 301, '
     "in get_response\n"
     "    status, result = mq.dequeue(timeout=dequeue_timeout, cancel=cancel_event)\n"
     "RuntimeError: cancelled",
     "training-hang:stuck-in-gpu-kernel", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_b_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
