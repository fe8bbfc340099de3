"""`runbook test --coverage`: steps, branches (defaults included) and conclusions the cases reach,
credited to the runbook that owns them, measured from real walks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runbook.library.runbooks import load_library
from runbook.run.walk import Walk
from runbook.testing.coverage import Gap, coverage, reached_by, union
from runbook.testing.runner import ReplayTransport
from runbook.transports import Node

MAIN = """apiVersion: runbook/v1
id: main
version: 1.0.0
title: {en: Main, zh: 主流程}
summary: {en: Main tree, zh: 主诊断树}
start: first
steps:
  first:
    title: {en: First, zh: 第一步}
    check: {type: log, with: {path: /x}}
    branches:
      - when: result.age_s > 100
        goto: stale
      - when: result.age_s > 10
        goto: other:deep
    default: second
  second:
    title: {en: Second, zh: 第二步}
    check: {type: log, with: {path: /y}}
    branches:
      - when: result.exists
        goto: fine
    default: stale
conclusions:
  fine: {severity: ok, taxonomy: [], title: {en: Fine, zh: 正常}, explanation: {en: Ok, zh: 好}}
  stale: {severity: warning, taxonomy: [hang.dataloader], title: {en: Stale, zh: 停滞},
          explanation: {en: Old, zh: 旧}}
"""

OTHER = """apiVersion: runbook/v1
id: other
version: 1.0.0
title: {en: Other, zh: 另一个}
summary: {en: Other tree, zh: 另一棵诊断树}
start: deep
steps:
  deep:
    title: {en: Deep, zh: 深入}
    check: {type: log, with: {path: /z}}
    branches:
      - when: result.exists
        goto: found
    default: lost
conclusions:
  found: {severity: info, taxonomy: [], title: {en: Found, zh: 找到}, explanation: {en: F, zh: 找}}
  lost: {severity: info, taxonomy: [], title: {en: Lost, zh: 丢失}, explanation: {en: L, zh: 丢}}
"""


def library(tmp_path: Path) -> Any:
    (tmp_path / "main.yaml").write_text(MAIN)
    (tmp_path / "other.yaml").write_text(OTHER)
    lib = load_library([tmp_path])
    assert not lib.problems, [str(p) for p in lib.problems]
    return lib


def walk(lib: Any, results: dict[str, Any]) -> Any:
    outcomes = Walk(lib, lib.get("main"), [Node("n")], ReplayTransport({"n": results}), {}).run()
    return reached_by("main", outcomes)


def test_one_walk_reaches_its_steps_branches_and_conclusion(tmp_path: Path) -> None:
    lib = library(tmp_path)
    reach = walk(lib, {"first": {"age_s": 1}, "second": {"exists": True}})
    assert reach.steps == {("main", "first"), ("main", "second")}
    assert reach.branches == {("main", "first", None), ("main", "second", 0)}
    assert reach.conclusions == {("main", "fine")}
    cov = coverage(lib.get("main"), reach)
    assert (cov.steps, cov.branches, cov.conclusions) == ((2, 2), (2, 5), (1, 2))
    assert [str(g) for g in cov.unreached_branches] == [
        "steps.first.branches[0] (when: result.age_s > 100)",
        "steps.first.branches[1] (when: result.age_s > 10)",
        "steps.second.default"]
    assert [str(g) for g in cov.unreached_conclusions] == ["conclusions.stale"]
    assert not cov.complete


def test_a_goto_into_another_runbook_counts_for_the_runbook_that_owns_the_step(tmp_path: Path) -> None:
    lib = library(tmp_path)
    reach = walk(lib, {"first": {"age_s": 50}, "other:deep": {"exists": False}})
    assert reach.steps == {("main", "first"), ("other", "deep")}
    assert reach.branches == {("main", "first", 1), ("other", "deep", None)}
    assert reach.conclusions == {("other", "lost")}
    other = coverage(lib.get("other"), reach)
    assert (other.steps, other.branches, other.conclusions) == ((1, 1), (1, 2), (1, 2))
    assert [g.path for g in other.unreached_branches] == ["steps.deep.branches[0]"]
    assert coverage(lib.get("main"), reach).steps == (1, 2)


def test_all_cases_together_make_a_runbook_complete(tmp_path: Path) -> None:
    lib = library(tmp_path)
    cases = [{"first": {"age_s": 1}, "second": {"exists": True}},
             {"first": {"age_s": 1}, "second": {"exists": False}},
             {"first": {"age_s": 500}},
             {"first": {"age_s": 50}, "other:deep": {"exists": True}}]
    cov = coverage(lib.get("main"), union(walk(lib, c) for c in cases))
    assert cov.complete and cov.unreached_steps == []
    assert (cov.branches, cov.conclusions) == ((5, 5), (2, 2))


def test_a_check_no_branch_handles_reaches_the_step_but_no_branch(tmp_path: Path) -> None:
    lib = library(tmp_path)
    reach = walk(lib, {"first": {"age_s": 1, "timed_out": True}})  # a hang never takes the default
    assert reach.steps == {("main", "first")} and reach.branches == frozenset()


def test_the_gap_of_a_default_names_no_condition() -> None:
    assert str(Gap("steps.x.default")) == "steps.x.default"


def test_cli_coverage_lists_what_is_missing_and_exits_1(runbook_cli, tmp_path: Path) -> None:
    library(tmp_path)
    (tmp_path / "main.tests.yaml").write_text("""runbook: main
