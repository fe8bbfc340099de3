"""`runbook lint` on a library with broken references: the exact problems and suggestions, the
same from a cold load and from the load cache, and an edited file's problems found again.

A renamed runbook breaks every reference to it; lint names each with the closest id (issue
#28: the suggestions come from an index, library/runbooks.py and format/suggest.py), and the
files with problems are cached like the rest (library/cache.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runbook.cli import main
from runbook.library import loading

CONCLUSION = """
  {cid}:
    severity: warning
    taxonomy: [hang.dataloader]
    title: {{en: Gone, zh: 不见了}}
    explanation: {{en: The process is gone, zh: 进程不见了}}
"""


def runbook(rid: str, gotos: list[str], see_also: list[str] = ()) -> str:  # type: ignore[assignment]
    branches = "".join(f"      - when: not result.found\n        goto: {g}\n" for g in gotos)
    links = f"    see_also: [{', '.join(see_also)}]\n" if see_also else ""
    return (f"apiVersion: runbook/v1\nid: {rid}\nversion: 1.0.0\n"
            "title: {en: Example, zh: 示例}\nsummary: {en: An example, zh: 一个示例}\n"
            "start: first\nsteps:\n  first:\n    title: {en: First step, zh: 第一步}\n"
            "    check: {type: process, timeout: 5s}\n    branches:\n" + branches
            + "    default: gone\nconclusions:" + CONCLUSION.format(cid="gone").rstrip("\n") + "\n" + links)


def write_library(books: Path) -> None:
    books.mkdir()
    # disk-full was renamed disk-full-v2; nobody updated the references to it.
    (books / "disk-full-v2.yaml").write_text(runbook("disk-full-v2", ["gone"]), "utf-8")
    (books / "gpu-check.yaml").write_text(
        runbook("gpu-check", ["disk-full:start", "disk-full-v2:nowhere"], ["runbook:disk-full"]), "utf-8")
    (books / "net-check.yaml").write_text(runbook("net-check", ["gpu-chek:start", "gonee"]), "utf-8")
    unrelated = runbook("zzz-unrelated", ["gpu-chek:start", "qqqqqqqq:start"])  # a typo, and nothing close
    (books / "zzz-unrelated.yaml").write_text(unrelated, "utf-8")


def lint(books: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["lint", str(books)]) == 2
    return capsys.readouterr().out.splitlines()


def expected(books: Path) -> list[str]:
    return [
        f"{books}/gpu-check.yaml:13:15: steps.first.branches[0].goto: no runbook named 'disk-full'"
        " (did you mean 'disk-full-v2'?)",
        f"{books}/gpu-check.yaml:15:15: steps.first.branches[1].goto: runbook 'disk-full-v2' has no step"
        " or conclusion named 'nowhere'",
        f"{books}/gpu-check.yaml:23:16: conclusions.gone.see_also[0]: no runbook named 'disk-full'"
        " (did you mean 'disk-full-v2'?)",
        f"{books}/net-check.yaml:15:15: steps.first.branches[1].goto: no step or conclusion named 'gonee'"
        " (did you mean 'gone'?)",
        f"{books}/zzz-unrelated.yaml:13:15: steps.first.branches[0].goto: no runbook named 'gpu-chek'"
        " (did you mean 'gpu-check'?)",
        f"{books}/zzz-unrelated.yaml:15:15: steps.first.branches[1].goto: no runbook named 'qqqqqqqq'",
    ]


def _no_checking(monkeypatch: pytest.MonkeyPatch, allowed: set[str]) -> list[str]:
    """Refuse to parse and check any file outside `allowed`; returns the files checked."""
    checked: list[str] = []
    real = loading.load_text

    def only_allowed(text: str, file: str, **kwargs: object) -> object:
        if Path(file).name not in allowed:
            raise AssertionError(f"{file} was parsed and checked, not taken from the cache")
        checked.append(Path(file).name)
        return real(text, file, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loading, "load_text", only_allowed)
    return checked


def test_the_exact_problems_cold_and_warm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    books = tmp_path / "books"
    write_library(books)
    assert lint(books, capsys) == expected(books)
    _no_checking(monkeypatch, allowed=set())  # warm: every file, broken ones included, from the cache
    assert lint(books, capsys) == expected(books)


def test_editing_a_file_drops_its_cached_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    books = tmp_path / "books"
    write_library(books)
    lint(books, capsys)
    checked = _no_checking(monkeypatch, allowed={"net-check.yaml"})
    fixed = runbook("net-check", ["gpu-check:start", "gone"])
    (books / "net-check.yaml").write_text(fixed, "utf-8")
    out = lint(books, capsys)
    assert checked == ["net-check.yaml"]  # only the edited file is parsed again
    assert out == [line for line in expected(books) if "net-check" not in line]
