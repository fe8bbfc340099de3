"""The facts of the logs that real CUDA jobs wrote on an H100 and an H200 (torch 2.11, NCCL 2.28.9).

scripts/gpu-verdicts.sh ran the jobs (scripts/gpu/verdict_jobs.py); their logs are kept verbatim,
machine paths and GPU UUIDs replaced, in tests/data/gpu-verdicts/, beside the recordings of the
diagnoses in runbooks/recordings/gpu_*.
"""

from __future__ import annotations

from pathlib import Path

from runbook.checks.facts import extract
from runbook.checks.host._job import ended_in_crash

LOGS = Path(__file__).parents[2] / "data" / "gpu-verdicts"


def lines(case: str, name: str = "train.log") -> list[str]:
    return (LOGS / case / name).read_text(encoding="utf-8").splitlines()


def test_an_oom_beside_a_process_holding_the_gpu_blames_that_process() -> None:
    oom = extract(lines("oom"))["cuda_oom"]
    assert oom["requested_mib"] == 24 * 1024 and oom["this_process_mib"] == 724.0
    assert oom["other_processes"] == [{"pid": 655, "mib": 61962.24}]  # "Process 655 has 60.51 GiB"
    assert oom["held_by_others"] and oom["caused_by_others"]
    # the stale process said so in its own log, and the same job trained on the empty GPU
    assert "pid 655 holds 60.0 GiB" in (LOGS / "oom" / "notebook.log").read_text()
    assert "activations 24.0 GiB" in lines("oom", "alone.log")[-1]


def test_two_ranks_on_one_gpu_are_one_pair_though_each_rank_says_so() -> None:
    nccl = extract(lines("dup"))["nccl"]
    assert nccl["version"] == "2.28.9" and nccl["result"] == "ncclInvalidUsage"
    assert nccl["duplicate_gpu"] == [{"rank": 0, "other_rank": 1, "device": "60",
                                      "message": "rank 0 and rank 1 both on CUDA device 60"}]


def test_the_crashed_logs_end_in_their_crash_and_the_hung_one_does_not() -> None:
    assert ended_in_crash(lines("oom")) == "torch.OutOfMemoryError"
    assert ended_in_crash(lines("dup")) == "torch.distributed.DistBackendError"
    assert ended_in_crash(lines("spin")) is None
    assert extract(lines("spin")) == {}  # a kernel that never ends prints nothing: the stack tells
    assert "synchronize (torch/cuda/__init__.py" in (LOGS / "spin" / "py-spy-native.txt").read_text()


def test_a_lone_rank_waits_in_the_store_of_its_rendezvous() -> None:
    """On an H200: rank 0 of a two-rank NCCL job with no rank 1 (scripts/gpu-verdicts.sh, case 4)."""
    assert lines("lone") == ["[rank0] joining the process group: WORLD_SIZE=2 MASTER=127.0.0.1:29533"]
    assert ended_in_crash(lines("lone")) is None and extract(lines("lone")) == {}
    dump = (LOGS / "lone" / "py-spy.txt").read_text()
    assert "_create_c10d_store (torch/distributed/rendezvous.py" in dump
    assert "init_process_group (torch/distributed/distributed_c10d.py" in dump
