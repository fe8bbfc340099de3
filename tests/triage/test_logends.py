"""A paste that just stops (triage/readings/logends.py): ordinary output with no error names the stall,
and only when nothing else was found."""

from __future__ import annotations

import pytest

from runbook.library.runbooks import load_library
from runbook.triage.readings.series import describe_reading
from runbook.triage.result import triage_text
from tests.triage.logends_examples import EXAMPLES

LIBRARY = load_library()


def test_ordinary_output_that_stops_names_the_stall_and_its_last_line() -> None:
    result = triage_text(LIBRARY, None, EXAMPLES["nccl_info_then_silence"], "paste")
    [reading] = result.readings
    assert (reading["reading"], reading["conclusion"]) == ("log-stops", "training-hang:log-stalled")
    assert reading["facts"]["last"] == "NCCL INFO Connected all rings"  # as normalised: no host prefix
    assert result.verdict == "knock-on"
    assert [(m.runbook, m.conclusion) for m in result.matches if m.kind != "case"] == [
        ("training-hang", "log-stalled")]
    assert "Connected all rings" in describe_reading(reading, "en")
    assert "Connected all rings" in describe_reading(reading, "zh")


def test_an_rl_job_that_stops_is_an_rl_stage_not_said() -> None:
    [reading] = triage_text(LIBRARY, None, EXAMPLES["rl_job_then_silence"], "paste").readings
    assert (reading["reading"], reading["conclusion"]) == ("log-stops-rl", "rlhf-hang:stage-unknown")


def test_an_rl_actor_named_only_by_rays_prefix_makes_it_an_rl_stage() -> None:
    """Ray's `(LLMRayActor pid=...)` prefix is stripped from the lines triage reads, but the
    lines as written still say which job stopped: an RL job's vLLM actor."""
    result = triage_text(LIBRARY, None, EXAMPLES["rl_actor_prefix_then_silence"], "paste")
    [reading] = result.readings
    assert reading["reading"] == "log-stops-rl" and reading["conclusion"] == "rlhf-hang:stage-unknown"
    assert (result.matches[0].runbook, result.matches[0].conclusion) == ("rlhf-hang", "stage-unknown")


def test_nccl_tests_on_one_node_that_stops_before_its_results_is_peer_traffic_redirected() -> None:
    """NVIDIA/nccl#104 and #257 (ACS, the IOMMU): the device list and the header, then nothing."""
    result = triage_text(LIBRARY, None, EXAMPLES["nccl_tests_one_node_stops"], "paste")
    [reading] = result.readings
    assert reading["reading"] == "log-stops-nccl-tests"
    assert reading["conclusion"] == "nccl-errors:p2p-redirected"
    assert (result.matches[0].runbook, result.matches[0].conclusion) == ("nccl-errors", "p2p-redirected")
    assert "NCCL_P2P_DISABLE=1" in describe_reading(reading, "en")


@pytest.mark.parametrize("name", ["nccl_tests_two_nodes_stop", "nccl_tests_rows_then_stop"])
def test_nccl_tests_across_nodes_or_past_its_first_rows_is_a_plain_stall(name: str) -> None:
    [reading] = triage_text(LIBRARY, None, EXAMPLES[name], "paste").readings
    assert (reading["reading"], reading["conclusion"]) == ("log-stops", "training-hang:log-stalled")


@pytest.mark.parametrize("text", [
    EXAMPLES["finished_run"],  # it says it finished
    "Traceback (most recent call last):\n  File \"train.py\", line 41, in <module>\n",  # cut in a traceback
    "step 1 loss 2.0\nstep 2 loss 1.9\nstep 3 loss 1.8\n",  # a table of numbers
    "INFO loading shards\nRuntimeError: something else\n",  # an error line
    ">>> t.to('cuda:0')\ntensor([0., 0., 0.], device='cuda:0')\n",  # values printed in a session
    "Model params: 6.28 B\nBooster init max CUDA memory: 3770.59 MB\nmax CPU memory: 7838.21 MB\n",
    "INFO start\n2023-07-04 08:55:35,252 WARNING services.py:1826 -- The object store is using /tmp\n",
    EXAMPLES["torchrun_summary_exit_1"],  # the ranks exited: an error, not a stall
    EXAMPLES["ray_job_failed_disk_monitor"],  # a job that failed, and the raylet's E lines
    "INFO connecting\nINFO handshake sent\nFailed to deserialize data rail endpoints\nNIXL_ERR_BACKEND\n",
])
def test_no_stall_is_named_when_the_paste_says_something_else(text: str) -> None:
    readings = triage_text(LIBRARY, None, text, "paste").readings
    assert not [r for r in readings if r["reading"].startswith("log-stops")], readings


def test_one_or_two_lines_are_a_quoted_message_not_a_log() -> None:
    text = "The actor died because its node has died. Node Id: 7f3a\n"
    assert not triage_text(LIBRARY, None, text, "paste").readings


def test_the_last_line_said_skips_lines_without_words() -> None:
    text = "INFO init\nINFO config read\nINFO loading shards\n#\n"
    [reading] = triage_text(LIBRARY, None, text, "paste").readings
    assert reading["facts"]["last"] == "INFO loading shards"


@pytest.mark.parametrize(("line", "error"), [
    ("  exitcode  : 1 (pid: 39887)", True),  # torchrun's failure summary
    ("  exitcode  : -9 (pid: 39887)", True),
    ("  exitcode  : 0 (pid: 39887)", False),
    ("Status message: Job entrypoint command failed with exit code 1, last available logs", True),
    ("srun: error: node3: task 2: Exited with exit code 1", True),
    ("the worker exited with code 0", False),
    ("nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND", True),
    ("Failed to initialize NVML: Driver/library version mismatch", True),
    ("UserWarning: Failed to load image Python extension", False),  # a warning that mentions it
    ("(raylet) [2025-05-12 21:22:19,118 E 47346 47378] file_system_monitor.cc:116: disk over 95% full", True),
    ("(raylet) [2025-05-12 21:22:19,118 W 47346 47378] memory_monitor.cc:42: usage is high", False),
    ("(raylet) [2025-05-12 21:22:19,118 I 47346 47378] node_manager.cc:1: started", False),
])
def test_lines_that_say_a_process_failed_are_error_lines(line: str, error: bool) -> None:
    """A paste whose lines say a process failed (an exit code, an error code, a severity) is no
    stall: its last error line is what triage compares."""
    result = triage_text(LIBRARY, None, f"INFO start\nINFO step 1\n{line}\n", "paste")
    assert (result.error_line is not None) is error, result.error_line
