"""Every check runs through the real probe subprocess, and every module under checks/ (its domain
subpackages included) imports only the standard library."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runbook.checks import CHECK_TYPES, load_check

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("pynvml", "torch", "ray", "psutil", "yaml", "jinja2")
PYTHON3 = shutil.which("python3") or sys.executable

REQUESTS = {
    "command": {"run": "echo hi", "match": "hi"},
    "process": {"pid": 1},
    "log": {"path": str(REPO / "tests/checks/data/*.csv"), "patterns": {"h100": "H100"}},
    "gpu": {"source": "auto"},
    "env": {"names": ["PATH", "NCCL_*"]},
    "port": {"port": 9, "connect_timeout": 0.2},
    "file": {"path": str(REPO / "tests/checks/*.py")},
    "system": {"paths": ["/"]},
    "network": {"master_addr": "127.0.0.1", "master_port": 9, "port": 9, "connect_timeout": 0.2},
    "python": {"code": "import sys\nresult = {'version': list(sys.version_info[:2])}"},
    "host": {"paths": ["/"], "oom_window_s": 3600},
    "ray": {"address": "127.0.0.1:9", "pending_after": 60, "limit": 100},
    "checkpoint": {"path": str(REPO / "tests/checks/data/tiny.safetensors")},
    "dataset": {"path": str(REPO / "tests/checks/data/*.jsonl"), "sample_rows": 10},
    "stack": {"pid": 1, "native": False},
    "torch": {"gpus_per_node": 2, "num_nodes": 1},
    "nccl": {"pid": 1},
    "flight_recorder": {"paths": str(REPO / "tests/data/flight-recorder/gloo-in-sync/*")},
    "pcie": {},
    "limits": {"pid": 1},
    "known_issues": {"nccl_version": "2.25.1", "import_torch": False},
    "cuda_libs": {"error": "libcusparse.so.12: undefined symbol: __nvJitLinkAddData_12_1, "
                           "version libnvJitLink.so.12"},
    "gpu_arch": {"min_cc": 8.0},
    "checkpoint_writers": {"path": str(REPO / "tests/checks/data"),
                           "logs": str(REPO / "tests/checks/data/*.csv")},
    "ray_tempdir": {"temp_dir": "/tmp/ray"},
    "ray_limits": {},
}


def probe(request: dict, python: str = PYTHON3) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO / "engine")}
    done = subprocess.run(
        [python, "-m", "runbook.probe"], input=json.dumps(request), capture_output=True,
        text=True, cwd=REPO, env=env, timeout=20,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_registered_check_has_a_request() -> None:
    assert set(REQUESTS) == set(CHECK_TYPES)


@pytest.mark.parametrize("name", sorted(CHECK_TYPES))
def test_check_runs_in_the_probe(name: str) -> None:
    answer = probe({"check": name, "with": REQUESTS[name], "timeout": 5})
    assert "error" not in answer, answer.get("traceback")
    assert answer["probe"] == "runbook-probe/1"
    assert answer["result"]["timed_out"] is False
    module = load_check(name)
    documented = set(module.RESULT_FIELDS) | {"timed_out"}
    assert set(answer["result"]) <= documented | {"available", "reason"}


@pytest.mark.parametrize("name", sorted(CHECK_TYPES))
def test_check_imports_only_the_standard_library(name: str) -> None:
    code = (
        f"import sys; sys.path.insert(0, 'engine'); import {CHECK_TYPES[name]}; "
        f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])"
    )
    done = subprocess.run([PYTHON3, "-c", code], capture_output=True, text=True, cwd=REPO,
                          timeout=20)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _every_checks_module() -> list[str]:
    """Every module under engine/runbook/checks, the domain subpackages and their helpers included."""
    base = REPO / "engine"
    return sorted(".".join(p.relative_to(base).with_suffix("").parts).removesuffix(".__init__")
                  for p in (base / "runbook" / "checks").rglob("*.py"))


def test_every_module_under_checks_imports_only_the_standard_library() -> None:
    # The registry names the check modules; their helpers and the subpackages' __init__ count too.
    modules = _every_checks_module()
    assert {"runbook.checks.gpu", "runbook.checks.distributed._fr_pickle",
            "runbook.checks._procfs"} <= set(modules)
    code = (
        "import json, sys; sys.path.insert(0, 'engine'); import importlib; out = {}\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"    out[name] = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}\n"
        "                       or m.startswith('runbook.') and not m.startswith('runbook.checks'))\n"
        "print(json.dumps(out))"
    )
    done = subprocess.run([PYTHON3, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=20)
    assert done.returncode == 0, done.stderr
    assert {name: found for name, found in json.loads(done.stdout).items() if found} == {}


def test_no_folder_under_checks_hides_a_library_a_check_child_imports() -> None:
    # Workers run as `python -c SOURCE`, whose sys.path starts with the working directory: run
    # from checks/, a subpackage named torch/ made `import torch` find it and the check fail.
    children_import = {"torch", "ray", "pyarrow", "transformers", "pynvml", "safetensors", "numpy"}
    found = {p.stem for p in (REPO / "engine" / "runbook" / "checks").iterdir()}
    assert found & children_import == set()


@pytest.mark.parametrize("name", sorted(CHECK_TYPES))
def test_module_protocol(name: str) -> None:
    module = load_check(name)
    assert name == module.NAME
    assert set(module.SUMMARY) == {"en", "zh"}
    assert module.PARAMS["type"] == "object"
    assert module.PARAMS["additionalProperties"] is False
    assert module.DEFAULT_TIMEOUT > 0
    for field, doc in module.RESULT_FIELDS.items():
        assert set(doc) == {"type", "en", "zh"}, field
        assert any("\u4e00" <= ch <= "\u9fff" for ch in doc["zh"]), field


@pytest.mark.parametrize("name", sorted(CHECK_TYPES))
def test_params_schema_accepts_the_sample_request(name: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = load_check(name).PARAMS
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(REQUESTS[name], schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**REQUESTS[name], "no_such_param": 1}, schema)


def _python38() -> str | None:
    found = glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8"))
    for candidate in [shutil.which("python3.8"), *found]:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True,
                                        timeout=20).returncode == 0:
            return candidate
    return None


PYTHON38 = _python38()


@pytest.mark.skipif(PYTHON38 is None, reason="no Python 3.8 on this machine")
@pytest.mark.parametrize("name", sorted(CHECK_TYPES))
def test_check_runs_under_python38(name: str) -> None:
    assert PYTHON38 is not None
    answer = probe({"check": name, "with": REQUESTS[name], "timeout": 5}, python=PYTHON38)
    assert "error" not in answer, answer.get("traceback")
