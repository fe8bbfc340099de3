"""Issue #29: a real DeepSpeed job whose global batch the ranks cannot make, diagnosed end to end.

`batch_size_mismatch` starts three ranks with real torchrun; DeepSpeed's own config parser
refuses a config written for 8 GPUs, and `runbook run ddp-errors` concludes batch-size-mismatch
with the four numbers and the batches three ranks can make.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
pytest.importorskip("torch")
pytest.importorskip("deepspeed")  # setup installs it (the `deepspeed` extra)

ROOT = Path(__file__).resolve().parents[2]
EXIT_TIMEOUT_S = 300.0  # three ranks import torch and DeepSpeed on a busy 2-core machine


def test_deepspeed_refuses_the_batch_and_the_runbook_names_the_numbers(scenario) -> None:
    job = scenario("batch_size_mismatch")
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while job.is_alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    log = job.read_log()
    assert not job.is_alive(), log[-3000:]
    assert job.wait_for_log(r"ChildFailedError", 10), log[-3000:]
    assert "process group up: world_size 3" in log  # the process group really had three ranks
    assert log.count("train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * "
                     "world_size 16 != 2 * 1 * 3") >= 1, log[-3000:]
    assert "deepspeed/runtime/config.py" in log  # DeepSpeed's own check raised it

    env = {**job.tool_env(), "RUNBOOK_LANG": "en"}
    out = subprocess.run([sys.executable, "-m", "runbook", "run", "ddp-errors", "--set", f"log={job.log}",
                          "--format", "json"], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    node = json.loads(out.stdout)["nodes"][0]
    path = [(e["step"], e["goto"]) for e in node["evidence"]]
    assert node["conclusion"]["id"] == "batch-size-mismatch", path
    assert node["conclusion"]["taxonomy"] == ["launch.world-size"]
    assert node["finding"] == (
        "DeepSpeed was given train_batch_size 16, but micro_batch_per_gpu 2 × "
        "gradient_accumulation_steps 1 × world_size 3 = 6; 3 ranks make a global batch in multiples "
        "of micro batch × world size = 6: "
        "train_batch_size 12 (accumulation 2) or 18 (accumulation 3)")
    assert out.returncode == 1  # a problem was found
