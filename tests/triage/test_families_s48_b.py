"""Message families of session 48 (b). ray-hang: the output of `ray summary tasks`, whose header Ray's
state CLI prints as `======== Tasks Summary: <datetime.now()> ========` (ray/util/state/state_cli.py
`format_summary_output`, ray/experimental/state/state_cli.py before Ray 2.4), pasted from a job that
does not move: a knock-on of work that never returns. rlhf-hang: verl's trainer progress bar
(verl/trainer/ppo/ray_trainer.py `tqdm(total=..., initial=self.global_steps, desc="Training Progress")`),
which shows its rate and time left as `?` until its first update: a bar a minute or more old that still
reads `<?, ?it/s]` finished no training step since it started or resumed, at a stage the log does not
name. Messages of each family read to their conclusion, and near misses in similar words that must read
otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion, role)
CASES = [
    ("ray-summary-tasks",
     "$ ray summary tasks\n"
     "\n"
     "======== Tasks Summary: 2024-11-02 03:14:15.926535 ========\n"
     "Stats:\n"
     "------------------------------------\n"
     "total_actor_scheduled: 4\n"
     "total_actor_tasks: 812\n"
     "total_tasks: 0\n"
     "\n"
     "\n"
     "Table (group by func_name):\n"
     "------------------------------------\n"
     "    FUNC_OR_CLASS_NAME              STATE_COUNTS    TYPE\n"
     "0   RolloutWorker.generate          RUNNING: 4      ACTOR_TASK\n"
     "1   RolloutWorker.__init__          FINISHED: 4     ACTOR_CREATION_TASK",
     "ray-hang:collect-never-returns", "knock-on"),
    ("ray-summary-tasks",
     "======== Tasks Summary: 2022-07-22 08:54:38.332537 ========\n"
     "Stats:\n"
     "------------------------------------\n"
     "total_actor_scheduled: 2\n"
     "total_actor_tasks: 0\n"
     "total_tasks: 2",
     "ray-hang:collect-never-returns", "knock-on"),
    ("verl-progress-no-rate",
     "(TaskRunner pid=81234) Training Progress:   0%|          | 0/435 [12:08<?, ?it/s]",
     "rlhf-hang:stage-unknown", "knock-on"),
    ("verl-progress-no-rate",
     "Training Progress:  46%|████▌     | 200/435 [1:03:27<?, ?it/s]",
     "rlhf-hang:stage-unknown", "knock-on"),
    ("verl-progress-no-rate",
     "step:0 - val-core/openai/gsm8k/reward/mean@1:0.412\n"
     "Training Progress:   0%|          | 0/58 [01:00<?, ?it/s]",
     "rlhf-hang:stage-unknown", "knock-on"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # the summary of actors or of objects says nothing of tasks that never return
    ("ray-summary-tasks",
     "======== Actors Summary: 2024-11-02 03:14:15.926535 ========\n"
     "Stats:\n"
     "------------------------------------\n"
     "total_actors: 4",
     "ray-hang:collect-never-returns", None),
    ("ray-summary-tasks",
     "======== Object Summary: 2024-11-02 03:14:15.926535 ========\n"
     "Stats:\n"
     "------------------------------------\n"
     "total_objects: 12",
     "ray-hang:collect-never-returns", None),
    # a summary pasted beside the error that stopped the work: the error comes first
    ("ray-summary-tasks",
     "======== Tasks Summary: 2024-11-02 03:14:15.926535 ========\n"
     "ray.exceptions.ObjectStoreFullError: Failed to put object "
     "00ffffffffffffffffffffffffffffffffffffff0100000001000000 in object store because it is full. "
     "Object size is 2147483648 bytes.",
     "ray-hang:collect-never-returns", "ray-hang:object-store-full"),
    # a bar just drawn (no time has passed) or one that has a rate is no stall
    ("verl-progress-no-rate",
     "Training Progress:   0%|          | 0/435 [00:00<?, ?it/s]",
     "rlhf-hang:stage-unknown", None),
    ("verl-progress-no-rate",
     "Training Progress:   0%|          | 0/435 [00:41<?, ?it/s]",
     "rlhf-hang:stage-unknown", None),
    ("verl-progress-no-rate",
     "Training Progress:   1%|          | 3/435 [12:08<14:33:51, 121.35s/it]",
     "rlhf-hang:stage-unknown", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
