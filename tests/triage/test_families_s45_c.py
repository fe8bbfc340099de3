"""Message families of session 45 (c): the NCCL watchdog's own follow-up line that names the work it failed
on (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: `failure detected by watchdog at work sequence id: N
PG status: ...`, torch 2.2-2.3's `Timeout at NCCL work: N, ...`), read with the timeout it follows, and a
rank's traceback through the barrier of `main_process_first` (transformers TrainingArguments, Accelerate
PartialState), the ranks waiting at set-up for the first one still preprocessing, and vLLM V1's executor
giving up on a worker's step (v1/executor/multiproc_executor.py: `RPC call to {method} timed out.`).
Messages of each family read to their conclusion, and near misses in similar words that must read
otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion, role)
CASES = [
    # a pasted timeout broken over lines: the follow-up line holds it to the watchdog's conclusion
    ("watchdog-follow-up",
     "[Rank 2] Watchdog caught collective operation timeout:\n"
     "WorkNCCL(SeqNum=51204, OpType=ALLGATHER, NumelIn=8388608, NumelOut=67108864, Timeout(ms)=600000)\n"
     "  ran for 600112 milliseconds before timing out.\n"
     "[PG ID 0 PG GUID 0(default_pg) Rank 2]  failure detected by watchdog at work sequence id: 51204 "
     "PG status: last enqueued work: 51210, last completed work: 51203",
     "training-hang:crashed-collective-timeout", "knock-on"),
    ("watchdog-follow-up",
     "[rank5]:[E ProcessGroupNCCL.cpp:1537] [PG 2 Rank 5] Timeout at NCCL work: 9313, last enqueued NCCL "
     "work: 9314, last completed NCCL work: 9312.",
     "training-hang:crashed-collective-timeout", "knock-on"),
    ("main-process-first",
     "Traceback (most recent call last):\n"
     '  File "/work/train.py", line 88, in main\n'
     '    with training_args.main_process_first(desc="dataset map tokenization"):\n'
     '  File "/usr/lib/python3.11/contextlib.py", line 137, in __enter__\n'
     "    return next(self.gen)\n"
     '  File "/opt/venv/lib/python3.11/site-packages/transformers/training_args.py", line 2291, in '
     "main_process_first\n"
     "    dist.barrier()\n"
     "torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId "
     "from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after "
     "1800000ms, keys: /default_pg//0//cuda//0",
     "training-hang:rank-busy-at-set-up", "knock-on"),
    ("main-process-first",
     "[rank3]: Traceback (most recent call last):\n"
     '[rank3]:   File "/opt/venv/lib/python3.10/site-packages/accelerate/state.py", line 1107, in '
     "main_process_first\n"
     "[rank3]:     with self._goes_first(self.is_main_process):\n"
     '[rank3]:   File "/opt/venv/lib/python3.10/site-packages/accelerate/state.py", line 452, in '
     "wait_for_everyone\n"
     "[rank3]:     torch.distributed.barrier()\n"
     "[rank3]: RuntimeError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via "
     "c10d key-value store by key '0', but store->get('0') got error: Socket Timeout",
     "training-hang:rank-busy-at-set-up", "knock-on"),
    ("vllm-step-rpc-timeout",
     "(EngineCore_DP0 pid=4411) ERROR 05-14 02:40:19 [core.py:842] EngineCore encountered a fatal error.\n"
     "(EngineCore_DP0 pid=4411) Traceback (most recent call last):\n"
     '(EngineCore_DP0 pid=4411)   File "/usr/local/lib/python3.12/site-packages/vllm/v1/executor/'
     'multiproc_executor.py", line 273, in get_response\n'
     '(EngineCore_DP0 pid=4411)     raise TimeoutError(f"RPC call to {method} timed out.") from e\n'
     "(EngineCore_DP0 pid=4411) TimeoutError: RPC call to execute_model timed out.",
     "training-hang:stuck-in-gpu-kernel", "knock-on"),
    ("vllm-step-rpc-timeout",
     "ERROR 11-02 17:05:51 [core.py:905] TimeoutError: RPC call to sample_tokens timed out.\n"
     "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) "
     "for the root cause.",
     "training-hang:stuck-in-gpu-kernel", "knock-on"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # the watchdog's own heartbeat monitor is another failure, not a collective that timed out
    ("watchdog-follow-up",
     "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Heartbeat monitor timed out! Process will be "
     "terminated after dumping debug info. workMetaList_.size()=0",
     "training-hang:crashed-collective-timeout", None),
    # an error raised inside the block keeps its own frames: the call of main_process_first in the source
    # line is no barrier wait
    ("main-process-first",
     "Traceback (most recent call last):\n"
     '  File "/work/train.py", line 88, in main\n'
     '    with training_args.main_process_first(desc="dataset map tokenization"):\n'
     '  File "/work/train.py", line 90, in main\n'
     "    dataset = dataset.map(tokenize, batched=True)\n"
     "KeyError: 'text'",
     "training-hang:rank-busy-at-set-up", None),
    # a start-up call that timed out is no step stuck on the GPU
    ("vllm-step-rpc-timeout",
     "TimeoutError: RPC call to init_device timed out.",
     "training-hang:stuck-in-gpu-kernel", None),
    # a worker that failed with an error names its own cause, ahead of the engine's death
    ("vllm-step-rpc-timeout",
     "(VllmWorker TP1 pid=921) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 "
     "has a total capacity of 79.19 GiB of which 1.02 GiB is free.\n"
     "RuntimeError: Worker failed with error 'CUDA out of memory. Tried to allocate 2.00 GiB.', please check "
     "the stack trace above for the root cause\n"
     "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
     "training-hang:stuck-in-gpu-kernel", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
