"""`runbook run nan-loss | cuda-oom | checkpoint-problems` against real failing torch jobs from scenarios/.

nan_loss is diagnosed while it trains on with a NaN loss; cuda_oom and state_dict_mismatch after
they died of their error, as a user would run the runbook on a failed job.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time

import pytest

from scenarios.jobs import SCENARIO_ROOT, SCENARIOS, Scenario, group_members

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the scenarios need torch"),
]
START_TIMEOUT_S = 180.0  # importing torch and the first steps, on a busy 2-core machine
EXIT_TIMEOUT_S = 300.0
RUNBOOK_TIMEOUT_S = 420.0  # the checkpoint check alone may take 300 s


def diagnose(scenario: Scenario, runbook: str, *sets: str) -> tuple[int, dict]:
    args = ["run", runbook, "--format", "json"]
    for item in sets:
        args += ["--set", item]
    env = {**scenario.tool_env(), "RUNBOOK_LANG": "en"}
    out = subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True, text=True,
                         env=env, timeout=RUNBOOK_TIMEOUT_S)
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def evidence(node: dict, step: str) -> dict:
    for entry in node["evidence"]:
        if entry["step"] == step:
            return entry["result"]
    raise AssertionError(f"no evidence for step {step}: {[e['step'] for e in node['evidence']]}")


def wait_for_exit(scenario: Scenario, timeout: float) -> int | None:
    """Bounded wait until the job's whole process group is gone; its exit status, or None."""
    deadline = time.monotonic() + timeout
    while scenario.is_alive():
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)
    proc = scenario._proc  # started by this process: the Popen knows the exit status
    assert proc is not None
    return proc.wait(timeout=10)


def assert_nothing_left(scenario: Scenario) -> None:
    assert scenario.stop()
    assert not scenario.is_alive()
    assert group_members(scenario.pgid) == []




def test_seed_003_nan_loss_while_the_job_trains_on(scenario) -> None:
    job = scenario("nan_loss", speed=4.0)
    # Several NaN steps in: the loss has gone inf, then NaN, and the loop keeps going.
    assert job.wait_for_log(r"(?m)(^step \d+ \| loss nan .*\n){5}", timeout=START_TIMEOUT_S), \
        job.read_log()[-2000:]
    assert re.search(r"(?m)^step \d+ \| loss inf \| grad_norm (?:inf|nan) \| lr 5\.0000e\+00$",
                     job.read_log())
    config = job.workdir / "config.yaml"
    assert config.is_file()

    for sets in ([f"log={job.log}"], [f"log={job.log}", f"config={config}"]):
        code, report = diagnose(job, "nan-loss", *sets)
        node = report["nodes"][0]
        assert node["conclusion"]["id"] == "lr-too-high", node
        taxonomy = node["conclusion"]["taxonomy"]
        assert taxonomy == ["numerics.lr-schedule", "numerics.nan-loss"]
        spec = SCENARIOS["nan_loss"]
        assert spec.taxonomy in taxonomy and set(spec.related) <= set(taxonomy)
        assert node["path"] == ["read-log", "read-config"]
        assert code == 1  # critical
        log = evidence(node, "read-log")
        assert log["loss_stats"]["nan_count"] >= 5
        assert re.match(r"step \d+ \| loss nan \| grad_norm nan \| lr 5\.0000e\+00$",
                        log["signatures"]["nan_loss"]["last_line"])
        # The learning rate is read from the last step line, not only from the start-up config.
        assert log["patterns"]["lr"]["last_value"] == 5.0
        assert log["patterns"]["lr"]["last_line"].startswith("step ")
        assert log["patterns"]["grad_nonfinite"]["count"] >= 5
        assert "grad_clip=0.0" in log["patterns"]["clip_off"]["last_line"]
        value = evidence(node, "read-config")["value"]
        if len(sets) == 2:
            assert value["read"] and value["lr"] == 5.0 and value["clip_disabled"] is True
        else:
            assert value["read"] is False

    assert job.is_alive()  # still training, with a NaN loss
    assert_nothing_left(job)


