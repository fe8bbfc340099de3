"""The load cache and the library index: never stale, never an error, and the same answers.

A runbook file's load is cached by its content (library/cache.py); `open_library` loads a runbook
only when it is asked for (library/lazy.py); many files are checked in worker processes
(library/loading.py). Each must give what a plain load of every file gives.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runbook.cli.library_warnings import warn_unloaded
from runbook.library import loading
from runbook.library.cache import Store
from runbook.library.lazy import open_library
from runbook.library.runbooks import load_library
from runbook.triage.result import triage_sources
from runbook.triage.sources import expand_inputs

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = ROOT / "runbooks"


def _copy_library(dest: Path, ids: tuple[str, ...] = ("training-hang", "cuda-oom", "nccl-errors")) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for rid in ids:
        shutil.copy(BUILT_IN / f"{rid}.yaml", dest / f"{rid}.yaml")
    return dest


def _no_checking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make parsing and checking a file fail: whatever still loads came from the cache."""
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a file was parsed and checked, not taken from the cache")

    monkeypatch.setattr(loading, "load_text", refuse)


def _problems(library: object) -> list[str]:
    return [str(p) for p in library.problems]  # type: ignore[attr-defined]


def test_a_second_load_comes_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    books = _copy_library(tmp_path / "books")
    first = load_library([books])
    _no_checking(monkeypatch)
    second = load_library([books])
    assert sorted(second.by_id) == sorted(first.by_id) == ["cuda-oom", "nccl-errors", "training-hang"]
    assert _problems(second) == _problems(first)
    assert second.get("training-hang") == first.get("training-hang")
    # What the engine walk reads: compiled expressions, compiled again on first use.
    assert second.by_id["cuda-oom"].compiled.when.keys() == first.by_id["cuda-oom"].compiled.when.keys()


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    books = _copy_library(tmp_path / "books", ("cuda-oom",))
    assert load_library([books]).get("cuda-oom").version != "9.9.9"  # type: ignore[union-attr]
    path = books / "cuda-oom.yaml"
    text = path.read_text("utf-8")
    version = next(line for line in text.splitlines() if line.startswith("version:"))
    path.write_text(text.replace(version, "version: 9.9.9", 1), "utf-8")
    assert load_library([books]).get("cuda-oom").version == "9.9.9"  # type: ignore[union-attr]
    assert open_library([books]).get("cuda-oom").version == "9.9.9"  # type: ignore[union-attr]


def test_a_corrupt_cache_is_ignored_and_rewritten(tmp_path: Path, _own_cache: Path) -> None:
    books = _copy_library(tmp_path / "books")
    expected = _problems(load_library([books]))
    entries = [p for p in _own_cache.rglob("*") if p.is_file()]
    assert entries
    for i, entry in enumerate(entries):  # garbage, a truncated entry, an empty file
        entry.write_bytes([b"garbage", entry.read_bytes()[:40], b""][i % 3])
    assert _problems(load_library([books])) == expected
    assert sorted(open_library([books]).by_id) == ["cuda-oom", "nccl-errors", "training-hang"]
    store = Store()
    assert all(store.read(p.parent.parent.name, p.parent.name + p.name) is not None
               for p in _own_cache.rglob("*") if p.is_file() and not p.name.startswith(".tmp"))


def test_deleting_the_cache_is_safe(tmp_path: Path, _own_cache: Path) -> None:
    books = _copy_library(tmp_path / "books")
    library = open_library([books])
    shutil.rmtree(_own_cache)
    assert library.get("nccl-errors") is not None  # loaded after the cache went away
    assert _problems(load_library([books])) == _problems(library)


def test_without_a_writable_cache_everything_still_works(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "cache"))  # mkdir under a file fails
    books = _copy_library(tmp_path / "books")
    assert sorted(load_library([books]).by_id) == ["cuda-oom", "nccl-errors", "training-hang"]
    assert open_library([books]).get("training-hang") is not None


def test_run_loads_only_the_runbooks_it_reaches(tmp_path: Path) -> None:
    books = _copy_library(tmp_path / "books")
    (books / "broken.yaml").write_text("apiVersion: runbook/v1\nid: broken\nsteps: [\n")
    open_library([books])  # the index is written
    library = open_library([books])
    assert library.loaded == {}  # type: ignore[attr-defined]  # everything known came from the index
    assert library.get("cuda-oom") is not None
    assert list(library.loaded) == [str(books / "cuda-oom.yaml")]  # type: ignore[attr-defined]
    assert "broken" not in library.by_id and [f for f, _ in library.failed()] == [str(books / "broken.yaml")]