cases:
  - name: fresh
    results: {first: {age_s: 1}, second: {exists: true}}
    expect: {conclusion: fine}
  - name: old
    results: {first: {age_s: 500}}
    expect: {conclusion: stale}
""")
    (tmp_path / "other.tests.yaml").write_text("""runbook: other
cases:
  - name: found
    results: {deep: {exists: true}}
    expect: {conclusion: found}
  - name: lost
    results: {deep: {exists: false}}
    expect: {conclusion: lost}
""")
    plain = runbook_cli("test", str(tmp_path))
    assert plain.returncode == 0, plain.stdout  # without --coverage only conclusions must be reached
    out = runbook_cli("test", "--coverage", str(tmp_path))
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    at = lines.index("coverage:")
    assert lines[at + 1:] == [
        "main   steps 2/2  branches 3/5  conclusions 2/2",
        "    steps.first.branches[1] (when: result.age_s > 10)",
        "    steps.second.default",
        "other  steps 1/1  branches 2/2  conclusions 2/2",
    ]
    doc = json.loads(runbook_cli("test", "--coverage", "--format", "json", str(tmp_path)).stdout)
    main = next(c for c in doc["coverage"] if c["runbook"] == "main")
    assert main["branches"] == {"reached": 3, "total": 5} and main["complete"] is False
    assert main["unreached_branches"] == [
        {"path": "steps.first.branches[1]", "when": "result.age_s > 10"},
        {"path": "steps.second.default", "when": None}]


def test_cli_coverage_passes_once_every_branch_is_reached(runbook_cli, tmp_path: Path) -> None:
    library(tmp_path)
    (tmp_path / "main.tests.yaml").write_text("""runbook: main
cases:
  - {name: fresh, results: {first: {age_s: 1}, second: {exists: true}}, expect: {conclusion: fine}}
  - {name: gone, results: {first: {age_s: 1}, second: {exists: false}}, expect: {conclusion: stale}}
  - {name: old, results: {first: {age_s: 500}}, expect: {conclusion: stale}}
  - name: elsewhere
    results: {first: {age_s: 50}, "other:deep": {exists: true}}
    expect: {conclusion: found}
""")
    (tmp_path / "other.tests.yaml").write_text("""runbook: other
cases:
  - {name: lost, results: {deep: {exists: false}}, expect: {conclusion: lost}}
""")
    out = runbook_cli("test", "--coverage", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    # other:found is reached only through main's goto, and that counts for `other`.
    assert "other  steps 1/1  branches 2/2  conclusions 2/2" in out.stdout
    assert "(coverage)" not in out.stdout
