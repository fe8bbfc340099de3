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


@pytest.mark.parametrize("text", [
    EXAMPLES["finished_run"],  # it says it finished
    "Traceback (most recent call last):\n  File \"train.py\", line 41, in <module>\n",  # cut in a traceback
    "step 1 loss 2.0\nstep 2 loss 1.9\nstep 3 loss 1.8\n",  # a table of numbers
    "INFO loading shards\nRuntimeError: something else\n",  # an error line
    ">>> t.to('cuda:0')\ntensor([0., 0., 0.], device='cuda:0')\n",  # values printed in a session
    "Model params: 6.28 B\nBooster init max CUDA memory: 3770.59 MB\nmax CPU memory: 7838.21 MB\n",
    "INFO start\n2023-07-04 08:55:35,252 WARNING services.py:1826 -- The object store is using /tmp\n",
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