def test_a_broken_runbook_elsewhere_does_not_stop_a_run(tmp_path: Path) -> None:
    books = tmp_path / "books"
    books.mkdir()
    (books / "broken.yaml").write_text("apiVersion: runbook/v1\nid: broken\nsteps: [\n")
    log = tmp_path / "train.log"
    log.write_text("CUDA out of memory. Tried to allocate 2.00 GiB\n")
    env = {**os.environ, "RUNBOOK_PATH": str(books), "RUNBOOK_LANG": "en"}
    for _ in range(2):  # cold, then from the cache and the index
        done = subprocess.run([sys.executable, "-m", "runbook", "run", "training-hang", "--set", f"log={log}",
                               "--set", "match=^no-such-job$", "--format", "json"], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=120)
        assert done.returncode in (0, 1), done.stderr
        assert '"crashed-cuda-oom"' in done.stdout
        assert done.stderr.count(f"runbook: warning: {books / 'broken.yaml'}:") == 1


def test_the_indexed_library_says_what_a_full_load_says(tmp_path: Path) -> None:
    first, second = _copy_library(tmp_path / "first"), tmp_path / "second"
    second.mkdir()
    shutil.copy(first / "cuda-oom.yaml", second / "again.yaml")  # a duplicate id
    (second / "broken.yaml").write_text("apiVersion: runbook/v1\nid: broken\nsteps: [\n")
    roots = [first, second]
    eager = load_library(roots)
    for lazy in (open_library(roots), open_library(roots)):  # indexed now, then from the index
        assert lazy.unloaded() == eager.unloaded() and lazy.failed() == eager.failed()
        assert lazy.signatures() == eager.signatures() and lazy.log_patterns() == eager.log_patterns()
        assert sorted(lazy.by_id) == sorted(eager.by_id)
        assert _problems(lazy) == _problems(eager)


def test_the_same_warnings_from_either_library(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from runbook.cli import library_warnings

    books = _copy_library(tmp_path / "books", ("cuda-oom",))
    shutil.copy(books / "cuda-oom.yaml", books / "zz-copy.yaml")
    (books / "broken.yaml").write_text("apiVersion: runbook/v1\nid: broken\nsteps: [\n")
    said = []
    for library in (load_library([books]), open_library([books])):
        monkeypatch.setattr(library_warnings, "_warned", set())
        warn_unloaded(library)
        said.append(capsys.readouterr().err)
    assert said[0] == said[1] and said[0].count("runbook: warning:") == 2


def test_triage_answers_the_same_from_the_index(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1 | loss 2.0\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n"
                   "[rank3]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7)\n")
    answers = []
    for library in (load_library([BUILT_IN]), open_library([BUILT_IN]), open_library([BUILT_IN])):
        result = triage_sources(library, None, expand_inputs([str(log)]), on_warning=lambda m: None)
        answers.append(result.to_json())
    assert answers[0] == answers[1] == answers[2]
    assert answers[0]["verdict"] == "cause"


def test_checking_in_processes_finds_what_checking_here_finds(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    books = _copy_library(tmp_path / "books", tuple(p.stem for p in sorted(BUILT_IN.glob("*.yaml"))
                                                    if not p.name.endswith(".tests.yaml")))
    (books / "broken.yaml").write_text("apiVersion: runbook/v1\nid: broken\nsteps: [\n")
    (books / "bad-goto.yaml").write_text((books / "cuda-oom.yaml").read_text("utf-8")
                                         .replace("id: cuda-oom", "id: bad-goto", 1)
                                         .replace("goto: ", "goto: nowhere-", 1))
    monkeypatch.setattr(loading, "PARALLEL_MIN", 10**6)
    serial = load_library([books], Store(tmp_path / "serial"))
    monkeypatch.setattr(loading, "PARALLEL_MIN", 2)
    parallel = load_library([books], Store(tmp_path / "parallel"))
    assert len(parallel.results) > 10
    assert _problems(parallel) == _problems(serial) and any("nowhere-" in p for p in _problems(serial))
    assert [r.path for r in parallel.results] == [r.path for r in serial.results]
    assert parallel.runbooks() == serial.runbooks()


def test_problems_keep_their_line_when_the_positions_entry_is_gone(tmp_path: Path, _own_cache: Path) -> None:
    books = _copy_library(tmp_path / "books", ("cuda-oom",))
    (books / "bad-goto.yaml").write_text((books / "cuda-oom.yaml").read_text("utf-8")
                                         .replace("id: cuda-oom", "id: bad-goto", 1)
                                         .replace("goto: ", "goto: other-runbook:", 1))
    expected = _problems(load_library([books]))
    assert any("no runbook named 'other-runbook'" in p and ":1:1:" not in p for p in expected)
    shutil.rmtree(_own_cache / "runbook" / "positions")
    assert _problems(load_library([books])) == expected  # parsed again for its positions
    assert _problems(load_library([books])) == expected  # and kept again
