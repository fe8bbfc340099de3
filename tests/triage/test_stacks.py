"""Pasted stack dumps read as evidence (triage/readings/stacks.py): threads rebuilt from py-spy,
faulthandler and gdb text, each process's main thread classified by the stack check's own rules
(checks/facts/stackframes.py), and the processes compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from runbook.checks.distributed import stack
from runbook.checks.facts import stackframes
from runbook.library.runbooks import load_library
from runbook.triage.readings.stacks import describe_reading
from runbook.triage.result import triage_sources, triage_text
from runbook.triage.sources import Source
from tests.triage.stack_examples import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "triage-corpus"
LIBRARY = load_library()


def readings(name: str) -> list[dict]:
    return [r for r in triage_text(LIBRARY, None, EXAMPLES[name], name).readings
            if r["reading"].startswith("stack-")]


def corpus(name: str):
    return triage_sources(LIBRARY, None, [Source(str(CORPUS / name))])


def test_ranks_in_different_collectives_took_different_code_paths() -> None:
    found = readings("pyspy_two_ranks_mismatch")
    assert found[0]["reading"] == "stack-mismatch"
    assert found[0]["conclusion"] == "training-hang:collective-mismatch"
    assert found[0]["facts"]["groups"] == "all_reduce on pid 1201; broadcast on pid 1202"
    # the pin-memory thread of rank 0 is not its main thread
    ops = sorted(r["facts"]["op"] for r in found[1:])
    assert ops == ["all_reduce", "broadcast"]


def test_py_spy_dumps_grouped_without_their_headers_are_one_process_per_main_thread() -> None:
    """As deepspeed#7461 pasted them (`3 processes in:` over one py-spy dump, then `5 processes
    in:`): a second MainThread is another process, so the two collectives are compared."""
    found = readings("pyspy_grouped_no_header")
    assert found[0]["reading"] == "stack-mismatch"
    assert found[0]["facts"]["groups"] == "all_reduce on process 1; reduce_scatter_tensor on process 2"
    assert [r["conclusion"] for r in found[1:]] == [None, None]
    assert sorted(r["facts"]["op"] for r in found[1:]) == ["all_reduce", "reduce_scatter_tensor"]


def test_faulthandler_main_thread_is_the_one_threading_did_not_start() -> None:
    [reading] = readings("faulthandler_barrier")
    assert reading["conclusion"] == "training-hang:collective-wait"
    assert (reading["facts"]["waits"], reading["facts"]["op"]) == ("collective", "barrier")


@pytest.mark.parametrize(("name", "waits", "conclusion"), [
    ("pyspy_rendezvous", "rendezvous", "training-hang:waiting-in-rendezvous"),
    ("pyspy_worker_lock", "lock", "training-hang:dataloader-fork-deadlock"),
    ("gdb_c10d_wait", "collective", "training-hang:collective-wait"),
    ("pyspy_running", "running", None),
    ("pyspy_vllm_engine_waits_for_workers", "engine-workers", "ray-hang:collect-never-returns"),
    ("pyspy_native_kernel_launch", "gpu-kernel", "training-hang:stuck-in-gpu-kernel"),
    ("pyspy_native_launch_under_all_reduce", "collective", "training-hang:collective-wait"),
    ("pyspy_decord_decode", "dataloader", "training-hang:dataloader-worker-stuck"),
])
def test_each_wait_names_its_conclusion(name: str, waits: str, conclusion: str | None) -> None:
    [reading] = readings(name)
    assert reading["facts"]["waits"] == waits
    assert reading["conclusion"] == conclusion
    assert describe_reading(reading, "en") and describe_reading(reading, "zh")


def test_the_frame_shown_is_the_innermost_one_with_a_name() -> None:
    [reading] = readings("pyspy_native_kernel_launch")
    assert reading["facts"]["frame"] == "cuLaunchKernel (libcuda.so.1)"
    assert reading["facts"]["op"] == "launch"


def test_a_dump_is_classified_like_the_stack_check() -> None:
    """The same frames give the same (waits, op) through the check and through triage."""
    frames = [{"filename": "torch/distributed/distributed_c10d.py", "name": "broadcast", "line": 1},
              {"filename": "train.py", "name": "main", "line": 2}]
    assert stack.classify(frames) == stackframes.classify(frames) == ("collective", "broadcast")
    deepspeed = [{"filename": "deepspeed/comm/comm.py", "name": "all_reduce", "line": 1}]
    assert stackframes.classify(deepspeed) == ("collective", "all_reduce")


def test_real_dumps_from_public_threads() -> None:
    """pytorch#54818 (faulthandler: the main thread in barrier, the current thread a listener);
    vllm#50835 (py-spy of vLLM's engine core waiting for its workers' answers: no collective)."""
    barrier = corpus("pytorch/54818-faulthandler-timed-out-barrier.log")
    first = next(r for r in barrier.readings if r["reading"] == "stack-wait")
    assert (first["facts"]["op"], first["conclusion"]) == ("barrier", "training-hang:collective-wait")
    engine = corpus("vllm/50835-rayexecutor-engine-core-pyspy.log")
    first = next(r for r in engine.readings if r["reading"] == "stack-wait")
    assert first["facts"]["who"] == "pid 4085279" and first["facts"]["waits"] == "engine-workers"
    assert first["conclusion"] == "ray-hang:collect-never-returns"


def test_a_vllm_worker_waiting_for_its_next_request_is_not_the_engine_waiting_for_it() -> None:
    first = readings("pyspy_vllm_worker_idle")[0]
    assert first["facts"]["waits"] == "running" and first["conclusion"] is None


def test_a_log_without_dumps_has_no_stack_reading() -> None:
    text = "Thread pool started with 8 workers\nstep 1 loss 2.0\nProcess group initialised\n"
    assert not [r for r in triage_text(LIBRARY, None, text).readings if r["reading"].startswith("stack-")]


def test_a_thread_that_waits_speaks_when_the_main_thread_idles_in_an_event_loop() -> None:
    """ray#52641: Ray Train runs the training function in a thread; the worker's main thread idles
    in Ray's loop while the training thread waits for a DataLoader batch."""
    result = corpus("ray/52641-train-benchmark-dataloader-fork-pyspy.log")
    first = result.readings[0]
    assert first["facts"]["thread"] == "TrainingThread(train_fn_per_worker)"
    assert first["conclusion"] == "training-hang:dataloader-worker-stuck"
    assert result.matches[0].conclusion == "dataloader-worker-stuck"


def test_frames_pasted_without_their_header_are_read_as_one_thread() -> None:
    """lightning#18857: a py-spy excerpt that starts at its innermost frame, torch.cuda.synchronize."""
    result = corpus("lightning/18857-nemo-hang-cuda-synchronize-pyspy.log")
    first = result.readings[0]
    assert first["facts"]["waits"] == "cuda-sync"
    assert first["conclusion"] == "training-hang:stuck-in-gpu-kernel"


def test_idle_in_autograd_backward_waits_on_its_hooks_collectives() -> None:
    """accelerate#3104: ZeRO-3's main thread idle in backward (its all-gathers run in hooks)."""
    idle = corpus("accelerate/3104-zero3-allgather-pyspy.log").readings[0]
    assert (idle["facts"]["waits"], idle["conclusion"]) == ("backward", "training-hang:collective-wait")
    busy = EXAMPLES["pyspy_running"].replace("forward (model.py:210)",
                                             "backward (torch/autograd/__init__.py:266)")
    [reading] = [r for r in triage_text(LIBRARY, None, busy).readings if r["reading"] == "stack-wait"]
    assert reading["facts"]["waits"] == "backward" and reading["conclusion"] is None  # active: computing


def test_a_dump_with_only_threading_threads_names_no_main_thread() -> None:
    """torchtitan#810: the excerpt holds tqdm's monitor thread and a cut main thread: tqdm's wait is
    not taken for the job's; what is left is the guess, said as one."""
    result = corpus("torchtitan/810-b200-hang-faulthandler.log")
    assert [r["reading"] for r in result.readings if r["reading"].startswith("stack-")] == ["stack-unnamed"]


def test_what_a_dump_names_is_the_answer_when_no_signature_matched() -> None:
    result = triage_text(LIBRARY, None, EXAMPLES["pyspy_two_ranks_mismatch"])
    # not also "every rank here waits in the same collective": the dump shows they do not
    assert [(m.conclusion, m.role) for m in result.matches if m.kind != "case"] == [
        ("collective-mismatch", "cause")]
    assert result.verdict == "cause" and "all_reduce on pid 1201" in result.summary()
    data = result.to_json()
    assert data["matches"][0]["reading"]["reading"] == "stack-mismatch"
    assert data["matches"][0]["lines"] == []
    running = triage_text(LIBRARY, None, EXAMPLES["pyspy_running"])
    assert running.verdict == "no-error" and running.readings  # says where, names nothing


def test_an_idle_dump_that_names_no_wait_is_a_guess_said_as_one() -> None:
    result = triage_text(LIBRARY, None, EXAMPLES["pyspy_idle_unnamed"])
    kinds = [r["reading"] for r in result.readings]
    assert kinds == ["stack-wait", "stack-unnamed"] and result.readings[1]["guess"] is True
    [match] = [m for m in result.matches if m.kind != "case"]  # known cases: test_known_cases.py
    assert (match.conclusion, match.role, match.confidence) == ("collective-wait", "knock-on", 0.12)
    assert "a guess" in match.why()
    # a thread seen computing is no hang on a peer: no guess
    assert [r["reading"] for r in readings("pyspy_running")] == ["stack-wait"]
