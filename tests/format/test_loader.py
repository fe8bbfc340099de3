"""The loader: one precise `file:line:col: path: message` per problem, never a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runbook.format.loader import load_file, load_text, parse_duration

BROKEN = Path(__file__).resolve().parents[1] / "data" / "broken"
ROOT = Path(__file__).resolve().parents[2]

# file -> (line:col, path in the document, words the message must contain)
EXPECTED = {
    "01-yaml-syntax": ("5:1", "(document)", "YAML syntax error"),
    "02-api-version": ("1:13", "apiVersion", "unsupported apiVersion 'runbook/v2'"),
    "03-goto-nowhere": ("15:15", "steps.first.branches[0].goto", "did you mean 'gone'?"),
    "04-unknown-check": ("12:19", "steps.first.check.type", "did you mean 'process'?"),
    "05-bad-check-param": ("12:35", "steps.first.check.with.pids", "has no parameter 'pids'"),
    "06-bad-when": ("14:15", "steps.first.branches[0].when", "does not compile"),
    "07-escape-attempt": ("14:15", "steps.first.branches[0].when", "is not allowed"),
    "08-missing-translation": ("21:12", "conclusions.gone.title", "missing Chinese translation"),
    "09-unknown-taxonomy": ("20:16", "conclusions.gone.taxonomy[0]", "unknown taxonomy id"),
    "10-unknown-field": ("17:5", "steps.first.retries", "unknown field 'retries'"),
    "11-bad-timeout": ("12:37", "steps.first.check.timeout", "is not a duration"),
    "12-undeclared-param": ("14:15", "steps.first.branches[0].when", "params.logg is not declared"),
    "13-bad-severity": ("19:15", "conclusions.gone.severity", "'fatal' is not allowed"),
    "14-duplicate-key": ("25:5", "conclusions.fine.severity", "duplicate key 'severity'"),
    "15-unreachable": ("18:3", "conclusions.orphan", "never reached"),
    "16-bad-version": ("3:10", "version", "not a semantic version"),
    "17-untranslated-copy": ("22:48", "conclusions.gone.explanation.zh", "copy of the English"),
    "18-warning-without-taxonomy": ("20:15", "conclusions.gone.taxonomy", "at least one taxonomy"),
    "19-bad-param-type": ("12:53", "steps.first.check.with.pid", "is not of type"),
    "20-bad-id": ("2:5", "id", "not a valid id"),
    "21-bad-signature": ("8:15", "signatures[1].pattern", "pattern not a valid regular expression"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_broken_runbook_gives_exactly_one_precise_problem(name: str) -> None:
    result = load_file(BROKEN / f"{name}.yaml")
    where, path, words = EXPECTED[name]
    assert result.runbook is None
    assert len(result.problems) == 1, [str(p) for p in result.problems]
    line = str(result.problems[0])
    assert line.startswith(f"{BROKEN / name}.yaml:{where}: {path}: "), line
    assert words in line


def test_every_broken_file_has_an_expectation() -> None:
    assert {p.stem for p in BROKEN.glob("*.yaml")} == set(EXPECTED)


def test_all_problems_of_a_file_are_reported_at_once(tmp_path: Path) -> None:
    text = (BROKEN / "03-goto-nowhere.yaml").read_text()
    text = text.replace("severity: warning", "severity: fatal").replace("zh: 正常}", "}")
    result = load_text(text, "many.yaml")
    messages = [p.message for p in result.problems]
    assert len(messages) == 3, messages
    assert any("gonee" in m for m in messages)
    assert any("'fatal'" in m for m in messages)
    assert any("missing Chinese translation" in m for m in messages)
    assert [p.line for p in result.problems] == sorted(p.line for p in result.problems)


def test_the_library_runbook_loads_with_a_digest() -> None:
    result = load_file(ROOT / "runbooks" / "training-hang.yaml")
    assert result.ok, [str(p) for p in result.problems]
    assert result.runbook is not None
    assert result.runbook.digest.startswith("sha256:") and len(result.runbook.digest) == 71
    assert result.runbook.steps["loader-gpu"].check.timeout == 8.0


def test_a_template_naming_an_unknown_check_parameter_is_refused() -> None:
    text = (BROKEN / "03-goto-nowhere.yaml").read_text().replace("gonee", "gone").replace(
        "{type: process, timeout: 5s}", '{type: process, with: {pdi: "{{ params.log }}"}}')
    problems = [str(p) for p in load_text(text, "t.yaml").problems]
    assert problems == ["t.yaml:12:35: steps.first.check.with.pdi: check 'process' has no "
                        "parameter 'pdi' (did you mean 'pid'?) (its parameters: pid, match, auto, log)"]


def test_a_non_mapping_document_and_an_unreadable_file(tmp_path: Path) -> None:
    assert "a runbook is a YAML mapping" in str(load_text("- a\n- b\n", "l.yaml").problems[0])
    missing = load_file(tmp_path / "nope.yaml")
    assert "cannot read file" in str(missing.problems[0])
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"id: x\n\xff\xfe")
    assert str(load_file(binary).problems[0]).endswith("not UTF-8 text (invalid start byte at byte offset 6)")


@pytest.mark.parametrize(("text", "seconds"), [("5s", 5.0), ("500ms", 0.5), ("2m", 120.0),
                                                (3, 3.0), ("1.5s", 1.5)])
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("timeout", ["99999999m", "86401", "1" + "0" * 400])
def test_a_timeout_longer_than_a_day_is_refused_at_its_place(timeout: str) -> None:
    text = (ROOT / "runbooks" / "training-hang.yaml").read_text(encoding="utf-8")
    text = re.sub(r"timeout: \d+s", f"timeout: {timeout}", text, count=1)
    problems = [str(p) for p in load_text(text, "t.yaml").problems]
    assert len(problems) == 1 and ".check.timeout" in problems[0], problems
    assert "day" in problems[0]
