"""Which interpreter a heavy check runs in when the runbook does not name one."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from runbook.checks import _subpython
from runbook.checks.base import CheckContext


def _fake_python(tmp_path: Path, name: str, has_module: bool) -> str:
    """An executable that answers the find_spec probe like a Python with or without the module."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\nexit {0 if has_module else 1}\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.skipif(sys.platform == "win32", reason="shell-script stand-ins for interpreters")
def test_the_first_candidate_that_can_import_the_module_wins(tmp_path, monkeypatch) -> None:
    without = _fake_python(tmp_path, "python-job", has_module=False)
    with_it = _fake_python(tmp_path, "python-ray", has_module=True)
    monkeypatch.setattr(_subpython, "training_pythons", lambda: [without, with_it])
    ctx = CheckContext(deadline=time.monotonic() + 30)
    assert _subpython.default_python(needs="some_module_xyz", ctx=ctx) == with_it
    # Without a need, the most training-like process's Python, as before.
    assert _subpython.default_python() == without


@pytest.mark.skipif(sys.platform == "win32", reason="shell-script stand-ins for interpreters")
def test_when_no_candidate_has_the_module_the_first_is_named(tmp_path, monkeypatch) -> None:
    without = _fake_python(tmp_path, "python-job", has_module=False)
    monkeypatch.setattr(_subpython, "training_pythons", lambda: [without])
    monkeypatch.setattr(_subpython.sys, "executable", without)
    assert _subpython.default_python(needs="some_module_xyz") == without


def test_the_probe_python_is_checked_without_a_child(monkeypatch) -> None:
    monkeypatch.setattr(_subpython, "training_pythons", lambda: [])
    assert _subpython.can_import(sys.executable, "json") is True
    assert _subpython.can_import(sys.executable, "no_such_module_runbook") is False
    assert _subpython.default_python(needs="json") == sys.executable
