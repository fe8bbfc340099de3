"""Issue #29: real jobs that save a checkpoint wrong, diagnosed end to end.

`zero3_ungathered_save` partitions its parameters over two gloo ranks (empty torch.Size([0])
placeholders in the module), trains, writes its ZeRO shards to out/checkpoint-5/global_step5/,
saves `model.state_dict()` as out/pytorch_model.bin and dies loading it back. `runbook run
checkpoint-problems` concludes zero3-not-gathered from the file itself (its pickle opcodes, not
unpickled), naming the placeholders and the ZeRO folder.

`two_nodes_one_checkpoint` runs 2 "nodes" x 2 ranks over one directory and saves on LOCAL_RANK 0:
two ranks rename one tmp.pt and the second dies. The runbook goes from the log's failed rename to
the writers step, which finds one path saved by node0/rank0 and node1/rank2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scenarios.jobs import Scenario

pytestmark = pytest.mark.e2e
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
EXIT_TIMEOUT_S = 300.0  # three processes importing torch on a busy 2-core machine
RUNBOOK_TIMEOUT_S = 420.0


def diagnose(job: Scenario, checkpoint: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    """`runbook run checkpoint-problems` on the job's checkpoint and log; the run and its node."""
    # This checkout's engine and runbooks, whichever copy the interpreter has installed.
    env = {**job.tool_env(), "RUNBOOK_LANG": "en",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "engine"), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-m", "runbook", "run", "checkpoint-problems",
                          "--format", "json", "--set", f"checkpoint={checkpoint}", "--set", f"log={job.log}",
                          "--set", f"python={sys.executable}"],
                         capture_output=True, text=True, env=env, timeout=RUNBOOK_TIMEOUT_S, cwd=ROOT)
    assert out.stdout, out.stderr
    return out, json.loads(out.stdout)["nodes"][0]


def test_zero3_model_saved_without_gathering_is_diagnosed(scenario) -> None:
    job = scenario("zero3_ungathered_save", speed=4)
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while job.is_alive() and time.monotonic() < deadline:
        time.sleep(1)
    assert not job.is_alive(), job.read_log()[-3000:]
    log = job.read_log()
    assert "RuntimeError: Error(s) in loading state_dict for MLP:" in log, log[-3000:]
    assert ("size mismatch for fc1.weight: copying a param with shape torch.Size([0]) from checkpoint, "
            "the shape in current model is torch.Size([64, 16]).") in log
    assert "[launcher] evaluation exited with status 1" in log
    model = job.workdir / "out" / "pytorch_model.bin"
    shards = job.workdir / "out" / "checkpoint-5" / "global_step5"
    assert model.is_file() and len(list(shards.glob("zero_pp_rank_*_mp_rank_00_optim_states.pt"))) == 2

    out, node = diagnose(job, model)
    path = [(e["step"], e["goto"]) for e in node["evidence"]]
    assert node["conclusion"]["id"] == "zero3-not-gathered", path
    assert node["conclusion"]["taxonomy"] == ["checkpoint.not-gathered"]
    assert node["path"] == ["inspect"]
    finding = node["finding"]
    size = model.stat().st_size
    assert f"6 of 6 weight tensors in {model} have zero elements (torch.Size([0])), e.g. fc1.weight" \
        in finding
    assert f"its weight files hold {size} bytes" in finding
    assert f"the ZeRO checkpoint {shards} holds 2 model-states and 2 optimizer-state shard file(s)" in finding
    assert out.returncode == 1  # critical: the run found a problem


def test_two_nodes_saving_one_checkpoint_is_diagnosed(scenario) -> None:
    job = scenario("two_nodes_one_checkpoint", speed=4)
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while job.is_alive() and time.monotonic() < deadline:
        time.sleep(1)
    assert not job.is_alive(), job.read_log()[-3000:]
    log = job.read_log()
    assert "node0: [rank0]: saving checkpoint to ckpt/last.pt (step 4)" in log, log[-3000:]
    assert "node1: [rank2]: saving checkpoint to ckpt/last.pt (step 4)" in log
    assert "FileNotFoundError: [Errno 2] No such file or directory: 'ckpt/tmp.pt' -> 'ckpt/last.pt'" in log
    assert "exited with status 1: stopping the other ranks" in log
    checkpoint = job.workdir / "ckpt" / "last.pt"
    assert checkpoint.is_file()

    out, node = diagnose(job, checkpoint)
    path = [(e["step"], e["goto"]) for e in node["evidence"]]
    assert node["conclusion"]["id"] == "shared-path-writers", path
    assert node["conclusion"]["taxonomy"] == ["checkpoint.concurrent-writers", "checkpoint.incomplete-resume"]
    assert node["path"] == ["inspect", "read-log", "writers"]
    finding = node["finding"]
    assert "1 checkpoint path(s) saved by more than one writer: ckpt/last.pt by node0/rank0, node1/rank2" \
        in finding, finding
    assert "the run failed: " in finding and "No such file or directory: 'ckpt/tmp.pt' -> 'ckpt/last.pt'" \
        in finding, finding
    assert out.returncode == 1
