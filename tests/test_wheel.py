"""A built wheel carries the built-in runbooks, knowledge base and site theme.

`pip install runbook` (or a pre-commit hook in a team's private repository) has no
clone to read them from; the wheel's copies under runbook/_shipped/ stand in for it.
The wheel is built from a copy of the sources, so the checkout gets no build/ folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "engine", "runbooks", "kb", "site")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel unpacked into a folder that stands for site-packages."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "_shipped"))
        else:
            shutil.copy2(ROOT / name, source / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps",
                            "--no-build-isolation", "-q", "-w", str(work / "dist")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((work / "dist").glob("runbook-*.whl"))
    site = work / "site-packages"
    zipfile.ZipFile(wheel).extractall(site)
    return site


def runbook(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RUNBOOK_PATH", "RUNBOOK_KB_PATH", "RUNBOOK_SITE_THEME")}
    env["PYTHONPATH"] = str(site)  # ahead of the editable install of this checkout
    argv = list(args) if args[0] == "-c" else ["-m", "runbook", *args]
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_wheel_holds_the_library_the_articles_and_the_theme(installed: Path) -> None:
    shipped = installed / "runbook" / "_shipped"
    assert {p.name for p in (shipped / "runbooks").glob("*.yaml")} == {
        p.name for p in (ROOT / "runbooks").glob("*.yaml")}
    assert (shipped / "kb" / "port-in-use" / "zh.md").is_file()
    assert (shipped / "site" / "templates" / "base.html").is_file()
    assert not list(installed.rglob("__pycache__"))
    # data a check reads on the node ships beside it (the probe bundle is built from the package)
    assert (installed / "runbook" / "checks" / "distributed" / "known_regressions.json").is_file()
    # and so do triage's known cases (triage/cases.py)
    assert (installed / "runbook" / "data" / "known_cases.json").is_file()


def test_an_installed_runbook_finds_its_library_outside_any_clone(installed: Path, tmp_path: Path) -> None:
    where = runbook(installed, tmp_path, "-c",
                    "from runbook.library.shipped import shipped_dir; print(shipped_dir('kb'))")
    assert where.stdout.strip() == str(installed / "runbook" / "_shipped" / "kb"), where.stderr
    listed = runbook(installed, tmp_path, "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    ids = {row["id"] for row in json.loads(listed.stdout)}
    assert {"training-hang", "nccl-errors", "ray-hang"} <= ids
    linted = runbook(installed, tmp_path, "lint", "--strict")
    assert linted.returncode == 0, linted.stdout + linted.stderr
    searched = runbook(installed, tmp_path, "search", "显存不足")
    assert searched.returncode == 0 and "cuda-oom" in searched.stdout
    cases = runbook(installed, tmp_path, "-c",
                    "from runbook.triage.cases import shipped; print(len(shipped().cases))")
    assert int(cases.stdout) >= 200, cases.stderr


def test_an_installed_runbook_builds_the_site_from_its_own_theme(installed: Path, tmp_path: Path) -> None:
    if shutil.which("pagefind") is None and not _pagefind_importable():
        pytest.skip("Pagefind is not installed")
    built = runbook(installed, tmp_path, "site", "build", "--output", str(tmp_path / "out"))
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "out" / "zh" / "runbooks" / "training-hang" / "index.html").is_file()
    assert (tmp_path / "out" / "en" / "format" / "index.html").is_file()


def _pagefind_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("pagefind") is not None