def test_seed_002_cuda_oom_kills_the_job(scenario) -> None:
    job = scenario("cuda_oom", speed=4.0)
    status = wait_for_exit(job, EXIT_TIMEOUT_S)
    assert status == 1, job.read_log()[-3000:]
    text = job.read_log()
    assert "batch_size=16" in text
    lines = text.splitlines()
    error = lines[-1]
    assert re.match(r"torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate 2\.00 GiB\. "
                    r"GPU 0 has a total capacity of 79\.11 GiB of which [0-9.]+ [MG]iB is free\. "
                    r"Including non-PyTorch memory, this process has [0-9.]+ GiB memory in use\. "
                    r"Of the allocated memory [0-9.]+ GiB is allocated by PyTorch, and [0-9.]+ MiB "
                    r"is reserved by PyTorch but unallocated\. .*"
                    r"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", error), error
    # The traceback ends in the model's code, as a CUDA OOM raised inside torch does.
    frames = [line for line in lines if line.startswith('  File "')]
    assert frames and "cuda_oom/train.py" in frames[-1] and "in forward" in frames[-1]
    assert "__torch_dispatch__" not in text

    code, report = diagnose(job, "cuda-oom", f"log={job.log}", "match=cuda_oom/train\\.py")
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "oom-batch-or-model", node
    assert node["conclusion"]["taxonomy"] == ["oom.gpu"] == [SCENARIOS["cuda_oom"].taxonomy]
    assert node["path"] == ["find-process", "read-log", "gpu-state"]
    assert code == 1
    assert evidence(node, "find-process")["found"] is False  # the job is gone
    log = evidence(node, "read-log")
    assert log["signatures"]["cuda_oom"]["count"] == 1
    assert log["signatures"]["cuda_oom"]["last_line"].startswith(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    patterns = log["patterns"]
    assert patterns["tried_gib"]["last_value"] == 2.0
    assert patterns["unalloc_mib"]["count"] == 1 and patterns["unalloc_mib"]["last_value"] < 512
    assert patterns["batch_size"]["last_value"] == 16
    assert patterns["amp_off"]["count"] == 0
    assert_nothing_left(job)


@pytest.mark.parametrize(("variant", "conclusion"), [
    ("prefix", "prefix-mismatch"),
    ("config", "config-mismatch"),
])
def test_seed_002_resume_fails_on_state_dict_keys(scenario, variant: str, conclusion: str) -> None:
    job = scenario("state_dict_mismatch", speed=4.0, extra_args=["--variant", variant])
    status = wait_for_exit(job, EXIT_TIMEOUT_S)
    text = job.read_log()
    assert status == 1, text[-3000:]
    assert "Error(s) in loading state_dict for TinyGPT:" in text
    assert re.search(r"\tMissing key\(s\) in state_dict: ", text)
    assert re.search(r"\tUnexpected key\(s\) in state_dict: ", text)
    assert "[job] attempt 2 exited with status 1; giving up" in text
    checkpoint = job.workdir / "checkpoints" / "step_000030.pt"
    assert checkpoint.is_file()

    # The job has exited, so name its interpreter (the one with torch), as a user would: by
    # default the check would take any other training process's Python on this machine.
    python = f"python={sys.executable}"
    # Without a reference the checkpoint alone shows the prefix; the log names the keys.
    code, report = diagnose(job, "checkpoint-problems", f"checkpoint={checkpoint}", f"log={job.log}",
                            python)
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == conclusion, node
    assert node["conclusion"]["taxonomy"] == ["checkpoint.key-mismatch"]
    assert SCENARIOS["state_dict_mismatch"].taxonomy == "checkpoint.key-mismatch"
    assert node["path"] == ["inspect", "read-log"]
    assert code == 1
    inspect = evidence(node, "inspect")
    assert inspect["exists"] and not inspect["corrupt"] and inspect["step_value"] == 30, {
        k: inspect.get(k) for k in ("available", "reason", "timed_out", "load_error", "torch_version")}
    assert inspect["has"] == {"optimizer": True, "scheduler": True, "rng": True, "step": True}
    log = evidence(node, "read-log")
    assert log["signatures"]["missing_keys"]["count"] == 1
    assert log["signatures"]["unexpected_keys"]["count"] == 1
    if variant == "prefix":
        assert inspect["prefixes"] == ["module."]
        assert log["patterns"]["prefixed_keys"]["last_groups"] == ["module."]
    else:
        assert inspect["prefixes"] == []
        assert log["patterns"]["prefixed_keys"]["count"] == 0

    # With the model the code builds as reference, the checkpoint check alone decides.
    code, report = diagnose(job, "checkpoint-problems", f"checkpoint={checkpoint}",
                            "reference=train:build_model",
                            f"pythonpath={SCENARIO_ROOT / 'state_dict_mismatch'}", python)
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == conclusion, node
    assert node["conclusion"]["taxonomy"] == ["checkpoint.key-mismatch"]
    assert node["path"] == ["inspect"]
    inspect = evidence(node, "inspect")
    assert inspect["reference_error"] is None
    if variant == "prefix":
        assert (inspect["explained_by_prefix"], inspect["prefix_on"]) == ("module.", "checkpoint")
        assert "tok_emb.weight" in inspect["missing_keys"]
        assert "module.tok_emb.weight" in inspect["unexpected_keys"]
    else:
        assert inspect["explained_by_prefix"] is None
        assert "blocks.0.mlp.fc.weight" in inspect["missing_keys"]
        assert "blocks.0.moe.gate.weight" in inspect["unexpected_keys"]
    assert_nothing_left(job)
