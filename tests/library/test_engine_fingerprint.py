"""The load cache's key covers the engine's own files: a check module edited in a domain
subpackage (checks/gpu/, ...) changes it as one at the top of checks/ does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runbook.library import cache


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    package = tmp_path / "runbook"
    (package / "checks" / "gpu").mkdir(parents=True)
    for name in ("__init__.py", "checks/__init__.py", "checks/base.py", "checks/gpu/__init__.py",
                 "checks/gpu/gpu.py"):
        (package / name).write_text(f"# {name}\n")
    monkeypatch.setattr(cache, "PACKAGE", package)
    cache.engine_fingerprint.cache_clear()
    yield package
    cache.engine_fingerprint.cache_clear()


def _fingerprint_after(edit: Path) -> str:
    before = cache.engine_fingerprint()
    edit.write_text(edit.read_text() + "X = 1\n")
    cache.engine_fingerprint.cache_clear()
    after = cache.engine_fingerprint()
    assert after != before, f"editing {edit} left the engine fingerprint unchanged"
    return after


@pytest.mark.parametrize("name", ["checks/base.py", "checks/gpu/gpu.py", "checks/gpu/__init__.py"])
def test_editing_any_check_module_changes_the_fingerprint(engine: Path, name: str) -> None:
    _fingerprint_after(engine / name)


def test_the_fingerprint_is_the_same_for_the_same_files(engine: Path) -> None:
    first = cache.engine_fingerprint()
    cache.engine_fingerprint.cache_clear()
    assert cache.engine_fingerprint() == first
