"""The `gpu` check's readers against answers recorded on real GPUs (scripts/gpu-check.sh).

`nvml_*.json` holds every NVML call the reader made on a real machine and what NVML answered
(scripts/gpu/nvml_record.py); `replay_binding` turns it back into a `pynvml` module, so the NVML
reader runs here, without a GPU, against what real hardware said. The nvidia-smi CSVs are that
machine's answers to the exact queries the check sends.
"""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path
from typing import Any

import pytest

from runbook.checks.gpu_nvml import read_nvml

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"


class NVMLError(Exception):
    """What the replayed binding raises where the real one raised an NVML error."""


class Handle:
    def __init__(self, index: int) -> None:
        self.index = index


def _value(answer: Any) -> Any:
    if isinstance(answer, dict) and "struct" in answer:
        return types.SimpleNamespace(**{k: _value(v) for k, v in answer["struct"].items()})
    if isinstance(answer, dict) and "handle" in answer:
        return Handle(answer["handle"])
    if isinstance(answer, list):
        return [_value(v) for v in answer]
    return answer


def _key(fn: str, args: tuple[Any, ...]) -> str:
    plain = [{"handle": a.index} if isinstance(a, Handle) else a for a in args]
    return json.dumps([fn, plain])


def replay_binding(recording: dict[str, Any]) -> types.ModuleType:
    """A `pynvml` that answers each call as the recorded machine did (a call it never saw fails)."""
    answers = {json.dumps([c["fn"], c["args"]]): c for c in recording["calls"]}
    errors: dict[str, type[Exception]] = {}
    module = types.ModuleType("pynvml")
    module.__dict__.update(recording["constants"])

    def function(fn: str) -> Any:
        def call(*args: Any) -> Any:
            entry = answers.get(_key(fn, args))
            if entry is None:
                raise AssertionError(f"{fn}{args} was not recorded: record again on a GPU machine "
                                     "with scripts/gpu/nvml_record.py")
            if "error" in entry:
                raise errors.setdefault(entry["error"], type(entry["error"], (NVMLError,), {}))(
                    entry.get("message", ""))
            return _value(entry["answer"])
        return call

    for name in {c["fn"] for c in recording["calls"]}:
        setattr(module, name, function(name))
    return module


def _recorder_module() -> Any:
    spec = importlib.util.spec_from_file_location("nvml_record", ROOT / "scripts" / "gpu" / "nvml_record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_recording_replays_to_the_same_reading() -> None:
    # Record the 8x H100 stand-in of test_gpu.py, replay it: the reader must see the same node.
    from tests.checks.test_gpu import h100_pynvml

    stub = h100_pynvml()
    recorder = _recorder_module().Recorder(stub)
    direct = read_nvml(recorder)
    recording = json.loads(json.dumps({"calls": recorder.calls, "constants": recorder.constants}))
    assert read_nvml(replay_binding(recording)) == direct == read_nvml(h100_pynvml())
    assert any(c.get("error") == "NVMLError_NotSupported" for c in recording["calls"])


def test_an_unrecorded_call_says_to_record_again() -> None:
    binding = replay_binding({"calls": [], "constants": {}})
    assert not hasattr(binding, "nvmlInit")
    with pytest.raises(AttributeError):
        read_nvml(binding)
