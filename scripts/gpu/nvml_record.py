#!/usr/bin/env python3
"""Record what NVML answers to every call the `gpu` check makes, as JSON, for test fixtures.

    PYTHONPATH=engine python3 scripts/gpu/nvml_record.py > nvml_h100.json

The real binding (nvidia-ml-py) is wrapped by a proxy that passes each call through and writes
down its arguments (a device handle as its index), its answer (ctypes structures as dicts) or
the NVML error it raised, and every constant the reader looked up. `replay_binding` in
tests/checks/gpu/test_gpu_recorded.py turns the file back into a binding, so CI runs the reader
against real hardware's answers.
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

sys.path.insert(0, "engine")

from runbook.checks.gpu.gpu_nvml import read_nvml  # noqa: E402


class Recorder:
    """A stand-in for the `pynvml` module that records every call and constant it serves."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._handles: list[Any] = []
        self.calls: list[dict[str, Any]] = []
        self.constants: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._real, name)  # AttributeError passes through: the reader checks
        if not callable(value):
            self.constants[name] = value if isinstance(value, (int, float, str)) else repr(value)
            return value
        return lambda *args: self._call(name, value, args)

    def _call(self, name: str, fn: Any, args: tuple[Any, ...]) -> Any:
        entry: dict[str, Any] = {"fn": name, "args": [self._arg(a) for a in args]}
        self.calls.append(entry)
        try:
            answer = fn(*args)
        except Exception as exc:
            entry["error"] = type(exc).__name__
            entry["message"] = str(exc)
            raise
        if name == "nvmlDeviceGetHandleByIndex":
            self._handles.append(answer)
            entry["answer"] = {"handle": len(self._handles) - 1}
        else:
            entry["answer"] = plain(answer)
        return answer

    def _arg(self, value: Any) -> Any:
        for index, handle in enumerate(self._handles):
            if value is handle:
                return {"handle": index}
        return plain(value)


def plain(value: Any) -> Any:
    """A ctypes answer as JSON: structures as dicts, arrays and lists as lists, bytes as text."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, ctypes.Structure):
        return {"struct": {f[0]: plain(getattr(value, f[0])) for f in value._fields_}}
    if isinstance(value, (list, tuple, ctypes.Array)) or hasattr(value, "__iter__"):
        return [plain(v) for v in value]
    if hasattr(value, "__dict__"):  # the binding's "friendly objects" (process lists)
        return {"struct": {k: plain(v) for k, v in vars(value).items() if not k.startswith("_")}}
    return repr(value)


def main() -> int:
    import pynvml

    recorder = Recorder(pynvml)
    result = read_nvml(recorder)
    json.dump({"binding": getattr(pynvml, "__version__", None), "read_nvml": result,
               "calls": recorder.calls, "constants": recorder.constants}, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
