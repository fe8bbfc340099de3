"""`requires`: the oldest engine a runbook needs, checked against this engine's version."""

from __future__ import annotations

import pytest

import runbook
from runbook.format.engine_version import RequiresError, parse_requires
from runbook.format.loader import load_text

RUNBOOK = """\
apiVersion: runbook/v1
id: needs-engine
version: 1.0.0
requires: "{requires}"
title: {{en: Needs an engine, zh: 需要特定引擎}}
summary: {{en: A runbook with a requirement., zh: 带有引擎版本要求的 runbook。}}
start: look
steps:
  look:
    title: {{en: Look, zh: 查看}}
    check: {{type: file, with: {{path: /tmp}}}}
    default: done
conclusions:
  done:
    severity: ok
    taxonomy: []
    title: {{en: Done, zh: 完成}}
    explanation: {{en: Nothing to do., zh: 无需处理。}}
"""


def load(requires: str, extra: str = "") -> list[str]:
    text = RUNBOOK.format(requires=requires) + extra
    return [str(p) for p in load_text(text, "rb.yaml").problems]


@pytest.mark.parametrize("spec", [">=0.1", ">=0.1.0", ">=0", ">= 0.1 , <2", ">=0.1,<0.2,<3"])
def test_a_met_requirement_loads_cleanly(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runbook, "__version__", "0.1.0")
    assert load(spec) == []


def test_an_unmet_requirement_is_one_error_at_requires() -> None:
    assert load(">=999.1") == [
        f"rb.yaml:4:11: requires: this runbook needs runbook engine >=999.1 but this is "
        f"{runbook.__version__} (upgrade: pip install -U runbook)"]


def test_the_engine_version_is_the_package_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runbook, "__version__", "0.2.9")
    assert load(">=0.3") == ["rb.yaml:4:11: requires: this runbook needs runbook engine >=0.3 but "
                             "this is 0.2.9 (upgrade: pip install -U runbook)"]
    monkeypatch.setattr(runbook, "__version__", "0.3.0rc1")  # a pre-release of 0.3 counts as 0.3
    assert load(">=0.3") == []
    monkeypatch.setattr(runbook, "__version__", "2.0.0")
    assert load(">=0.3, <2") == ["rb.yaml:4:11: requires: this runbook needs runbook engine "
                                 ">=0.3, <2 but this is 2.0.0 (install a matching engine: "
                                 "pip install 'runbook>=0.3,<2')"]


def test_an_unmet_requirement_hides_the_newer_format_s_other_problems() -> None:
    # A field this engine does not know, a check type it does not have: the newer format's.
    text = RUNBOOK.format(requires=">=7").replace("type: file", "type: gpu-timeline")
    problems = [str(p) for p in load_text(text + "telemetry: {enabled: true}\n", "rb.yaml").problems]
    assert problems == ["rb.yaml:4:11: requires: this runbook needs runbook engine >=7 but this "
                        f"is {runbook.__version__} (upgrade: pip install -U runbook)"]
    # Without the requirement, the same file gets the schema's errors instead.
    met = [str(p) for p in load_text(text.replace('">=7"', '">=0"') +
                                     "telemetry: {enabled: true}\n", "rb.yaml").problems]
    assert len(met) == 2 and "unknown field 'telemetry'" in met[1] and "gpu-timeline" in met[0]


def test_an_unmet_requirement_comes_before_the_api_version() -> None:
    text = RUNBOOK.format(requires=">=9").replace("runbook/v1", "runbook/v2")
    assert [p.message for p in load_text(text, "rb.yaml").problems] == [
        f"this runbook needs runbook engine >=9 but this is {runbook.__version__} "
        "(upgrade: pip install -U runbook)"]


@pytest.mark.parametrize(("spec", "why"), [
    ("0.3", "is not a version requirement"),
    (">0.3", "is not a version requirement"),
    (">=0.3.1.4", "is not a version requirement"),
    (">=latest", "is not a version requirement"),
    ("<2", "has no lower bound '>='"),
    (">=0.1, >=0.2", "gives two lower bounds"),
])
def test_a_malformed_requirement_says_the_expected_form(spec: str, why: str) -> None:
    problems = load(spec, extra="retries: 3\n")
    assert problems[0] == (f"rb.yaml:4:11: requires: {spec!r} {why} (expected e.g. '>=0.3', "
                           "'>=0.3.1' or '>=0.3, <2')")
    # It is not a reason to hide the file's other problems.
    assert len(problems) == 2 and "unknown field 'retries'" in problems[1]


def test_parse_requires_compares_releases_with_missing_parts_as_zero() -> None:
    requirement = parse_requires(">=0.3, <1.2")
    assert [requirement.allows(v) for v in ("0.2.9", "0.3", "0.3.0", "1.1.99", "1.2", "1.2.0.post1")] \
        == [False, True, True, True, False, False]
    with pytest.raises(RequiresError):
        parse_requires("")
