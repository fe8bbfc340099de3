"""`runbook test --coverage`: which steps, branches and conclusions the test cases reach.

Pure functions: `reached_by` turns one case's walk outcomes into the parts it went through,
`coverage` measures one runbook against everything every case reached. A part is credited to
the runbook that owns it, so a step reached through `goto: other-runbook:step` counts for
`other-runbook`. A branch is (step, index) or (step, default), read from `Evidence.branch`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from runbook.format.model import Runbook
from runbook.run.walk import NodeOutcome

DEFAULT = None  # the branch "index" of a step's default


@dataclass(frozen=True)
class Reached:
    """Parts of runbooks walked through, each keyed by its owning runbook's id."""

    steps: frozenset[tuple[str, str]] = frozenset()
    branches: frozenset[tuple[str, str, int | None]] = frozenset()
    conclusions: frozenset[tuple[str, str]] = frozenset()

    def __or__(self, other: Reached) -> Reached:
        return Reached(self.steps | other.steps, self.branches | other.branches,
                       self.conclusions | other.conclusions)


@dataclass
class Gap:
    """One part no case reaches, named by its path in the runbook file."""

    path: str  # steps.gpu-state.branches[2] | steps.gpu-state.default | conclusions.x
    when: str | None = None  # a branch's condition, to say which one

    def __str__(self) -> str:
        return f"{self.path} (when: {self.when})" if self.when else self.path


@dataclass
class Coverage:
    runbook: str
    steps: tuple[int, int]  # (reached, total)
    branches: tuple[int, int]
    conclusions: tuple[int, int]
    unreached_steps: list[str] = field(default_factory=list)
    unreached_branches: list[Gap] = field(default_factory=list)
    unreached_conclusions: list[Gap] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every branch (defaults included) and every conclusion is reached."""
        return not self.unreached_branches and not self.unreached_conclusions

    def to_json(self) -> dict[str, Any]:
        def ratio(pair: tuple[int, int]) -> dict[str, int]:
            return {"reached": pair[0], "total": pair[1]}

        return {"runbook": self.runbook, "steps": ratio(self.steps),
                "branches": ratio(self.branches), "conclusions": ratio(self.conclusions),
                "complete": self.complete, "unreached_steps": self.unreached_steps,
                "unreached_branches": [{"path": g.path, "when": g.when}
                                       for g in self.unreached_branches],
                "unreached_conclusions": [g.path for g in self.unreached_conclusions]}


def split_step(root: str, qualified: str) -> tuple[str, str]:
    """`rid:step` -> (rid, step); a bare step belongs to the runbook the walk started in."""
    rid, sep, step = qualified.partition(":")
    return (rid, step) if sep else (root, qualified)


def reached_by(root: str, outcomes: Iterable[NodeOutcome]) -> Reached:
    """What one case's walk went through; `root` is the id of the runbook it started in."""
    steps: set[tuple[str, str]] = set()
    branches: set[tuple[str, str, int | None]] = set()
    conclusions: set[tuple[str, str]] = set()
    for outcome in outcomes:
        for evidence in outcome.evidence:
            rid, step = split_step(root, evidence.step)
            steps.add((rid, step))
            if evidence.goto is not None:  # no goto: no branch matched (a failure, not a branch)
                branches.add((rid, step, evidence.branch))
        if outcome.conclusion is not None and outcome.conclusion_runbook is not None:
            conclusions.add((outcome.conclusion_runbook.id, outcome.conclusion.id))
    return Reached(frozenset(steps), frozenset(branches), frozenset(conclusions))


def union(parts: Iterable[Reached]) -> Reached:
    total = Reached()
    for part in parts:
        total = total | part
    return total


def coverage(runbook: Runbook, reached: Reached) -> Coverage:
    """How much of `runbook` the cases (all of them, of every runbook) reached."""
    rid = runbook.id
    unreached_steps = [s for s in runbook.steps if (rid, s) not in reached.steps]
    all_branches: list[tuple[tuple[str, str, int | None], Gap]] = []
    for sid, step in runbook.steps.items():
        for i, branch in enumerate(step.branches):
            all_branches.append(((rid, sid, i), Gap(f"steps.{sid}.branches[{i}]", branch.when)))
        if step.default is not None:
            all_branches.append(((rid, sid, DEFAULT), Gap(f"steps.{sid}.default")))
    unreached_branches = [gap for key, gap in all_branches if key not in reached.branches]
    unreached_conclusions = [Gap(f"conclusions.{c}") for c in runbook.conclusions
                             if (rid, c) not in reached.conclusions]
    return Coverage(
        rid,
        steps=(len(runbook.steps) - len(unreached_steps), len(runbook.steps)),
        branches=(len(all_branches) - len(unreached_branches), len(all_branches)),
        conclusions=(len(runbook.conclusions) - len(unreached_conclusions),
                     len(runbook.conclusions)),
        unreached_steps=unreached_steps, unreached_branches=unreached_branches,
        unreached_conclusions=unreached_conclusions)
